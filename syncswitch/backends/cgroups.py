"""CPU control groups for local nodes: find the cpu controller (cgroup v1 or v2), budget one group per node, clean up.

The write side: reading the mount table and a group's limit is the ground floor's (syncswitch/cgroup_cpu.py), which
the node side shares to read its own budget.

Layout: <cpu mount>/syncswitch/<job_id>@<owner>/node<i>, where <owner> is the managing process as
`<pid namespace inode>-<pid>-<start time in clock ticks>`. The name alone tells a later manager whether the
owner still runs, so a group left by a crashed manager is found and removed (its processes killed) at the
next start without any state file. The shared `syncswitch` parent stays: concurrent runs use it.
Groups live under the controller's mount root, so writing them takes root; on cgroup v2 the `cpu` controller
is enabled in the root's and each parent's cgroup.subtree_control (most systemd hosts already have it there).
"""

from __future__ import annotations

import abc
import errno
import math
import os
import re
import signal
import time

from syncswitch import cgroup_cpu
from syncswitch.errors import ClusterError

PARENT = "syncswitch"
MIN_QUOTA_US = 1000        # the kernel refuses a CFS quota under 1 ms (v1 and v2)
MAX_PERIOD_US = 1_000_000  # ... and a period over 1 s
# The CFS period: a node may run its quota in one burst and then sits throttled for the rest of the period, so a
# step that meets the throttle waits up to (1 - cpus) * period. Measured with bench/cgroup_period.py (0.45 CPU,
# steps of ~4 ms CPU, idle 16-core host, cgroup v2; bench/results/cgroup-period-* in git history): p99 step 60-80 ms
# and a
# step-time CV of ~2 at the kernel's default 100 ms, CV 0.6-0.7 at 20 ms, 0.36-0.45 at 10 ms, 0.32-0.43 at 5 ms,
# 0.29-0.37 at 2 ms, with no consistent throughput cost down to 5 ms (2 ms cost up to 15% in one run).
DEFAULT_PERIOD_US = 5_000
_RUN_NAME = re.compile(r"^(?P<job>[A-Za-z0-9_.-]+)@(?P<ns>\d+)-(?P<pid>\d+)-(?P<start>\d+)$")


class CgroupError(ClusterError):
    """The cpu controller is missing, read-only or not ours to write; the message says which."""


# -- processes ---------------------------------------------------------------------------------

def _start_ticks(pid: int) -> int | None:
    """The process's start time (clock ticks since boot), None if it does not exist."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _pid_namespace() -> int:
    """Inode of this process's pid namespace: a pid means something only inside its namespace."""
    return os.stat("/proc/self/ns/pid").st_ino


def owner_tag(pid: int | None = None) -> str:
    """`<pidns>-<pid>-<start>` of `pid` (default: this process)."""
    pid = os.getpid() if pid is None else pid
    return f"{_pid_namespace()}-{pid}-{_start_ticks(pid)}"


def owner_alive(ns: int, pid: int, start: int) -> bool | None:
    """Whether the owner still runs; None when it lives in another pid namespace (we cannot tell)."""
    if ns != _pid_namespace():
        return None
    return _start_ticks(pid) == start  # a dead pid, or one reused by a later process, differs


# -- controller flavours -----------------------------------------------------------------------

class CpuInterface(abc.ABC):
    """How one cgroup version spells a CPU limit."""

    version: int

    @abc.abstractmethod
    def write_limit(self, path: str, quota_us: int, period_us: int) -> None:
        """Limit the group at `path` to quota_us of CPU time per period_us."""

    def read_limit(self, path: str) -> tuple[int | None, int]:
        """(quota_us or None for unlimited, period_us) of the group at `path`."""
        return cgroup_cpu.read_limit(self.version, path)

    def enable_for_children(self, path: str) -> None:
        """Make the controller available to the groups created under `path` (v1: always is)."""


class CpuV1(CpuInterface):
    """cgroup v1 `cpu` controller: cpu.cfs_period_us and cpu.cfs_quota_us."""

    version = 1

    def write_limit(self, path, quota_us, period_us):
        # Unlimited first, so the kernel never checks the new period paired with the old quota.
        _write(os.path.join(path, "cpu.cfs_quota_us"), "-1")
        _write(os.path.join(path, "cpu.cfs_period_us"), str(period_us))
        _write(os.path.join(path, "cpu.cfs_quota_us"), str(quota_us))


class CpuV2(CpuInterface):
    """cgroup v2: `cpu.max` ("<quota> <period>" or "max <period>"), enabled via cgroup.subtree_control."""

    version = 2

    def write_limit(self, path, quota_us, period_us):
        _write(os.path.join(path, "cpu.max"), f"{quota_us} {period_us}")

    def enable_for_children(self, path):
        control = os.path.join(path, "cgroup.subtree_control")
        if "cpu" not in cgroup_cpu.read_file(control).split():
            _write(control, "+cpu")


# -- groups ------------------------------------------------------------------------------------

class CpuGroup:
    """One cgroup directory: its CPU budget and its processes."""

    def __init__(self, path: str, interface: CpuInterface):
        self.path = path
        self.interface = interface

    def __repr__(self) -> str:
        return f"CpuGroup({self.path!r})"

    @property
    def procs_file(self) -> str:
        return os.path.join(self.path, "cgroup.procs")

    def set_budget(self, cpus: float, period_us: int = DEFAULT_PERIOD_US) -> tuple[int, int]:
        """Cap the group at `cpus` CPUs; returns the (quota_us, period_us) written.

        A budget whose quota would fall under the kernel's 1 ms minimum keeps its ratio with a longer period.
        """
        if not cpus > 0:
            raise ValueError(f"cpus must be > 0, got {cpus!r}")
        period = period_us
        if cpus * period < MIN_QUOTA_US:
            period = min(MAX_PERIOD_US, math.ceil(MIN_QUOTA_US / cpus))
        quota = max(MIN_QUOTA_US, round(cpus * period))
        self.interface.write_limit(self.path, quota, period)
        return quota, period

    def budget(self) -> float | None:
        """The group's CPU cap in CPUs, None if unlimited."""
        quota, period = self.interface.read_limit(self.path)
        return None if quota is None else quota / period

    def stat(self) -> dict[str, int]:
        """The controller's counters (cpu.stat): nr_periods, nr_throttled, and throttled_time (v1, ns) or
        throttled_usec (v2)."""
        out = {}
        for line in cgroup_cpu.read_file(os.path.join(self.path, "cpu.stat")).splitlines():
            key, _, value = line.partition(" ")
            if value.strip().lstrip("-").isdigit():
                out[key] = int(value)
        return out

    def add(self, pid: int) -> None:
        _write(self.procs_file, str(pid))

    def command(self, cmd: list[str]) -> list[str]:
        """`cmd` wrapped so that it joins this group before it runs: a shell writes its own pid to cgroup.procs,
        then execs `cmd` in place (same pid), so all of `cmd`'s CPU time, Python's start-up included, is on the
        budget. (Writing the pid after Popen returns would leave the child's first instructions outside, and a
        preexec_fn forks beside the caller's threads.)"""
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', self.procs_file, *cmd]

    def pids(self) -> list[int]:
        try:
            return [int(line) for line in cgroup_cpu.read_file(self.procs_file).split()]
        except FileNotFoundError:
            return []

    def kill(self, timeout_s: float = 5.0) -> list[int]:
        """SIGKILL every process in the group until none is left (a forking one may add more); returns the
        pids that are still there at the deadline."""
        deadline = time.time() + timeout_s
        while True:
            pids = self.pids()
            if not pids or time.time() > deadline:
                return pids
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.02)

    def remove(self, timeout_s: float = 5.0) -> None:
        """Kill what runs in the group, then delete it; raises CgroupError if it cannot."""
        left = self.kill(timeout_s)
        if left:
            raise CgroupError(f"cgroup {self.path} still holds processes {left} after SIGKILL")
        deadline = time.time() + timeout_s
        while True:
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError as exc:
                # Killed processes leave the group a moment after their pids vanish from cgroup.procs.
                if exc.errno != errno.EBUSY or time.time() > deadline:
                    raise CgroupError(f"cannot remove cgroup {self.path}: {exc.strerror}") from None
                time.sleep(0.02)


class RunGroups:
    """One run's group and its per-node groups."""

    def __init__(self, path: str, interface: CpuInterface, num_nodes: int):
        self.path = path
        self.interface = interface
        self.nodes = [CpuGroup(os.path.join(path, f"node{i}"), interface) for i in range(num_nodes)]

    def remove(self, timeout_s: float = 5.0) -> None:
        """Kill every process of the run and delete its groups; raises CgroupError on the first that stays."""
        if not os.path.isdir(self.path):
            return
        nodes = [CpuGroup(os.path.join(self.path, name), self.interface) for name in sorted(os.listdir(self.path))
                 if os.path.isdir(os.path.join(self.path, name))]
        problems = []
        for group in nodes:
            try:
                group.remove(timeout_s)
            except CgroupError as exc:
                problems.append(str(exc))
        if problems:
            raise CgroupError("; ".join(problems))
        CpuGroup(self.path, self.interface).remove(timeout_s)
        try:
            # The shared parent goes with the last run: nothing of syncswitch stays in the hierarchy.
            os.rmdir(os.path.dirname(self.path))
        except OSError:
            pass  # another run's group is still in it (or it is gone already)


class CpuHierarchy:
    """The mounted cpu controller and syncswitch's part of it."""

    def __init__(self, mount: str, interface: CpuInterface, read_only: bool = False):
        self.mount = mount
        self.interface = interface
        self.read_only = read_only

    def __repr__(self) -> str:
        return f"CpuHierarchy(v{self.interface.version} at {self.mount})"

    @property
    def parent(self) -> str:
        return os.path.join(self.mount, PARENT)

    @classmethod
    def find(cls, mounts: str = "/proc/mounts") -> "CpuHierarchy":
        """The cpu controller from the mount table: a v1 hierarchy with `cpu`, else a v2 mount offering it."""
        try:
            table = cgroup_cpu.cgroup_mounts(mounts)
        except OSError as exc:
            raise CgroupError(f"cannot read the mount table {mounts}: {exc.strerror}") from None
        v2_without_cpu = None
        for mount in table:
            if mount.version == 1:
                return cls(mount.path, CpuV1(), read_only=mount.read_only)
        for mount in table:
            if mount.version != 2:
                continue
            try:
                controllers = cgroup_cpu.read_file(os.path.join(mount.path, "cgroup.controllers")).split()
            except OSError:
                continue
            if "cpu" in controllers:
                return cls(mount.path, CpuV2(), read_only=mount.read_only)
            v2_without_cpu = mount.path
        if v2_without_cpu:
            raise CgroupError(f"no cpu controller: the cgroup v2 mount {v2_without_cpu} does not offer 'cpu' "
                              "(it is bound to another hierarchy or not delegated) and no cgroup v1 'cpu' is mounted")
        raise CgroupError(f"no cpu controller: {mounts} lists no cgroup v1 'cpu' hierarchy and no cgroup v2 mount")

    def prepare(self) -> None:
        """Create the shared parent group and check we may write it; raises CgroupError naming the reason."""
        if self.read_only:
            raise CgroupError(f"the cgroup filesystem at {self.mount} is mounted read-only")
        try:
            self.interface.enable_for_children(self.mount)
            os.makedirs(self.parent, exist_ok=True)
            self.interface.enable_for_children(self.parent)
            # Creating a group is the real test: permission bits on cgroupfs may allow mkdir but not writes.
            probe = os.path.join(self.parent, f".probe-{owner_tag()}")
            os.mkdir(probe)
            os.rmdir(probe)
        except OSError as exc:
            raise CgroupError(_reason(exc, self.parent)) from None

    def create_run(self, job_id: str, num_nodes: int, cpus, period_us: int = DEFAULT_PERIOD_US) -> RunGroups:
        """The run's group, owned by this process, with `num_nodes` node groups capped at `cpus` each (a number,
        or one per node)."""
        budgets = [float(cpus)] * num_nodes if isinstance(cpus, (int, float)) else [float(c) for c in cpus]
        if len(budgets) != num_nodes:
            raise ValueError(f"cpus={cpus!r}: one budget per node ({num_nodes}) or one for all")
        name = f"{re.sub(r'[^A-Za-z0-9_.-]', '_', job_id)}@{owner_tag()}"
        run = RunGroups(os.path.join(self.parent, name), self.interface, num_nodes)
        try:
            # The parent may have gone with another run's teardown since prepare(): make it again, cpu enabled.
            os.makedirs(self.parent, exist_ok=True)
            self.interface.enable_for_children(self.parent)
            # exist_ok: the name carries this process's identity, so an existing group is one it made (this also
            # lets a test lay out a cgroup v2 tree beforehand, files included, as the kernel would at mkdir).
            os.makedirs(run.path, exist_ok=True)
            self.interface.enable_for_children(run.path)
            for node, budget in zip(run.nodes, budgets):
                os.makedirs(node.path, exist_ok=True)
                node.set_budget(budget, period_us)
        except OSError as exc:
            try:
                run.remove()
            except CgroupError:
                pass  # left for the stale cleanup; the error below is the one to report
            raise CgroupError(_reason(exc, run.path)) from None
        return run

    def runs(self) -> list[tuple[str, bool | None]]:
        """(path, owner alive: True/False/None if unknown) of every syncswitch run group."""
        try:
            names = sorted(os.listdir(self.parent))
        except FileNotFoundError:
            return []
        out = []
        for name in names:
            match = _RUN_NAME.match(name)
            if match and os.path.isdir(os.path.join(self.parent, name)):
                alive = owner_alive(int(match["ns"]), int(match["pid"]), int(match["start"]))
                out.append((os.path.join(self.parent, name), alive))
        return out

    def clean_stale(self) -> tuple[list[str], list[str]]:
        """Remove the run groups whose manager is dead, killing what still runs there.

        Returns (removed paths, one-line problems of those that could not be removed). Groups of live managers
        and of managers in other pid namespaces are left alone.
        """
        removed, problems = [], []
        for path, alive in self.runs():
            if alive is False:
                try:
                    RunGroups(path, self.interface, 0).remove()
                    removed.append(path)
                except CgroupError as exc:
                    problems.append(str(exc))
        return removed, problems


# -- file helpers ------------------------------------------------------------------------------

def _write(path: str, value: str) -> None:
    # One write() per value: cgroupfs parses each write on its own, and buffering could merge or split them.
    # No O_CREAT: cgroupfs answers EACCES for a file it does not offer, which would read as a permission problem.
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, value.encode("ascii"))
    finally:
        os.close(fd)


def _reason(exc: OSError, path: str) -> str:
    if exc.errno == errno.EROFS:
        return f"the cgroup filesystem holding {path} is read-only"
    if exc.errno in (errno.EACCES, errno.EPERM):
        if os.geteuid() != 0:
            return f"cannot write {path}: not root (run the manager as root)"
        return f"cannot write {path}: permission denied even as root (a container without cgroup rights?)"
    return f"cannot write {path}: {exc.strerror}"
