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

from syncswitch import cgroup_cpu


def host_of(address: str) -> str:
    return address.rsplit(":", 1)[0]


def colocated(worker_hosts: list[str], index: int) -> int:
    """How many of the cluster's worker tasks (this one included) listen on this task's host: they share its
    machine (a node's parameter server runs in its worker's process)."""
    here = host_of(worker_hosts[index])
    return sum(1 for address in worker_hosts if host_of(address) == here)


def may_spin(worker_hosts: list[str], index: int, threads_per_task: int, cores: int, quota: float | None) -> bool:
    """Whether this task's pool threads may spin: only where they have a CPU each, both on the machine (its `cores`
    shared by every task on the host) and in the task's CPU budget (`quota`, its cgroup's CPUs, where it has one)."""
    if quota is not None and threads_per_task > quota:
        return False
    return colocated(worker_hosts, index) * threads_per_task <= cores


def spinning_allowed(worker_hosts: list[str], index: int, threads_per_task: int) -> bool:
    """may_spin for this process: the cores it may run on, its cgroup's quota (the tightest on its path)."""
    return may_spin(worker_hosts, index, threads_per_task, len(os.sched_getaffinity(0)), cgroup_cpu.process_cpus())
