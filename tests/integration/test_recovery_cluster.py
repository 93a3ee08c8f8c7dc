"""Real 2-node local clusters that lose a node's training process (SIGKILL) and recover from a durable checkpoint."""

import json
import time

import pytest

from bench.chaos import Killer, node_processes
from syncswitch import spec as specmod
from syncswitch.cluster_manager import submission

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

JOB = """
name: digits
script: EXAMPLES/digits_mlp.py
hyperparameters: {batch_size: 16, learning_rate: 0.05, momentum: 0.9}
workload: {epochs: 60}  # long enough to kill at a chosen point (BSP ran 6 epochs in 0.45 s on an AVX-512 host)
cluster: {backend: local, workers: 2}
# The switch where the schedule puts it: these tests drive the switch mechanics, not the switch rule.
policy: {switch_at: 0.5, switch_rule: fixed}
evaluation: {every: 0.25}
checkpoint: {every: 0.1}
"""


def _run_with_kill(write_spec, tmp_path, what, node, at):
    run = tmp_path / "run"
    killer = Killer(str(run), what, node, at, timeout_s=300)
    killer.start()
    try:
        summary = submission.submit(specmod.load(write_spec(JOB)), output_dir=str(run), progress=False)
    finally:
        killer.done.set()
    assert killer.killed_at is not None, "the kill was never sent"
    return summary, killer


def _check(summary, tmp_path, phase):
    assert summary["status"] == "completed", summary["message"]
    (failure,) = summary["failures"]
    assert failure["resumed_phase"] == phase
    # At most one checkpoint interval lost (plus what the survivor trained before it noticed).
    assert failure["checkpoint_fraction"] > 0
    assert failure["samples_lost"] <= (0.1 + 0.05) * summary["total_samples"]
    assert summary["final_accuracy"] > 0.5
    assert [e["fraction"] for e in summary["evaluations"]] == sorted(e["fraction"] for e in summary["evaluations"])
    assert summary["evaluations"][-1]["fraction"] >= 1.0
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["state"] for r in records if r["kind"] == "state"].count("recovering") == 1
    assert summary["goodput"]["useful_samples"] == summary["total_samples"]
    return failure


def test_a_worker_killed_in_bsp_recovers(write_spec, tmp_path, no_leftovers):
    summary, killer = _run_with_kill(write_spec, tmp_path, "task", 1, 0.15)
    failure = _check(summary, tmp_path, phase=0)
    assert failure["node"] == 1 and "code -9" in failure["what"]
    assert [p["protocol"] for p in summary["schedule"]][-2:] == ["bsp", specmod.default_switch_to(2).protocol]


def test_a_ps_killed_in_asp_recovers(write_spec, tmp_path, no_leftovers):
    # Node 0's process hosts the chief worker and parameter-server shard 0.
    summary, killer = _run_with_kill(write_spec, tmp_path, "task", 0, 0.7)
    failure = _check(summary, tmp_path, phase=1)
    assert failure["checkpoint_fraction"] >= 0.5


def test_a_killed_agent_is_replaced(write_spec, tmp_path, no_leftovers):
    summary, killer = _run_with_kill(write_spec, tmp_path, "agent", 1, 0.7)
    failure = _check(summary, tmp_path, phase=1)
    assert failure["agent_replaced"]


def test_resume_after_the_manager_is_killed(write_spec, tmp_path, no_leftovers):
    import subprocess
    import sys

    run = tmp_path / "run"
    path = write_spec(JOB)
    manager_proc = subprocess.Popen([sys.executable, "-m", "syncswitch", "submit", path, "--output-dir", str(run),
                                     "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    killer = Killer(str(run), "manager", None, 0.6, manager_pid=manager_proc.pid, timeout_s=300)
    killer.run()  # in this thread: returns once the manager is killed
    manager_proc.wait(timeout=30)
    assert killer.killed_at is not None and manager_proc.returncode == -9
    assert not (run / "summary.json").exists()  # it died without a word
    # Its agents notice (--manager-pid) and end their tasks: no node trains on for nobody.
    deadline = time.time() + 15
    while any(sum(node_processes(str(run), i), []) for i in (0, 1)) and time.time() < deadline:
        time.sleep(0.2)
    assert not any(sum(node_processes(str(run), i), []) for i in (0, 1))
    result = subprocess.run([sys.executable, "-m", "syncswitch", "resume", str(run), "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed"
    (resumed,) = summary["resumes"]
    assert resumed["checkpoint_fraction"] >= 0.5  # (the killer's progress reading lags a metrics interval)
    assert resumed["samples_lost"] <= (0.1 + 0.05) * summary["total_samples"]
    assert summary["final_accuracy"] > 0.5 and summary["evaluations"][-1]["fraction"] >= 1.0
    assert [e["fraction"] for e in summary["evaluations"]][:2] == pytest.approx([0.25, 0.5], abs=0.01)
    states = [json.loads(line).get("state") for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert states.count("provisioning") == 2
