"""cgroup_cpu.py: the mount table, a process's cpu group and the tightest CPU limit on its path, on cgroup v1 and
v2 trees laid out in a folder as cgroupfs lays them out."""

import os

import pytest

from syncswitch import cgroup_cpu

V1_FILES = ["cpu.cfs_quota_us", "cpu.cfs_period_us"]


def _groups(root, files, limits):
    for path, content in limits:
        os.makedirs(root / path, exist_ok=True)
        for name, value in zip(files, content):
            (root / path / name).write_text(value + "\n")


def _escaped(path):
    return str(path).replace(" ", "\\040")  # the kernel's spelling of a space in /proc/mounts and mountinfo


def test_the_mount_table_lists_cpu_hierarchies_and_v2_mounts_unescaped(tmp_path):
    (tmp_path / "mounts").write_text("proc /proc proc rw 0 0\n"
                                     "cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n"
                                     "cgroup /sys/fs/cgroup/cpu\\040and\\011acct cgroup ro,nosuid,cpu,cpuacct 0 0\n"
                                     "garbage\n"
                                     "cgroup2 /sys/fs/cgroup/a\\134b cgroup2 rw,nosuid 0 0\n")
    assert cgroup_cpu.cgroup_mounts(str(tmp_path / "mounts")) == [
        cgroup_cpu.CgroupMount("/sys/fs/cgroup/cpu and\tacct", 1, True),
        cgroup_cpu.CgroupMount("/sys/fs/cgroup/a\\b", 2, False)]
    with pytest.raises(OSError):
        cgroup_cpu.cgroup_mounts(str(tmp_path / "missing"))


def test_a_process_group_is_v1s_where_cpu_is_mounted_as_v1_else_the_unified_one(tmp_path):
    (tmp_path / "hybrid").write_text("4:memory:/x\n1:cpu,cpuacct:/syncswitch/node0\n0::/user.slice\n")
    (tmp_path / "unified").write_text("0::/syncswitch/run/node1\n")
    (tmp_path / "bad").write_text("not a cgroup line\n")
    assert cgroup_cpu.process_group(str(tmp_path / "hybrid")) == (1, "/syncswitch/node0")
    assert cgroup_cpu.process_group(str(tmp_path / "unified")) == (2, "/syncswitch/run/node1")
    assert cgroup_cpu.process_group(str(tmp_path / "bad")) is None
    assert cgroup_cpu.process_group(str(tmp_path / "missing")) is None


def test_a_limit_reads_as_quota_and_period_and_unlimited_as_none(tmp_path):
    _groups(tmp_path / "v1", V1_FILES, [("a", ["45000", "100000"]), ("b", ["-1", "100000"])])
    _groups(tmp_path / "v2", ["cpu.max"], [("a", ["4500 10000"]), ("b", ["max 100000"])])
    assert cgroup_cpu.read_limit(1, str(tmp_path / "v1/a")) == (45000, 100000)
    assert cgroup_cpu.read_limit(1, str(tmp_path / "v1/b")) == (None, 100000)
    assert cgroup_cpu.read_limit(2, str(tmp_path / "v2/a")) == (4500, 10000)
    assert cgroup_cpu.read_limit(2, str(tmp_path / "v2/b")) == (None, 100000)
    with pytest.raises(FileNotFoundError):
        cgroup_cpu.read_limit(2, str(tmp_path / "v1/a"))
    assert [cgroup_cpu.group_cpus(2, str(tmp_path / "v2" / g)) for g in ("a", "b", "missing")] == [0.45, None, None]
    (tmp_path / "v2/a/cpu.max").write_text("lots\n")
    assert cgroup_cpu.group_cpus(2, str(tmp_path / "v2/a")) is None  # unreadable is no limit, not an error


def test_the_tightest_v2_limit_on_the_cgroup_path_is_the_budget(tmp_path):
    (tmp_path / "cgroup").write_text("0::/syncswitch/run/node1\n")
    (tmp_path / "mounts").write_text(f"cgroup2 {tmp_path / 'fs'} cgroup2 rw,nosuid 0 0\n")
    _groups(tmp_path / "fs", ["cpu.max"], [("syncswitch", ["800000 100000"]), ("syncswitch/run", ["max 100000"]),
                                           ("syncswitch/run/node1", ["40000 100000"])])
    assert cgroup_cpu.process_cpus(str(tmp_path / "cgroup"), str(tmp_path / "mounts")) == 0.4
    (tmp_path / "fs/syncswitch/run/node1/cpu.max").write_text("max 100000\n")
    assert cgroup_cpu.process_cpus(str(tmp_path / "cgroup"), str(tmp_path / "mounts")) == 8.0
    # the mount's root counts too: a budget given to a whole container
    (tmp_path / "fs/cpu.max").write_text("150000 100000\n")
    assert cgroup_cpu.tightest_limit(2, str(tmp_path / "fs"), "/syncswitch/run/node1") == 1.5


def test_a_v1_cpu_controller_is_read_where_it_is_mounted(tmp_path):
    (tmp_path / "cgroup").write_text("4:memory:/x\n1:cpu,cpuacct:/syncswitch/node0\n0::/\n")
    (tmp_path / "mounts").write_text(f"cgroup {tmp_path / 'mem'} cgroup rw,memory 0 0\n"
                                     f"cgroup2 {tmp_path / 'unified'} cgroup2 rw 0 0\n"
                                     f"cgroup {tmp_path / 'cpu'} cgroup rw,cpu,cpuacct 0 0\n")
    _groups(tmp_path / "cpu", V1_FILES, [("", ["-1", "100000"]), ("syncswitch/node0", ["40000", "100000"])])
    _groups(tmp_path / "unified", ["cpu.max"], [("", ["10000 100000"])])  # v2's root, not this process's group
    assert cgroup_cpu.process_cpus(str(tmp_path / "cgroup"), str(tmp_path / "mounts")) == 0.4


@pytest.mark.parametrize("version", [1, 2])
def test_a_mount_point_with_a_space_is_read_where_it_is(tmp_path, version):
    # /proc/mounts spells the space as \040: read as written, the path names no folder and the budget is lost
    where = tmp_path / "cgroup fs"
    if version == 1:
        (tmp_path / "cgroup").write_text("3:cpu,cpuacct:/node0\n")
        (tmp_path / "mounts").write_text(f"cgroup {_escaped(where)} cgroup rw,cpu,cpuacct 0 0\n")
        _groups(where, V1_FILES, [("node0", ["45000", "100000"])])
    else:
        (tmp_path / "cgroup").write_text("0::/node0\n")
        (tmp_path / "mounts").write_text(f"cgroup2 {_escaped(where)} cgroup2 rw 0 0\n")
        _groups(where, ["cpu.max"], [("node0", ["45000 100000"])])
    assert cgroup_cpu.process_cpus(str(tmp_path / "cgroup"), str(tmp_path / "mounts")) == 0.45


def test_no_cgroup_to_read_means_no_limit(tmp_path):
    (tmp_path / "cgroup").write_text("0::/\n")
    (tmp_path / "mounts").write_text("proc /proc proc rw 0 0\n")
    assert cgroup_cpu.process_cpus(str(tmp_path / "cgroup"), str(tmp_path / "mounts")) is None
    assert cgroup_cpu.process_cpus(str(tmp_path / "missing"), str(tmp_path / "mounts")) is None
    assert cgroup_cpu.process_cpus(str(tmp_path / "cgroup"), str(tmp_path / "missing")) is None
