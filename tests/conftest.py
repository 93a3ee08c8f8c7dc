"""Shared fixtures: example paths, a spec writer, and a guard that no syncswitch process outlives a test."""

import os
import textwrap
import time
import uuid

import psutil
import pytest

# Kernels in this process on one intra-op thread, as every node runs them: the simulator's runs here are then the
# engines' arithmetic bit for bit (syncswitch/simulator/model.py match_node_threads). Set before TensorFlow starts.
os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")

# Imported for their registrations: the backends, policies and protocols the specs of every test name.
import syncswitch.backends
import syncswitch.policies  # noqa: F401

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")


MARKER = "SYNCSWITCH_TEST_RUN"


def syncswitch_processes(marker: str):
    """Processes started under this test: children inherit the marker in their environment, even
    after their parent died, and other sessions' syncswitch runs on this machine do not carry it."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if proc.pid == os.getpid() or ("syncswitch.node" not in cmd and "syncswitch.cluster_manager" not in cmd):
            continue
        try:
            if proc.environ().get(MARKER) == marker:
                found.append((proc.pid, cmd))
        except psutil.Error:
            continue
    return found


@pytest.fixture
def no_leftovers(monkeypatch):
    """Fails the test if an agent, task or evaluator it started is still running afterwards."""
    marker = uuid.uuid4().hex
    monkeypatch.setenv(MARKER, marker)
    yield
    deadline = time.time() + 10
    while syncswitch_processes(marker) and time.time() < deadline:
        time.sleep(0.2)
    left = syncswitch_processes(marker)
    for pid, _ in left:
        try:
            psutil.Process(pid).kill()
        except psutil.Error:
            pass
    assert not left, f"processes left running: {left}"


@pytest.fixture
def write_spec(tmp_path):
    """Write a job spec YAML next to a copy-free reference to the shipped examples."""

    def write(body: str, name: str = "job.yaml") -> str:
        path = tmp_path / name
        path.write_text(textwrap.dedent(body).replace("EXAMPLES", EXAMPLES))
        return str(path)

    return write


MINIMAL = """
name: t
script: EXAMPLES/digits_mlp.py
hyperparameters: {batch_size: 16, learning_rate: 0.05}
workload: {epochs: 1}
"""


# The digits MLP job of the protocol conformance suite (2 local workers, 4 epochs); the simulator's tests run the same
# job, with their own overrides, so a simulated run and a real one are of one job.
DIGITS_JOB = """
name: digits
script: EXAMPLES/digits_mlp.py
hyperparameters: {batch_size: 16, learning_rate: 0.05, momentum: 0.9, lr_decay: {boundaries: [0.5], factors: [0.5]}}
workload: {epochs: 4}
cluster: {backend: local, workers: 2}
evaluation: {every: 0.25}
"""


@pytest.fixture
def digits_job(write_spec):
    """The path of the conformance suite's digits job, written into the test's folder."""
    return write_spec(DIGITS_JOB, "digits.yaml")


def real_cpu_hierarchy():
    """(this machine's cgroup cpu hierarchy, None) when syncswitch may write it, else (None, why not).

    The probe leaves nothing behind: the shared parent it creates goes again when it holds no run
    (a run's create_run makes it anew)."""
    from syncswitch.backends.cgroups import CgroupError, CpuHierarchy

    try:
        hierarchy = CpuHierarchy.find()
        hierarchy.prepare()
    except CgroupError as exc:
        return None, str(exc)
    try:
        os.rmdir(hierarchy.parent)
    except OSError:
        pass  # another run's group is in it
    return hierarchy, None

