"""The script's folder as one zip the agents unpack, so a script finds its helper modules and data files on every
node."""

from __future__ import annotations

import dataclasses
import io
import os
import stat
import zipfile

from syncswitch.files import inside

LIMIT_BYTES = 32 << 20  # of files before compression: the bundle goes to every node in each launch request
LIMIT_FILES = 5000      # a folder of many small files (a home folder, a source tree) is not a script's folder
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

    def __init__(self, folder: str, size: int, files: int = 0):
        what = f"{LIMIT_FILES} files" if files > LIMIT_FILES else f"{LIMIT_BYTES >> 20} MiB of files"
        super().__init__(f"{folder} holds more than {what}")
        self.folder, self.size = folder, size


def _is_run_folder(path: str) -> bool:
    # syncswitch's own output (runs/<job>-<time>/, with checkpoints) often sits in the folder it was started in.
    try:
        return os.path.isfile(os.path.join(path, "run.json")) and os.path.isdir(os.path.join(path, "nodes"))
    except OSError:
        return False


@dataclasses.dataclass(frozen=True)
class Entry:
    """One thing to ship: a file (`link` None) or a symbolic link and its target."""

    path: str
    name: str  # inside the bundle
    link: str | None = None
    size: int = 0  # a file's bytes


def _link_target(path: str, folder: str) -> str:
    """A link's target as shipped: as written when it stays inside the folder (it resolves the same in the copy),
    else absolute (a `data -> /mnt/datasets/x` link resolves on every node that mounts the same path)."""
    target = os.readlink(path)
    resolved = os.path.normpath(os.path.join(os.path.dirname(path), target))
    return target if os.path.commonpath([folder, resolved]) == folder else resolved


def files_of(folder: str, skip: tuple[str, ...] = ()) -> list[Entry]:
    """Every file and symbolic link to ship: hidden entries, __pycache__, syncswitch run folders and the folders
    in `skip` stay home; links go as links, not followed. Raises BundleTooLarge as soon as the files pass the
    limit."""
    folder = os.path.abspath(folder)
    skipped = {os.path.abspath(s) for s in skip}
    out, size = [], 0
    for root, dirs, names in os.walk(folder):
        kept = []
        for d in sorted(dirs):
            path = os.path.join(root, d)
            if d.startswith(".") or d in SKIPPED_DIRS or path in skipped:
                continue
            if os.path.islink(path):
                out.append(Entry(path, os.path.relpath(path, folder), _link_target(path, folder)))
            elif not _is_run_folder(path):
                kept.append(d)
        dirs[:] = kept
        for name in sorted(names):
            path = os.path.join(root, name)
            if name.startswith(".") or name.endswith(".pyc"):
                continue
            if os.path.islink(path):
                out.append(Entry(path, os.path.relpath(path, folder), _link_target(path, folder)))
                continue
            if not os.path.isfile(path):
                continue
            out.append(Entry(path, os.path.relpath(path, folder), size=os.path.getsize(path)))
            size += out[-1].size
            if size > LIMIT_BYTES or len(out) > LIMIT_FILES:
                raise BundleTooLarge(folder, size, len(out))
    return out


LINK_MODE = (stat.S_IFLNK | 0o777) << 16  # a zip member's external attributes for a symbolic link (as Info-ZIP)


def make(script: str, folder: str | None, skip: tuple[str, ...] = ()) -> Bundle:
    """The bundle of `folder` (which holds `script`), or of the script alone when `folder` is None."""
    if folder is None:
        return Bundle(os.path.basename(script))
    entries = files_of(folder, skip)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for entry in entries:
            if entry.link is None:
                zf.write(entry.path, entry.name)
            else:
                info = zipfile.ZipInfo(entry.name)
                info.external_attr = LINK_MODE
                zf.writestr(info, entry.link)
    return Bundle(os.path.relpath(script, folder), buffer.getvalue(), len(entries), sum(e.size for e in entries))


def _is_link(member: zipfile.ZipInfo) -> bool:
    return stat.S_ISLNK(member.external_attr >> 16)


def unpack(data: bytes, dest: str) -> None:
    """Extract a bundle into the empty folder `dest`, links as links. A member naming a path outside the folder,
    or beneath a link (it would be written through it), is refused with ValueError."""
    root = os.path.realpath(dest)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        members = zf.infolist()
        links = {m.filename.rstrip("/") for m in members if _is_link(m)}
        for member in members:
            name = member.filename.rstrip("/")
            parents = {"/".join(name.split("/")[:k]) for k in range(1, name.count("/") + 1)}
            if not inside(os.path.join(root, name), root) or parents & links:
                raise ValueError(f"bundle member {member.filename!r} leaves the script folder")
        zf.extractall(root, [m for m in members if not _is_link(m)])
        for member in members:
            if _is_link(member):
                path = os.path.join(root, member.filename.rstrip("/"))
                os.makedirs(os.path.dirname(path), exist_ok=True)
                os.symlink(zf.read(member).decode("utf-8"), path)
