"""node/threads.py: idle pool threads spin only where every task's threads have a CPU."""

import os

from syncswitch.node import graph as graphmod
from syncswitch.node import threads

LOCAL = ["127.0.0.1:5001", "127.0.0.1:5002", "127.0.0.1:5003", "127.0.0.1:5004"]
SPREAD = ["10.0.0.1:2222", "10.0.0.2:2222", "10.0.0.3:2222", "10.0.0.1:2223"]


def test_tasks_on_one_host_are_counted_together():
    assert threads.colocated(LOCAL, 2) == 4
    assert threads.colocated(SPREAD, 0) == 2 and threads.colocated(SPREAD, 1) == 1


def test_local_nodes_sharing_two_cores_do_not_spin_and_a_node_alone_on_a_big_machine_does():
    assert not threads.may_spin(LOCAL, 0, 3, cores=2, quota=None)
    assert threads.may_spin(LOCAL, 0, 3, cores=16, quota=None)
    assert threads.may_spin(SPREAD, 1, 3, cores=4, quota=None)
    assert not threads.may_spin(SPREAD, 0, 3, cores=4, quota=None)  # two tasks on 10.0.0.1


def test_a_node_in_a_budget_smaller_than_its_threads_does_not_spin():
    assert not threads.may_spin(SPREAD, 1, 3, cores=16, quota=0.4)
    assert threads.may_spin(SPREAD, 1, 3, cores=16, quota=4.0)


def _groups(root, files, limits):
    for path, content in limits:
        os.makedirs(root / path, exist_ok=True)
        for name, value in zip(files, content):
            (root / path / name).write_text(value + "\n")


def test_the_tightest_v2_limit_on_the_cgroup_path_is_the_budget(tmp_path):
    (tmp_path / "cgroup").write_text("0::/syncswitch/run/node1\n")
    (tmp_path / "mounts").write_text(f"cgroup2 {tmp_path / 'fs'} cgroup2 rw,nosuid 0 0\n")
    _groups(tmp_path / "fs", ["cpu.max"], [("syncswitch", ["800000 100000"]), ("syncswitch/run", ["max 100000"]),
                                           ("syncswitch/run/node1", ["40000 100000"])])
    quota = threads.cgroup_quota(str(tmp_path / "cgroup"), str(tmp_path / "mounts"))
    assert quota == 0.4
    (tmp_path / "fs/syncswitch/run/node1/cpu.max").write_text("max 100000\n")
    assert threads.cgroup_quota(str(tmp_path / "cgroup"), str(tmp_path / "mounts")) == 8.0


def test_a_v1_cpu_controller_is_read_where_it_is_mounted(tmp_path):
    (tmp_path / "cgroup").write_text("4:memory:/x\n1:cpu,cpuacct:/syncswitch/node0\n0::/\n")
    (tmp_path / "mounts").write_text(f"cgroup {tmp_path / 'cpu'} cgroup rw,cpu,cpuacct 0 0\n"
                                     f"cgroup {tmp_path / 'mem'} cgroup rw,memory 0 0\n")
    _groups(tmp_path / "cpu", ["cpu.cfs_quota_us", "cpu.cfs_period_us"],
            [("", ["-1", "100000"]), ("syncswitch/node0", ["40000", "100000"])])
    assert threads.cgroup_quota(str(tmp_path / "cgroup"), str(tmp_path / "mounts")) == 0.4


def test_no_cgroup_to_read_means_no_quota(tmp_path):
    (tmp_path / "cgroup").write_text("0::/\n")
    (tmp_path / "mounts").write_text("proc /proc proc rw 0 0\n")
    assert threads.cgroup_quota(str(tmp_path / "cgroup"), str(tmp_path / "mounts")) is None
    assert threads.cgroup_quota(str(tmp_path / "missing"), str(tmp_path / "mounts")) is None


def test_the_sessions_and_servers_config_carry_the_decision():
    assert graphmod.session_config(4, 0, 1, 2, spin=False).experimental.disable_thread_spinning
    assert not graphmod.session_config(4, 0, 1, 2).experimental.disable_thread_spinning
