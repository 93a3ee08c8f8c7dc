"""Reading CPU control groups: the cgroup mounts, a process's cpu group, a group's CPU limit (v1 or v2).

The read side only, on the ground floor because two rooms of one floor need it: the node side asks how many CPUs
its own task may use (node/threads.py), the local backend finds the controller it writes its budgets into and
reads them back (backends/cgroups.py, which keeps creating groups, writing limits and moving processes).
"""

from __future__ import annotations

import dataclasses
import os
import re


@dataclasses.dataclass(frozen=True)
class CgroupMount:
    """One line of the mount table that may hold the cpu controller: a v1 hierarchy with `cpu`, or a v2 mount
    (whether a v2 mount offers `cpu` is in its cgroup.controllers, which the caller reads if it cares)."""

    path: str
    version: int
    read_only: bool


def read_file(path: str) -> str:
    # cgroupfs files hold ASCII numbers and names; anything else is not a file of ours to parse.
    with open(path, encoding="ascii") as fh:
        return fh.read()


def unescape(path: str) -> str:
    """A mount point as the kernel spells it in /proc/mounts (and mountinfo): space, tab, newline and backslash
    are octal escapes (`\\040`), or a path with a space would split the line's fields."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), path)


def cgroup_mounts(mounts: str = "/proc/mounts") -> list[CgroupMount]:
    """The cgroup mounts of the table at `mounts`, in its order, paths unescaped; raises OSError if unreadable."""
    with open(mounts, encoding="utf-8") as fh:
        table = [line.split() for line in fh]
    out = []
    for fields in table:
        if len(fields) < 4:
            continue  # not a mount line; the kernel writes six fields
        where, fstype, opts = unescape(fields[1]), fields[2], fields[3].split(",")
        if fstype == "cgroup" and "cpu" in opts:
            out.append(CgroupMount(where, 1, "ro" in opts))
        elif fstype == "cgroup2":
            out.append(CgroupMount(where, 2, "ro" in opts))
    return out


def process_group(proc_cgroup: str = "/proc/self/cgroup") -> tuple[int, str] | None:
    """(cgroup version, path) of a process's group under the `cpu` controller: v1's where the cpu controller is
    mounted as v1, else the unified (v2) group; None where there is none to read."""
    v1 = v2 = None
    try:
        with open(proc_cgroup, encoding="utf-8") as f:
            for line in f:
                number, controllers, path = line.rstrip("\n").split(":", 2)
                if "cpu" in controllers.split(","):
                    v1 = path
                elif number == "0" and not controllers:
                    v2 = path
    except (OSError, ValueError):
        return None
    return (1, v1) if v1 is not None else (2, v2) if v2 is not None else None


def read_limit(version: int, path: str) -> tuple[int | None, int]:
    """(quota_us or None for unlimited, period_us) of the group at `path`; raises OSError or ValueError."""
    if version == 1:
        quota = int(read_file(os.path.join(path, "cpu.cfs_quota_us")))
        period = int(read_file(os.path.join(path, "cpu.cfs_period_us")))
        return (None if quota < 0 else quota), period
    quota, period = read_file(os.path.join(path, "cpu.max")).split()
    return (None if quota == "max" else int(quota)), int(period)


def group_cpus(version: int, path: str) -> float | None:
    """The CPUs the group at `path` may use; None: unlimited or unreadable (a group without the controller's
    files, as a v2 group whose parent did not enable `cpu`, has no limit of its own)."""
    try:
        quota, period = read_limit(version, path)
    except (OSError, ValueError):
        return None
    return None if quota is None else quota / period


def tightest_limit(version: int, mount: str, path: str) -> float | None:
    """The CPUs the group at `path` (relative to the hierarchy mounted at `mount`) and its ancestors allow: a
    group's processes get no more than any group above it gives, so the smallest limit on the path counts."""
    parts = [p for p in path.split("/") if p]
    limits = [group_cpus(version, os.path.join(mount, *parts[:depth])) for depth in range(len(parts), -1, -1)]
    return min((limit for limit in limits if limit is not None), default=None)


def process_cpus(proc_cgroup: str = "/proc/self/cgroup", mounts: str = "/proc/mounts") -> float | None:
    """The CPUs a process's cgroup and its ancestors allow; None: no limit, or no cgroup to read."""
    group = process_group(proc_cgroup)
    if group is None:
        return None
    version, path = group
    try:
        mount = next((m.path for m in cgroup_mounts(mounts) if m.version == version), None)
    except OSError:
        return None
    return None if mount is None else tightest_limit(version, mount, path)
