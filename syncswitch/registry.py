"""Name -> implementation registries, so job specs can say `configuration: paper` or `backend: gce`.

The registries are declared here, on the ground floor, so that the spec can check names against them
without importing the floors above; this module imports nothing above it, by statement or by name. Each package
above registers its built-ins when it is imported by the layer that uses it: `syncswitch.protocols` (the catalog),
`syncswitch.policies` (configuration and straggler policies, switch rules) and `syncswitch.backends`. Whoever
loads a spec imports them first (the CLI, the cluster manager, the benchmarks and the tests do); a lookup in an
empty registry says which package to import.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Generic, TypeVar

from syncswitch.errors import SpecError

T = TypeVar("T")


def did_you_mean(name: str, choices) -> str:
    close = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


class Registry(Generic[T]):
    """Maps names to implementations; unknown names get an error listing the valid ones."""

    def __init__(self, kind: str, registered_by: str):
        self.kind = kind
        self._registered_by = registered_by  # the package whose import registers the built-ins, named when none is
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def deco(obj: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} registered twice")
            self._items[name] = obj
            return obj

        return deco

    def names(self) -> list[str]:
        return sorted(self._items)

    def get(self, name: str, field: str | None = None) -> T:
        try:
            return self._items[name]
        except (KeyError, TypeError):
            where = f"{field}={name!r}" if field else repr(name)
            if not self._items:
                raise SpecError(f"unknown {self.kind} {where}: none is registered; import {self._registered_by} "
                                "first") from None
            raise SpecError(
                f"unknown {self.kind} {where}{did_you_mean(name, self._items)}; "
                f"valid: {', '.join(self.names())}"
            ) from None

    def __contains__(self, name: object) -> bool:
        return name in self._items


CONFIGURATION_POLICIES: Registry = Registry("configuration policy", registered_by="syncswitch.policies")
STRAGGLER_POLICIES: Registry = Registry("straggler policy", registered_by="syncswitch.policies")
# Rules that time a scheduled switch out of BSP (syncswitch/policies/timing.py).
SWITCH_RULES: Registry = Registry("switch rule", registered_by="syncswitch.policies")
# Rules that judge whether a switch out of BSP buys time (syncswitch/policies/speed.py).
SWITCH_SPEEDS: Registry = Registry("speed rule", registered_by="syncswitch.policies")
BACKENDS: Registry = Registry("backend", registered_by="syncswitch.backends")
# Synchronization protocols: syncswitch/protocols/catalog.py Protocol entries (names, parameters, traits).
PROTOCOLS: Registry = Registry("protocol", registered_by="syncswitch.protocols")
