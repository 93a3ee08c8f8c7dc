"""Real local clusters with cluster.cpus_per_node: nodes run in their budgeted cgroups, the evaluator and the
manager outside, and the groups are gone after a run, a failed run, Ctrl-C, and (at the next start) a crash."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest
from click.testing import CliRunner

from syncswitch import spec as specmod
from syncswitch.cli import cli
from syncswitch.cluster_manager import submission
from syncswitch.backends import ProvisionRequest
from syncswitch.backends.cgroups import CpuGroup
from syncswitch.backends.local import LocalBackend
from tests.conftest import ROOT, real_cpu_hierarchy

pytestmark = pytest.mark.cluster


REAL, WHY_NOT = real_cpu_hierarchy()
if REAL is None:
    pytestmark = [pytestmark, pytest.mark.skip(reason=f"no writable cgroup cpu controller here: {WHY_NOT}")]

JOB = """
name: budgets
script: EXAMPLES/digits_mlp.py
hyperparameters: {batch_size: 16, learning_rate: 0.05, momentum: 0.9}
workload: {epochs: EPOCHS}
cluster: {backend: local, workers: 2, cpus_per_node: 0.45}
# The switch where the schedule puts it: these tests drive the switch mechanics, not the switch rule.
evaluation: {every: 0.25}
policy: {switch_rule: fixed}
"""


def _groups_of(pid: int) -> list[str]:
    """Run groups owned by process `pid` (the owner tag is <pidns>-<pid>-<start>)."""
    return [path for path, _ in REAL.runs() if os.path.basename(path).split("@")[1].split("-")[1] == str(pid)]


def _node_groups(path: str) -> list[CpuGroup]:
    try:
        names = sorted(n for n in os.listdir(path) if n.startswith("node"))
    except FileNotFoundError:
        return []
    return [CpuGroup(os.path.join(path, n), REAL.interface) for n in names]


def _kinds(group: CpuGroup) -> list[str]:
    """'agent' / 'task' for each syncswitch process in the group."""
    out = []
    for pid in group.pids():
        try:
            proc = psutil.Process(pid)
            cmd, name = " ".join(proc.cmdline()), proc.name()
        except psutil.Error:
            continue
        # A task forked by the fork server has the server's command line and its role as its name.
        task = "syncswitch.node.task" in cmd or name == "syncswitch-task"
        out += ["agent"] if "syncswitch.node.agent" in cmd else ["task"] if task else [cmd]
    return sorted(out)


def _cpu_cgroup(pid: int) -> str:
    with open(f"/proc/{pid}/cgroup", encoding="ascii") as fh:
        for line in fh:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if "cpu" in controllers.split(",") or (REAL.interface.version == 2 and controllers == ""):
                return path
    return ""


def _marked(module: str) -> list[int]:
    """Pids of `module` processes started under this test (they carry its marker in their environment)."""
    marker, out = os.environ["SYNCSWITCH_TEST_RUN"], []
    forked = {"syncswitch.node.evaluator": "syncswitch-eval", "syncswitch.node.task": "syncswitch-task"}.get(module)
    for proc in psutil.process_iter(["pid", "cmdline", "name"]):
        try:
            named = module in " ".join(proc.info["cmdline"] or []) or proc.info["name"] == forked
            if named and proc.environ().get("SYNCSWITCH_TEST_RUN") == marker:
                out.append(proc.pid)
        except psutil.Error:
            pass
    return out


def _wait(condition, timeout_s: float, what: str):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


class Watch:
    """Polls, while a run in this process lasts, its node groups (budgets, processes) and its evaluator's cgroup."""

    def __init__(self):
        self.budgets, self.kinds, self.evaluator_groups = set(), [], set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _poll(self):
        while not self._stop.is_set():
            for path in _groups_of(os.getpid()):
                for group in _node_groups(path):
                    try:
                        self.budgets.add(round(group.budget(), 4))
                        self.kinds.append(_kinds(group))
                    except OSError:
                        pass  # removed under us at teardown
            for pid in _marked("syncswitch.node.evaluator"):
                try:
                    self.evaluator_groups.add(_cpu_cgroup(pid))
                except OSError:
                    pass
            time.sleep(0.2)


def test_a_budgeted_run_keeps_nodes_in_their_groups_and_removes_them(write_spec, tmp_path, no_leftovers):
    job = specmod.load(write_spec(JOB.replace("EPOCHS", "3")), ["evaluation.target_accuracy=0.5"])
    with Watch() as seen:
        summary = submission.submit(job, output_dir=str(tmp_path / "run"), progress=False)
    assert summary["status"] == "completed", summary["message"]
    assert seen.budgets == {0.45}
    assert ["agent", "task"] in seen.kinds  # each node's agent and its training task
    # nothing else of syncswitch's (other members are the wrapper shell before its exec, or helpers a task runs)
    others = {k for kinds in seen.kinds for k in kinds if k not in ("agent", "task")}
    assert not [k for k in others if "syncswitch" in k and not k.startswith("/bin/sh -c")], others
    assert seen.evaluator_groups and not any("/syncswitch/" in g for g in seen.evaluator_groups)
    assert "/syncswitch/" not in _cpu_cgroup(os.getpid())
    assert _groups_of(os.getpid()) == []


def test_a_failed_run_removes_its_groups(write_spec, tmp_path, no_leftovers):
    script = tmp_path / "broken.py"
    script.write_text("def input_fn(split, batch_size, params):\n    raise ValueError('no data here')\n\n"
                      "def model_fn(features, labels, params, training):\n    pass\n\n"
                      "def num_examples(split, params):\n    return 10\n")
    path = write_spec(JOB.replace("EPOCHS", "1").replace("EXAMPLES/digits_mlp.py", str(script)))
    with Watch() as seen:
        result = CliRunner().invoke(cli, ["submit", path, "--output-dir", str(tmp_path / "run"), "--quiet"])
    assert result.exit_code == 2, result.output
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["status"] == "failed"
    assert seen.budgets == {0.45}  # the groups were there while it ran
    assert _groups_of(os.getpid()) == []


def _submit_in_background(write_spec, tmp_path):
    """`syncswitch submit` of a long budgeted job as its own process; returns it once both nodes train."""
    path = write_spec(JOB.replace("EPOCHS", "200"))
    proc = subprocess.Popen([sys.executable, "-m", "syncswitch", "submit", path, "--output-dir",
                             str(tmp_path / "run"), "--quiet"], env=dict(os.environ, PYTHONPATH=ROOT),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    metrics = tmp_path / "run" / "metrics.jsonl"
    try:
        (run,) = _wait(lambda: _groups_of(proc.pid), 120, "the run's cgroup")
        _wait(lambda: metrics.exists() and '"kind": "metrics"' in metrics.read_text(), 300, "training")
        assert [_kinds(g) for g in _node_groups(run)] == [["agent", "task"]] * 2
    except BaseException:
        proc.kill()
        raise
    pids = [pid for g in _node_groups(run) for pid in g.pids()]
    return proc, run, pids


def test_ctrl_c_removes_the_groups(write_spec, tmp_path, no_leftovers):
    proc, run, pids = _submit_in_background(write_spec, tmp_path)
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, output
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["status"] == "interrupted"
    assert not os.path.exists(run)
    assert not [pid for pid in pids if psutil.pid_exists(pid)
                and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]


def test_a_crashed_managers_groups_go_at_the_next_start(write_spec, tmp_path, no_leftovers):
    proc, run, pids = _submit_in_background(write_spec, tmp_path)
    proc.kill()  # no teardown at all: the agents and tasks live on in the run's groups
    proc.communicate(timeout=60)
    assert os.path.isdir(run) and all(psutil.pid_exists(pid) for pid in pids)
    # The evaluator (outside the groups) ends by itself once it reads EOF from the dead manager, after the
    # TensorFlow import or evaluation it is busy with: seconds, or more on a loaded machine.
    _wait(lambda: not _marked("syncswitch.node.evaluator"), 180, "the orphaned evaluator to exit")
    backend = LocalBackend()
    try:  # the next start: a budgeted provision first clears what the dead manager left
        backend.provision(ProvisionRequest("next", 1, "t0ken", str(tmp_path / "next"), {"cpus_per_node": 0.3}))
        assert not os.path.exists(run)
        assert not [pid for pid in pids if psutil.pid_exists(pid)
                    and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    finally:
        backend.teardown()
    assert _groups_of(os.getpid()) == []


STRAGGLED = """
name: cpu-straggler
script: EXAMPLES/digits_mlp.py
hyperparameters: {batch_size: 16, learning_rate: 0.05, momentum: 0.9}
workload: {epochs: 12}
cluster: {backend: local, workers: 4, cpus_per_node: 0.45}
policy: {switch_at: 0.9, switch_rule: fixed}
evaluation: {every: 0.25}
stragglers:
  detection: {window_s: 1.0, consecutive: 2}
  inject: [{worker: 2, at: 0.05, duration_s: 600, slowdown: 4}]
"""


@pytest.mark.slow
def test_a_cpu_straggler_is_detected_within_three_windows(write_spec, tmp_path, no_leftovers):
    job = specmod.load(write_spec(STRAGGLED))
    assert job.stragglers.method == "cpu"
    summary = submission.submit(job, output_dir=str(tmp_path / "run"), progress=False)
    assert summary["status"] == "completed", summary["message"]
    (injected,) = summary["injected_stragglers"]
    assert injected["method"] == "cpu" and injected["slowdown"] == 4.0
    detected = [e for e in summary["straggler_events"] if e["worker"] == 2]
    assert detected, summary["straggler_events"]
    # within 3 windows of 1 s after the budget was cut (one more for the window the cut falls in)
    assert injected["started_at_s"] <= detected[0]["detected_at_s"] <= injected["started_at_s"] + 4.0
