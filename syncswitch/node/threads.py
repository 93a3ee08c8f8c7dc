"""Whether a node's TensorFlow thread pools may spin, from how many CPUs its tasks share.

An idle thread of a TF (Eigen) pool spins looking for work before it parks: on a machine with a core per thread
that saves a wake-up, and TF does it by default. Where several nodes' tasks share fewer cores than they have pool
threads (local nodes on one machine, or a node in a CPU budget), the spinning takes the CPU another task's kernels
are waiting for. Measured with 4 local ResNet workers on 2 cores: 0.12 ms of every sample's 2.55 ms went to pool
threads looking for work, against 0.05 ms in TF2's own lone workers; with spinning off, ten side-by-side pairs
(BSP and no communication, 5 seeds) took 0.83-1.07x the time, median 0.95x, 6 of 10 faster: a small gain within
this host's noise, in the direction the profile predicts (bench/notebook/2026-11-27-coordinator-3.md).
"""

from __future__ import annotations

import os


def host_of(address: str) -> str:
    return address.rsplit(":", 1)[0]


def colocated(worker_hosts: list[str], index: int) -> int:
    """How many of the cluster's worker tasks (this one included) listen on this task's host: they share its
    machine (a node's parameter server runs in its worker's process)."""
    here = host_of(worker_hosts[index])
    return sum(1 for address in worker_hosts if host_of(address) == here)


def cpu_cgroup(proc_cgroup: str = "/proc/self/cgroup") -> tuple[int, str] | None:
    """(cgroup version, path) of this process's group under the `cpu` controller: v1's where the cpu controller is
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


def cpu_mount(version: int, mounts: str = "/proc/mounts") -> str | None:
    try:
        with open(mounts, encoding="utf-8") as f:
            for line in f:
                fields = line.split()
                if version == 1 and fields[2] == "cgroup" and "cpu" in fields[3].split(","):
                    return fields[1]
                if version == 2 and fields[2] == "cgroup2":
                    return fields[1]
    except (OSError, IndexError):
        return None
    return None


def group_limit(version: int, directory: str) -> float | None:
    """The CPUs the group at `directory` may use; None: unlimited or unreadable."""
    try:
        if version == 1:
            with open(os.path.join(directory, "cpu.cfs_quota_us")) as q, \
                    open(os.path.join(directory, "cpu.cfs_period_us")) as p:
                quota, period = int(q.read()), int(p.read())
            return quota / period if quota > 0 else None
        with open(os.path.join(directory, "cpu.max")) as f:
            quota, period = f.read().split()
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        return None


def cgroup_quota(proc_cgroup: str = "/proc/self/cgroup", mounts: str = "/proc/mounts") -> float | None:
    """The CPUs this process's cgroup and its ancestors allow (the tightest limit on the path); None: no limit,
    or no cgroup to read."""
    group = cpu_cgroup(proc_cgroup)
    mount = cpu_mount(group[0], mounts) if group else None
    if mount is None:
        return None
    version, path = group
    parts = [p for p in path.split("/") if p]
    limits = [group_limit(version, os.path.join(mount, *parts[:depth])) for depth in range(len(parts), -1, -1)]
    return min((limit for limit in limits if limit is not None), default=None)


def may_spin(worker_hosts: list[str], index: int, threads_per_task: int, cores: int, quota: float | None) -> bool:
    """Whether this task's pool threads may spin: only where they have a CPU each, both on the machine (its `cores`
    shared by every task on the host) and in the task's CPU budget (`quota`, its cgroup's CPUs, where it has one)."""
    if quota is not None and threads_per_task > quota:
        return False
    return colocated(worker_hosts, index) * threads_per_task <= cores


def spinning_allowed(worker_hosts: list[str], index: int, threads_per_task: int) -> bool:
    """may_spin for this process: the cores it may run on, its cgroup's quota."""
    return may_spin(worker_hosts, index, threads_per_task, len(os.sched_getaffinity(0)), cgroup_quota())
