"""CPU cgroups of local nodes: controller lookup, v1 on the real controller, v2 on a tree laid out like cgroupfs,
the one-line errors, stale cleanup, and the local backend's budgets and slowdowns with real agents."""

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time

import psutil
import pytest

from syncswitch import spec as specmod
from syncswitch.backends import ProvisionRequest
from syncswitch.backends.cgroups import CgroupError, CpuHierarchy, owner_tag
from syncswitch.backends.local import LocalBackend
from syncswitch.errors import ClusterError, SpecError
from tests.conftest import MINIMAL, ROOT, real_cpu_hierarchy


REAL, WHY_NOT = real_cpu_hierarchy()
needs_cgroups = pytest.mark.skipif(REAL is None, reason=f"no writable cgroup cpu controller here: {WHY_NOT}")


def _mounts(tmp_path, *lines):
    path = tmp_path / "mounts"
    path.write_text("".join(line + "\n" for line in lines))
    return str(path)


def _request(tmp_path, cpus=None, nodes=1, job_id="cg-test"):
    options = {} if cpus is None else {"cpus_per_node": cpus}
    return ProvisionRequest(job_id=job_id, num_nodes=nodes, token="t0ken", run_dir=str(tmp_path / "run"),
                            options=options)


def _cpu_seconds(pid):
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


# -- the option ------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["0", "-0.5", "abc", "true", ".nan", "[1]"])
def test_cpus_per_node_must_be_a_positive_number(write_spec, value):
    with pytest.raises(SpecError, match=r"^cluster\.cpus_per_node=.*must be a number of CPUs > 0"):
        specmod.load(write_spec(MINIMAL), [f"cluster.cpus_per_node={value}"])


def test_cpus_per_node_is_a_local_option(write_spec):
    spec = specmod.load(write_spec(MINIMAL), ["cluster.cpus_per_node=0.45"])
    assert spec.cluster.options == {"cpus_per_node": 0.45}
    assert specmod.load(write_spec(MINIMAL), ["cluster.cpus_per_node=2"]).cluster.options == {"cpus_per_node": 2.0}
    assert LocalBackend.capabilities.cpu_budgets and "cpu" in LocalBackend.capabilities.slowdown_methods


def test_cpus_per_ps_is_checked_and_needs_cpus_per_node(write_spec):
    spec = specmod.load(write_spec(MINIMAL), ["cluster.cpus_per_node=0.45", "cluster.cpus_per_ps=0.3"])
    assert spec.cluster.options == {"cpus_per_node": 0.45, "cpus_per_ps": 0.3}
    with pytest.raises(SpecError, match=r"^cluster\.cpus_per_ps=0\.3: adds to the budget of a node that hosts a PS "
                                        r"task: it needs cluster\.cpus_per_node$"):
        specmod.load(write_spec(MINIMAL), ["cluster.cpus_per_ps=0.3"])
    with pytest.raises(SpecError, match=r"^cluster\.cpus_per_ps=-1: must be a number of CPUs > 0"):
        specmod.load(write_spec(MINIMAL), ["cluster.cpus_per_node=0.45", "cluster.cpus_per_ps=-1"])


# -- finding the controller and the one-line errors -------------------------------------------

def test_v1_is_found_in_the_mount_table_under_any_name(tmp_path):
    where = tmp_path / "cg roups"
    where.mkdir()
    escaped = str(where).replace(" ", "\\040")  # /proc/mounts spells a space as \040
    mounts = _mounts(tmp_path, "proc /proc proc rw 0 0", f"cgroup {escaped} cgroup rw,nosuid,cpu,cpuacct 0 0",
                     "cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0")
    found = CpuHierarchy.find(mounts)
    assert (found.mount, found.interface.version, found.read_only) == (str(where), 1, False)


def test_a_missing_controller_fails_before_any_agent_starts(tmp_path):
    mounts = _mounts(tmp_path, "cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0")
    backend = LocalBackend(mounts=mounts)
    with pytest.raises(ClusterError) as info:
        backend.provision(_request(tmp_path, cpus=0.45))
    message = str(info.value)
    assert message.startswith("cluster.cpus_per_node=0.45: cannot give nodes their own CPU budget: no cpu controller")
    assert "\n" not in message
    assert backend.procs == [] and not (tmp_path / "run" / "nodes").exists()
    backend.teardown()  # safe after the failed provision
    assert "NOT AVAILABLE here: no cpu controller" in backend.dry_run(_request(tmp_path, cpus=0.45))


def test_a_v2_mount_without_cpu_names_the_reason(tmp_path):
    (tmp_path / "v2").mkdir()
    (tmp_path / "v2" / "cgroup.controllers").write_text("memory pids\n")
    mounts = _mounts(tmp_path, f"cgroup2 {tmp_path / 'v2'} cgroup2 rw 0 0")
    with pytest.raises(CgroupError, match="does not offer 'cpu'"):
        CpuHierarchy.find(mounts)


def test_a_read_only_controller_fails_before_any_agent_starts(tmp_path):
    (tmp_path / "cpu").mkdir()
    mounts = _mounts(tmp_path, f"cgroup {tmp_path / 'cpu'} cgroup ro,nosuid,cpu 0 0")
    backend = LocalBackend(mounts=mounts)
    with pytest.raises(ClusterError, match=r"^cluster\.cpus_per_node=0\.45: .* is mounted read-only$"):
        backend.provision(_request(tmp_path, cpus=0.45))
    assert backend.procs == [] and os.listdir(tmp_path / "cpu") == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to an unprivileged user")
def test_an_unprivileged_user_is_told_it_is_not_root(tmp_path):
    # A v1-looking root that only root may write, as a real cgroupfs is: the check runs as user nobody
    # (pytest's tmp_path is private to root, so the tree lives in a world-readable folder of its own).
    top = tempfile.mkdtemp(prefix="syncswitch-cg-")
    os.chmod(top, 0o755)
    root = os.path.join(top, "cpu")
    os.mkdir(root)
    mounts = os.path.join(top, "mounts")
    with open(mounts, "w") as fh:
        fh.write(f"cgroup {root} cgroup rw,cpu 0 0\n")
    code = textwrap.dedent(f"""
        import os, sys
        from syncswitch.backends.local import LocalBackend
        from syncswitch.backends import ProvisionRequest
        from syncswitch.errors import ClusterError
        import syncswitch.wire.client  # noqa: F401 (provision imports it)
        os.setgid(65534); os.setuid(65534)  # after the imports: this Python lives under root's private home
        try:
            LocalBackend(mounts={mounts!r}).provision(ProvisionRequest("j", 1, "t", {str(tmp_path / 'run')!r},
                                                                       {{"cpus_per_node": 0.5}}))
        except ClusterError as exc:
            print(exc)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=ROOT), cwd="/")
    assert out.stdout.strip() == (f"cluster.cpus_per_node=0.5: cannot give nodes their own CPU budget: cannot write "
                                  f"{root}/syncswitch: not root (run the manager as root)"), \
        out.stderr[-500:]
    assert os.listdir(root) == []
    shutil.rmtree(top)


# -- cgroup v2, on a tree laid out as cgroupfs lays it out -------------------------------------

def _v2_tree(tmp_path, job_id, nodes):
    """A cgroup v2 root with the files the kernel creates in each group at mkdir (a plain directory cannot
    create them itself): syncswitch/<run>/node<i>."""
    root = tmp_path / "unified"
    run = root / "syncswitch" / f"{job_id}@{owner_tag()}"
    for group, files in [(root, {"cgroup.controllers": "cpuset cpu io memory pids\n", "cgroup.subtree_control": ""}),
                         (root / "syncswitch", {"cgroup.controllers": "cpu\n", "cgroup.subtree_control": ""}),
                         (run, {"cgroup.controllers": "cpu\n", "cgroup.subtree_control": "cpu\n"})] + \
            [(run / f"node{i}", {"cgroup.controllers": "", "cgroup.procs": "", "cpu.max": "max 100000\n"})
             for i in range(nodes)]:
        group.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (group / name).write_text(text)
    return root, run


def test_v2_enables_cpu_for_children_and_writes_cpu_max(tmp_path):
    root, run = _v2_tree(tmp_path, "v2job", 2)
    mounts = _mounts(tmp_path, "cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0",
                     f"cgroup2 {root} cgroup2 rw,nosuid,nodev 0 0")
    hierarchy = CpuHierarchy.find(mounts)
    assert (hierarchy.mount, hierarchy.interface.version) == (str(root), 2)
    hierarchy.prepare()
    groups = hierarchy.create_run("v2job", 2, 0.45, period_us=10_000)
    assert groups.path == str(run)
    # "+cpu" where the kernel did not list cpu yet; untouched where it did
    assert (root / "cgroup.subtree_control").read_text() == "+cpu"
    assert (root / "syncswitch" / "cgroup.subtree_control").read_text() == "+cpu"
    assert (run / "cgroup.subtree_control").read_text() == "cpu\n"
    assert [(run / f"node{i}" / "cpu.max").read_text() for i in range(2)] == ["4500 10000"] * 2
    assert [node.budget() for node in groups.nodes] == [0.45, 0.45]
    groups.nodes[1].add(4242)
    assert (run / "node1" / "cgroup.procs").read_text() == "4242"
    # a slowdown whose quota would fall under the kernel's 1 ms minimum keeps its ratio with a longer period
    assert groups.nodes[0].set_budget(0.45 / 8, 10_000) == (1000, 17778)
    assert (run / "node0" / "cpu.max").read_text() == "1000 17778"
    assert groups.nodes[0].budget() == pytest.approx(0.45 / 8, rel=1e-3)
    assert [path for path, alive in hierarchy.runs()] == [str(run)]
    assert hierarchy.runs()[0][1] is True  # owned by this process, which runs


def test_a_node_hosting_a_ps_task_gets_cpus_per_ps_more_and_slows_from_its_own_budget(tmp_path):
    # No agents: the groups and the budget arithmetic, on a v2 tree laid out as the kernel would.
    root, run = _v2_tree(tmp_path, "ps-budget", 3)
    backend = LocalBackend(mounts=_mounts(tmp_path, f"cgroup2 {root} cgroup2 rw 0 0"))
    request = ProvisionRequest("ps-budget", 3, "t0ken", str(tmp_path / "run"),
                               {"cpus_per_node": 0.45, "cpus_per_ps": 0.3}, ps_nodes=(0,))
    assert "0.45 CPU (+0.3 for the PS task on node 0)" in backend.dry_run(request)
    backend._cpu_groups(request)
    assert [backend.node_cpus(i) for i in range(3)] == [pytest.approx(0.75), pytest.approx(0.45),
                                                        pytest.approx(0.45)]
    backend.slow_node(0, 3)
    backend.slow_node(2, 3)
    assert backend.node_cpus(0) == pytest.approx(0.25, rel=1e-3)  # its own 0.75, not the node budget, divided
    assert backend.node_cpus(2) == pytest.approx(0.15, rel=1e-3)
    backend.restore_node(0)
    assert backend.node_cpus(0) == pytest.approx(0.75)
    with pytest.raises(ValueError, match="one budget per node"):
        CpuHierarchy.find(backend.mounts).create_run("ps-budget", 3, [0.45, 0.45])


def test_v2_unlimited_reads_as_none(tmp_path):
    root, run = _v2_tree(tmp_path, "j", 1)
    hierarchy = CpuHierarchy.find(_mounts(tmp_path, f"cgroup2 {root} cgroup2 rw 0 0"))
    hierarchy.prepare()
    groups = hierarchy.create_run("j", 1, 1.5, period_us=5000)
    assert (run / "node0" / "cpu.max").read_text() == "7500 5000"  # more than one CPU is a quota over the period
    (run / "node0" / "cpu.max").write_text("max 100000\n")
    assert groups.nodes[0].budget() is None


# -- the real controller (cgroup v1 here) ----------------------------------------------------

@needs_cgroups
def test_a_group_caps_the_cpu_of_what_runs_in_it_and_is_removed():
    groups = REAL.create_run("cap-test", 1, 0.45)
    node = groups.nodes[0]
    try:
        assert node.budget() == pytest.approx(0.45)
        burner = subprocess.Popen(node.command([sys.executable, "-c", "while True: pass"]))
        deadline = time.time() + 10
        while burner.pid not in node.pids() and time.time() < deadline:
            time.sleep(0.01)
        assert node.pids() == [burner.pid]  # the wrapper exec'd in place: the same pid, already inside
        time.sleep(0.3)
        node.set_budget(0.45 / 4)
        start, t0 = _cpu_seconds(burner.pid), time.time()
        time.sleep(1.5)
        used = (_cpu_seconds(burner.pid) - start) / (time.time() - t0)
        assert used < 0.45 / 4 * 1.5  # a busy loop held to the slowed budget (the machine may give it even less)
        assert node.budget() == pytest.approx(0.45 / 4, rel=1e-3)  # a longer period keeps the 1 ms minimum quota
    finally:
        groups.remove()
    assert burner.wait(timeout=10) == -9
    assert not os.path.exists(groups.path)


@needs_cgroups
def test_the_shared_parent_goes_with_the_last_run():
    others = [path for path, _ in REAL.runs()]  # another session's runs keep the parent, rightly
    first, second = REAL.create_run("parent-a", 1, 0.3), REAL.create_run("parent-b", 1, 0.3)
    try:
        first.remove()
        assert os.path.isdir(REAL.parent) and os.path.isdir(second.path)
    finally:
        second.remove()
    assert os.path.exists(REAL.parent) == bool([p for p in others if os.path.exists(p)])
    third = REAL.create_run("parent-c", 1, 0.3)  # a later run makes it again, with its budget
    try:
        assert third.nodes[0].budget() == pytest.approx(0.3)
    finally:
        third.remove()


@needs_cgroups
def test_stale_groups_of_a_dead_manager_are_cleaned_and_live_ones_kept(tmp_path):
    # A real "manager": creates a run group, starts a process in it, then dies without cleaning up.
    code = textwrap.dedent("""
        import subprocess, sys, time
        from syncswitch.backends.cgroups import CpuHierarchy
        h = CpuHierarchy.find(); h.prepare()
        run = h.create_run("stale-test", 2, 0.3)
        child = subprocess.Popen(run.nodes[1].command(["sleep", "600"]), start_new_session=True)
        while child.pid not in run.nodes[1].pids():
            time.sleep(0.01)
        print(run.path, child.pid, flush=True)
        time.sleep(600)
    """)
    manager = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                               env=dict(os.environ, PYTHONPATH=ROOT))
    mine = REAL.create_run("live-test", 1, 0.3)
    try:
        path, orphan = manager.stdout.readline().split()
        orphan = int(orphan)
        assert dict(REAL.runs())[path] is True
        manager.kill()
        manager.wait()
        assert dict(REAL.runs())[path] is False and psutil.pid_exists(orphan)
        removed, problems = REAL.clean_stale()
        # Other dead managers' groups on this host (an earlier killed run) may go in the same sweep.
        assert path in removed and not [p for p in problems if path in p], (removed, problems)
        assert not os.path.exists(path)
        assert not psutil.pid_exists(orphan) or psutil.Process(orphan).status() == psutil.STATUS_ZOMBIE
        assert os.path.isdir(mine.path)  # its owner (this process) runs
    finally:
        manager.kill()
        mine.remove()


# -- the local backend with real agents --------------------------------------------------------

def _cmdlines(pids):
    out = []
    for pid in pids:
        try:
            out.append(" ".join(psutil.Process(pid).cmdline()))
        except psutil.Error:
            pass
    return out


@needs_cgroups
@pytest.mark.cluster
def test_provision_puts_each_agent_and_its_task_in_its_budgeted_group(tmp_path, no_leftovers):
    backend = LocalBackend()
    try:
        # Without the fork server the agent pre-warms a spawned task: that one must be in the group too.
        request = _request(tmp_path, cpus=0.45, nodes=2)
        request.options["fork_server"] = False
        cluster = backend.provision(request)
        groups = backend.run_groups
        assert os.path.basename(groups.path).startswith("cg-test@")
        for node, group in zip(cluster.nodes, groups.nodes):
            assert group.budget() == pytest.approx(0.45)
            assert int(node.resource_id) in group.pids()  # the agent itself, not a wrapper around it
        # the agent's pre-warmed training task starts inside its node's group too
        deadline = time.time() + 60
        while time.time() < deadline and not all(any("syncswitch.node.task" in c for c in _cmdlines(g.pids()))
                                                 for g in groups.nodes):
            time.sleep(0.2)
        for group in groups.nodes:
            assert sorted("task" if "syncswitch.node.task" in c else "agent" for c in _cmdlines(group.pids())) == \
                ["agent", "task"]
        assert os.getpid() not in groups.nodes[0].pids() + groups.nodes[1].pids()  # the manager stays outside
        backend.slow_node(1, 4)
        assert (backend.node_cpus(0), backend.node_cpus(1)) == (pytest.approx(0.45), pytest.approx(0.1125, rel=1e-3))
        backend.restore_node(1)
        assert backend.node_cpus(1) == pytest.approx(0.45)
        with pytest.raises(ClusterError, match="factor must be a number > 1"):
            backend.slow_node(0, 0.5)
        with pytest.raises(ClusterError, match="no node 2: the cluster has 2 node"):
            backend.slow_node(2, 2)
    finally:
        backend.teardown()
    assert not os.path.exists(groups.path)


def test_a_backend_without_budgets_refuses_slowdowns(tmp_path):
    with pytest.raises(ClusterError, match=r"no CPU budget \(set cluster\.cpus_per_node\)"):
        LocalBackend().slow_node(0, 2)


@needs_cgroups
@pytest.mark.cluster
def test_a_task_forked_for_a_budgeted_node_joins_its_group_and_the_fork_server_stays_outside(tmp_path,
                                                                                          no_leftovers):
    from syncswitch.wire.forkclient import ForkedProcess

    backend = LocalBackend()
    try:
        backend.provision(_request(tmp_path, cpus=0.45, nodes=2))
        group = backend.run_groups.nodes[1]
        with open(tmp_path / "task.log", "ab") as log:
            task = ForkedProcess(backend.fork_socket, "task", cwd=str(tmp_path), env=dict(os.environ),
                                 stderr_fd=log.fileno(), cgroup_procs=group.procs_file)
        task.stdout.readline()  # started
        assert task.pid in group.pids()
        assert backend.fork_server.pid not in group.pids() + backend.run_groups.nodes[0].pids()
        task.stdin.close()
        assert task.wait(timeout=30) == 0
    finally:
        backend.teardown()
    assert backend.fork_server is None and backend.fork_socket is None

