"""`cluster:` options of the gce backend: one validator per key, defaults, and the resolved config."""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from typing import Any

from syncswitch.errors import SpecError
from syncswitch.registry import did_you_mean

DEFAULT_ZONE = "us-west1-b"            # the paper's region
DEFAULT_MACHINE = "n1-standard-8"      # the paper's 8 vCPU / 30 GB nodes
DEFAULT_ACCELERATOR = {"type": "nvidia-tesla-t4", "count": 1}  # the paper's K80 is retired
DEFAULT_IMAGE_PROJECT = "deeplearning-platform-release"
DEFAULT_IMAGE_FAMILY = "common-cu124-debian-11-py310"  # GPU driver installed at first boot
DEFAULT_SOURCE_RANGES = ("10.128.0.0/9",)  # internal range of an auto-mode VPC (the `default` network)
DEFAULT_SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)

# accelerator type -> regional quota metric; also the set of types this backend knows how to attach
GPU_QUOTA_METRICS = {
    "nvidia-tesla-t4": "NVIDIA_T4_GPUS",
    "nvidia-tesla-k80": "NVIDIA_K80_GPUS",
    "nvidia-tesla-p4": "NVIDIA_P4_GPUS",
    "nvidia-tesla-p100": "NVIDIA_P100_GPUS",
    "nvidia-tesla-v100": "NVIDIA_V100_GPUS",
    "nvidia-tesla-a100": "NVIDIA_A100_GPUS",
    "nvidia-a100-80gb": "NVIDIA_A100_80GB_GPUS",
    "nvidia-l4": "NVIDIA_L4_GPUS",
    "nvidia-h100-80gb": "NVIDIA_H100_GPUS",
}
# These attach to N1 machines; the others come bundled with their a2/g2/a3 machine types.
N1_GPUS = ("nvidia-tesla-t4", "nvidia-tesla-k80", "nvidia-tesla-p4", "nvidia-tesla-p100", "nvidia-tesla-v100")
DISK_TYPES = ("pd-balanced", "pd-ssd", "pd-standard")

_ZONE = re.compile(r"^[a-z]+-[a-z]+[0-9]+-[a-z]$")
_PROJECT = re.compile(r"^([a-z0-9.-]+:)?[a-z][-a-z0-9]{4,28}[a-z0-9]$")
_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_MACHINE = re.compile(r"^[a-z][a-z0-9]*-[a-z0-9-]+$")
_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[a-z]+$")


def _fail(field: str, value: Any, why: str) -> SpecError:
    return SpecError(f"{field}={value!r}: {why}")


def _str(value: Any, field: str, pattern: re.Pattern | None = None, what: str = "") -> str:
    if not isinstance(value, str) or not value:
        raise _fail(field, value, "must be a non-empty string")
    if pattern is not None and not pattern.match(value):
        raise _fail(field, value, f"not a valid {what}")
    return value


def _int(value: Any, field: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(field, value, "must be an integer")
    if not lo <= value <= hi:
        raise _fail(field, value, f"must be between {lo} and {hi}")
    return value


def _bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise _fail(field, value, "must be true or false")
    return value


def _str_list(value: Any, field: str, item) -> tuple:
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not value:
        raise _fail(field, value, "must be a non-empty list")
    out = tuple(item(v, f"{field}[{i}]") for i, v in enumerate(value))
    if len(set(out)) != len(out):
        raise _fail(field, list(value), "lists an entry twice")
    return out


def zone(value: Any, field: str) -> str:
    return _str(value, field, _ZONE, "zone (like us-west1-b)")


def zones(value: Any, field: str) -> tuple[str, ...]:
    return _str_list(value, field, zone)


def project(value: Any, field: str) -> str:
    return _str(value, field, _PROJECT, "project id")


def machine_type(value: Any, field: str) -> str:
    return _str(value, field, _MACHINE, "machine type (like n1-standard-8)")


def accelerator(value: Any, field: str) -> dict | None:
    if value is None:
        return None  # CPU-only nodes
    if not isinstance(value, dict):
        raise _fail(field, value, "must be a mapping {type, count} or null")
    for key in value:
        if key not in ("type", "count"):
            raise SpecError(f"unknown key {field}.{key}{did_you_mean(key, ('type', 'count'))}; valid: type, count")
    kind = value.get("type")
    if kind not in GPU_QUOTA_METRICS:
        raise SpecError(f"{field}.type={kind!r}: unknown accelerator{did_you_mean(kind, GPU_QUOTA_METRICS)}; "
                        f"valid: {', '.join(GPU_QUOTA_METRICS)}")
    count = value.get("count", 1)
    if isinstance(count, bool) or count not in (1, 2, 4, 8, 16):
        raise _fail(f"{field}.count", count, "must be 1, 2, 4, 8 or 16")
    return {"type": kind, "count": count}


def name(value: Any, field: str) -> str:
    return _str(value, field, _NAME, "resource name (lowercase letters, digits, '-')")


def disk_size_gb(value: Any, field: str) -> int:
    return _int(value, field, 10, 65536)


def disk_type(value: Any, field: str) -> str:
    if value not in DISK_TYPES:
        raise SpecError(f"{field}={value!r}: unknown disk type{did_you_mean(value, DISK_TYPES)}; "
                        f"valid: {', '.join(DISK_TYPES)}")
    return value


def service_account(value: Any, field: str) -> str:
    if value == "default":
        return value
    return _str(value, field, _EMAIL, "service account email (or 'default')")


def _scope(value: Any, field: str) -> str:
    value = _str(value, field)
    # Accept gcloud's short aliases ("cloud-platform") as well as full URLs.
    return value if value.startswith("https://") else f"https://www.googleapis.com/auth/{value}"


def scopes(value: Any, field: str) -> tuple[str, ...]:
    return _str_list(value, field, _scope)


def port(value: Any, field: str) -> int:
    return _int(value, field, 1024, 65535)


def labels(value: Any, field: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise _fail(field, value, "must be a mapping of label: value")
    out = {}
    for key, val in value.items():
        if not isinstance(key, str) or not _LABEL_KEY.match(key):
            raise _fail(f"{field}.{key}", val, "label keys use lowercase letters, digits, '-', '_' (max 63)")
        if key.startswith("syncswitch-"):
            raise _fail(f"{field}.{key}", val, "the syncswitch- prefix is reserved for syncswitch's own labels")
        val = str(val).lower() if isinstance(val, (int, bool)) else val
        if not isinstance(val, str) or not _LABEL_VALUE.match(val):
            raise _fail(f"{field}.{key}", val, "label values use lowercase letters, digits, '-', '_' (max 63)")
        out[key] = val
    return out


def _cidr(value: Any, field: str) -> str:
    try:
        net = ipaddress.ip_network(_str(value, field), strict=False)
    except ValueError:
        raise _fail(field, value, "not a CIDR range like 10.128.0.0/9") from None
    # The agent and TF ports carry the job token and unauthenticated TF traffic: VPC-internal only.
    if not net.is_private:
        raise _fail(field, value, "must be a private (VPC-internal) range; the agent and TF ports are never public")
    return str(net)


def source_ranges(value: Any, field: str) -> tuple[str, ...]:
    return _str_list(value, field, _cidr)


def install(value: Any, field: str) -> tuple[str, ...]:
    def item(v, f):
        v = _str(v, f)
        if any(c in v for c in "'\"`$;&|\n"):
            raise _fail(f, v, "a pip requirement or gs:// wheel path without quotes or shell characters")
        return v
    return _str_list(value, field, item)


def timeout_s(value: Any, field: str) -> int:
    return _int(value, field, 30, 7200)


def parallelism(value: Any, field: str) -> int:
    return _int(value, field, 1, 64)


VALIDATORS = {
    "project": project, "zone": zone, "zones": zones, "machine_type": machine_type,
    "accelerator": accelerator, "image_family": name, "image_project": project,
    "disk_size_gb": disk_size_gb, "disk_type": disk_type, "spot": _bool, "network": name,
    "subnetwork": name, "service_account": service_account, "scopes": scopes,
    "agent_port": port, "ps_port": port, "worker_port": port, "labels": labels,
    "source_ranges": source_ranges, "external_ip": _bool, "install": install,
    "boot_timeout_s": timeout_s, "parallelism": parallelism,
}


def check_combination(options: dict) -> None:
    """Cross-field rules the per-key validators cannot see."""
    defaults = {f.name: f.default for f in dataclasses.fields(GceConfig)}
    ports = {k: options.get(k, defaults[k]) for k in ("agent_port", "ps_port", "worker_port")}
    if len(set(ports.values())) != 3:
        raise SpecError("cluster.agent_port, cluster.ps_port and cluster.worker_port must differ; got "
                        + ", ".join(f"{k}={v}" for k, v in ports.items()))
    gpu = options.get("accelerator", DEFAULT_ACCELERATOR)
    machine = options.get("machine_type", DEFAULT_MACHINE)
    if gpu and gpu["type"] in N1_GPUS and not machine.startswith("n1-"):
        raise SpecError(f"cluster.accelerator.type={gpu['type']!r} attaches to n1-* machine types only, "
                        f"not cluster.machine_type={machine!r}")
    if "subnetwork" in options and "network" not in options:
        raise SpecError(f"cluster.subnetwork={options['subnetwork']!r} needs cluster.network (its VPC)")


@dataclasses.dataclass(frozen=True)
class GceConfig:
    """Validated options with defaults filled in."""

    project: str | None = None
    zones: tuple[str, ...] = (DEFAULT_ZONE,)
    machine_type: str = DEFAULT_MACHINE
    accelerator: dict | None = dataclasses.field(default_factory=lambda: dict(DEFAULT_ACCELERATOR))
    image_family: str = DEFAULT_IMAGE_FAMILY
    image_project: str = DEFAULT_IMAGE_PROJECT
    disk_size_gb: int = 100            # the paper's disk
    disk_type: str = "pd-balanced"
    spot: bool = False
    network: str = "default"
    subnetwork: str | None = None
    service_account: str = "default"
    scopes: tuple[str, ...] = DEFAULT_SCOPES
    agent_port: int = 7070
    ps_port: int = 2222
    worker_port: int = 2223
    labels: dict = dataclasses.field(default_factory=dict)
    source_ranges: tuple[str, ...] = DEFAULT_SOURCE_RANGES
    external_ip: bool = True           # pip needs the internet unless the VPC has Cloud NAT
    install: tuple[str, ...] = ()      # empty: syncswitch==<manager's version>
    boot_timeout_s: int = 1200         # driver install + pip install tensorflow take minutes
    parallelism: int = 16

    @property
    def region(self) -> str:
        return self.zones[0].rsplit("-", 1)[0]


def resolve(options: dict) -> GceConfig:
    """Fill defaults into validated options; `zone` leads the failover list `zones`."""
    opts = dict(options)
    first = opts.pop("zone", None)
    listed = tuple(opts.pop("zones", ()) or ())
    if first or listed:
        opts["zones"] = ((first,) if first else ()) + tuple(z for z in listed if z != first)
    return GceConfig(**opts)


def region_of(zone_name: str) -> str:
    return zone_name.rsplit("-", 1)[0]
