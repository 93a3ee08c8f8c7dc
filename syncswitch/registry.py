"""Name -> implementation registries, so job specs can say `configuration: paper` or `backend: gce`.

The registries are declared here, on the ground floor, so that the spec can check names against them
without importing the floors above. Backends register themselves when their package (`syncswitch.backends`)
is imported by the layer that uses them (the cluster manager, the CLI); the policy and protocol registries still
list the modules whose import registers their built-ins, imported on the first lookup.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from typing import Generic, TypeVar

from syncswitch.errors import SpecError

T = TypeVar("T")


def did_you_mean(name: str, choices) -> str:
    close = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


class Registry(Generic[T]):
    """Maps names to implementations; unknown names get an error listing the valid ones."""

    def __init__(self, kind: str, builtins: tuple[str, ...] = (), registered_by: str = ""):
        self.kind = kind
        self._builtins = builtins       # modules that register the built-in implementations
        self._registered_by = registered_by  # the package whose import registers them, named when none is
        self._loaded = not builtins
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def deco(obj: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} registered twice")
            self._items[name] = obj
            return obj

        return deco

    def _load(self) -> None:
        if not self._loaded:
            self._loaded = True
            for module in self._builtins:
                importlib.import_module(module)

    def names(self) -> list[str]:
        self._load()
        return sorted(self._items)

    def get(self, name: str, field: str | None = None) -> T:
        self._load()
        try:
            return self._items[name]
        except (KeyError, TypeError):
            where = f"{field}={name!r}" if field else repr(name)
            if not self._items and self._registered_by:
                raise SpecError(f"unknown {self.kind} {where}: none is registered; import {self._registered_by} "
                                "first") from None
            raise SpecError(
                f"unknown {self.kind} {where}{did_you_mean(name, self._items)}; "
                f"valid: {', '.join(self.names())}"
            ) from None

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._items


CONFIGURATION_POLICIES: Registry = Registry("configuration policy", builtins=("syncswitch.policies",))
STRAGGLER_POLICIES: Registry = Registry("straggler policy", builtins=("syncswitch.policies",))
# Rules that time a scheduled switch out of BSP (syncswitch/policies/timing.py).
SWITCH_RULES: Registry = Registry("switch rule", builtins=("syncswitch.policies",))
BACKENDS: Registry = Registry("backend", registered_by="syncswitch.backends")
# Synchronization protocols: syncswitch/protocols/catalog.py Protocol entries (names, parameters, traits).
PROTOCOLS: Registry = Registry("protocol", builtins=("syncswitch.protocols.catalog",))
