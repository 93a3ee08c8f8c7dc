"""Name -> class registries so job specs can say `policy: elastic` or `backend: gce`."""

from __future__ import annotations

import difflib
from typing import Callable, Generic, TypeVar

from syncswitch.errors import SpecError

T = TypeVar("T")


def did_you_mean(name: str, choices) -> str:
    close = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


class Registry(Generic[T]):
    """Maps names to implementations; unknown names get an error listing the valid ones."""

    def __init__(self, kind: str):
        self.kind = kind
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
            raise SpecError(
                f"unknown {self.kind} {where}{did_you_mean(name, self._items)}; "
                f"valid: {', '.join(self.names())}"
            ) from None

    def __contains__(self, name: object) -> bool:
        return name in self._items
