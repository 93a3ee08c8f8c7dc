"""The script's folder as one zip the agents unpack, so a script finds its helper modules and data files on every node."""

from __future__ import annotations

import dataclasses
import io
import os
import zipfile

LIMIT_BYTES = 32 << 20  # of files before compression: the bundle goes to every node in each launch request
SKIPPED_DIRS = ("__pycache__",)


@dataclasses.dataclass(frozen=True)
class Bundle:
    """What a launch request carries: the script's path inside the bundle and the zip (empty: the script alone)."""

    script_name: str
    data: bytes = b""
    files: int = 0
    size: int = 0
    overflow: str = ""  # why the script's folder was left out (over the limit), if it was


class BundleTooLarge(Exception):
    """The folder holds more than the limit; `size` is what was counted before giving up."""

    def __init__(self, folder: str, size: int):
        super().__init__(f"{folder} holds more than {LIMIT_BYTES >> 20} MiB of files")
        self.folder, self.size = folder, size


def _is_run_folder(path: str, names: list[str]) -> bool:
    # syncswitch's own output (runs/<job>-<time>/, with checkpoints) often sits in the folder it was started in.
    return "run.json" in names and "nodes" in names and os.path.isdir(os.path.join(path, "nodes"))


def files_of(folder: str, skip: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """(path, name in the bundle) of every file to ship: hidden entries, __pycache__, syncswitch run folders and
    the folders in `skip` stay home. Raises BundleTooLarge as soon as the files pass the limit."""
    folder = os.path.abspath(folder)
    skipped = {os.path.abspath(s) for s in skip}
    out, size = [], 0
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS
                         and os.path.join(root, d) not in skipped
                         and not _is_run_folder(os.path.join(root, d), os.listdir(os.path.join(root, d))))
        for name in sorted(names):
            path = os.path.join(root, name)
            if name.startswith(".") or name.endswith(".pyc") or not os.path.isfile(path):
                continue
            size += os.path.getsize(path)
            if size > LIMIT_BYTES:
                raise BundleTooLarge(folder, size)
            out.append((path, os.path.relpath(path, folder)))
    return out


def make(script: str, folder: str | None, skip: tuple[str, ...] = ()) -> Bundle:
    """The bundle of `folder` (which holds `script`), or of the script alone when `folder` is None."""
    if folder is None:
        return Bundle(os.path.basename(script))
    files = files_of(folder, skip)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for path, name in files:
            zf.write(path, name)
    return Bundle(os.path.relpath(script, folder), buffer.getvalue(), len(files),
                  sum(os.path.getsize(p) for p, _ in files))


def unpack(data: bytes, dest: str) -> None:
    """Extract a bundle into the empty folder `dest`; a member naming a path outside it is refused (ValueError)."""
    root = os.path.realpath(dest)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        for member in zf.infolist():
            target = os.path.realpath(os.path.join(root, member.filename))
            if os.path.commonpath([root, target]) != root:
                raise ValueError(f"bundle member {member.filename!r} leaves the script folder")
        zf.extractall(root)
