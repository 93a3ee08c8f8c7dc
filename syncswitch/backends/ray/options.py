"""`cluster:` options of the ray backend: one validator per key, and the resolved config with its defaults."""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

from syncswitch.errors import SpecError
from syncswitch.registry import did_you_mean

# Ray's built-in resource names are case-sensitive: `cpu` would be a custom resource no node has.
BUILTIN_RESOURCES = ("CPU", "GPU", "memory", "object_store_memory")
DEFAULT_RESOURCES = {"CPU": 1.0}
DEFAULT_PLACEMENT_TIMEOUT_S = 60.0
DEFAULT_READY_TIMEOUT_S = 120.0
_ADDRESS = re.compile(r"^(ray://)?[A-Za-z0-9.\-\[\]:]+:\d{1,5}$")


def _address(value: Any, field: str) -> str | None:
    """null (start a local Ray for the job), `auto` (the Ray this machine belongs to), `ray://host:port`
    (Ray Client, from a laptop) or `host:port` (the head's GCS address, on a cluster machine)."""
    if value is None or value == "auto":
        return value
    if not isinstance(value, str) or not _ADDRESS.match(value):
        raise SpecError(f"{field}={value!r}: must be null (start a local Ray), 'auto', 'ray://HOST:PORT' "
                        "or 'HOST:PORT' (the head node's address)")
    return value


def _resources(value: Any, field: str) -> dict[str, float]:
    if not isinstance(value, dict) or not value:
        raise SpecError(f"{field}={value!r}: must be a mapping of Ray resource names to amounts, e.g. "
                        "{CPU: 4, GPU: 1}")
    out = {}
    for name, amount in value.items():
        if not isinstance(name, str) or not name:
            raise SpecError(f"{field}: resource name {name!r} must be a non-empty string")
        if name not in BUILTIN_RESOURCES and name.lower() in (r.lower() for r in BUILTIN_RESOURCES):
            raise SpecError(f"{field}.{name}: Ray resource names are case-sensitive"
                            f"{did_you_mean(name.upper() if len(name) == 3 else name, BUILTIN_RESOURCES)}")
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not math.isfinite(amount) \
                or amount < 0:
            raise SpecError(f"{field}.{name}={amount!r}: must be a number >= 0")
        out[name] = float(amount)
    if not any(out.values()):
        raise SpecError(f"{field}={value!r}: at least one resource must be > 0 (one bundle per node is placed "
                        "by these amounts)")
    return out


def _bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise SpecError(f"{field}={value!r}: must be true or false")
    return value


def _seconds(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise SpecError(f"{field}={value!r}: must be a number of seconds > 0")
    return float(value)


VALIDATORS = {"address": _address, "resources_per_node": _resources, "shared_filesystem": _bool,
              "warm_spare": _bool, "fork_server": _bool, "placement_timeout_s": _seconds, "ready_timeout_s": _seconds}


@dataclasses.dataclass(frozen=True)
class RayConfig:
    address: str | None = None
    resources: dict = dataclasses.field(default_factory=lambda: dict(DEFAULT_RESOURCES))
    shared_filesystem: bool | None = None  # None: decided from where the nodes are (all on this machine)
    warm_spare: bool = True
    fork_server: bool = True  # nodes on the manager's machine fork their tasks from one TensorFlow import
    placement_timeout_s: float = DEFAULT_PLACEMENT_TIMEOUT_S
    ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S

    @property
    def bundle(self) -> dict[str, float]:
        """The placement-group bundle of one node (zero amounts dropped: Ray rejects them)."""
        return {k: v for k, v in self.resources.items() if v > 0}


def resolve(options: dict[str, Any]) -> RayConfig:
    """The validated options with their defaults."""
    return RayConfig(address=options.get("address"),
                     resources=dict(options.get("resources_per_node") or DEFAULT_RESOURCES),
                     shared_filesystem=options.get("shared_filesystem"),
                     warm_spare=options.get("warm_spare", True), fork_server=options.get("fork_server", True),
                     placement_timeout_s=options.get("placement_timeout_s", DEFAULT_PLACEMENT_TIMEOUT_S),
                     ready_timeout_s=options.get("ready_timeout_s", DEFAULT_READY_TIMEOUT_S))
