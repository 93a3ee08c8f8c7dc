"""Atomic file writes (a temporary file in the same folder, fsync, then a rename, so readers never see half a file),
and whether a path stays inside a folder."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from typing import Any, Callable


def write_atomic(path: str | os.PathLike, write: Callable[[str], None]) -> None:
    """Call `write(temporary_path)`, then make its file `path` in one rename; nothing is left on failure."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, "rb+") as fh:  # the data reaches the disk before the rename makes it visible
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> None:
    def write(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            fh.write(data)

    write_atomic(path, write)


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: str | os.PathLike, doc: Any, *, indent: int = 2, sort_keys: bool = False) -> None:
    """`doc` as JSON (non-finite floats and numpy scalars written as floats), ending in a newline."""
    write_text_atomic(path, json.dumps(doc, indent=indent, sort_keys=sort_keys, default=float) + "\n")


def inside(path: str | os.PathLike, root: str | os.PathLike) -> bool:
    """Whether `path`, links resolved, is `root` or lies below it."""
    real, base = os.path.realpath(path), os.path.realpath(root)
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)
