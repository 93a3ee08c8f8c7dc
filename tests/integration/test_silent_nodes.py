"""Real 2-node local clusters with a training process that hangs (SIGSTOP): alive, silent, holding its peers up.

The local backend's one parameter server lives in node 0's process, so node 1's process holds only its worker.
In BSP node 0's step waits for node 1's gradient: the step's deadline (recovery.step_timeout_s) turns that wait
into a task error the recovery handles. In ASP node 0 trains on and reaches the phase's end while node 1 says
nothing: after recovery.silence_s the manager treats node 1 as lost.
"""

import json
import os
import signal

import pytest

from bench.chaos import Killer
from syncswitch import spec as specmod
from syncswitch.cluster_manager import submission

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

JOB = """
name: digits
script: EXAMPLES/digits_mlp.py
hyperparameters: {batch_size: 16, learning_rate: 0.05, momentum: 0.9}
workload: {epochs: 60}  # long enough to stop at a chosen point (test_recovery_cluster.py)
cluster: {backend: local, workers: 2}
policy: {switch_at: 0.5, switch_rule: fixed}
evaluation: {every: 0.25}
checkpoint: {every: 0.1}
recovery: {step_timeout_s: STEP, silence_s: SILENCE}
"""


def _run_with_stop(write_spec, tmp_path, at, step_timeout_s, silence_s):
    run = tmp_path / "run"
    job = JOB.replace("STEP", str(step_timeout_s)).replace("SILENCE", str(silence_s))
    stopper = Killer(str(run), "task", 1, at, timeout_s=300, sig=signal.SIGSTOP)
    stopper.start()
    try:
        summary = submission.submit(specmod.load(write_spec(job)), output_dir=str(run), progress=False)
    finally:
        stopper.done.set()
        if stopper.pid is not None:  # the recovery ends it; if not, free it for the leftovers check to see
            try:
                os.kill(stopper.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
    assert stopper.killed_at is not None, "the stop was never sent"
    assert summary["status"] == "completed", summary["message"]
    (failure,) = summary["failures"]
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r for r in records if r["kind"] == "failure"] == [{"kind": "failure", **failure}]
    assert [r["state"] for r in records if r["kind"] == "state"].count("recovering") == 1
    assert summary["final_accuracy"] > 0.5 and summary["evaluations"][-1]["fraction"] >= 1.0
    return failure, stopper


def test_a_step_that_waits_on_a_hung_peer_is_given_up_and_the_run_recovers(write_spec, tmp_path, no_leftovers):
    failure, stopper = _run_with_stop(write_spec, tmp_path, 0.15, step_timeout_s=10, silence_s=120)
    assert failure["resumed_phase"] == 0
    assert failure["node"] == 0 and "recovery.step_timeout_s" in failure["what"], failure
    # Noticed by the deadline, long before the silence would have been.
    assert failure["t"] - (stopper.killed_at - json.loads((tmp_path / "run" / "summary.json").read_text())
                           ["t_submit"]) < 60


def test_a_node_silent_while_the_other_trains_on_is_replaced(write_spec, tmp_path, no_leftovers):
    failure, stopper = _run_with_stop(write_spec, tmp_path, 0.6, step_timeout_s=60, silence_s=10)
    assert failure["resumed_phase"] == 1 and failure["checkpoint_fraction"] >= 0.5
    assert failure["node"] == 1 and "silent for" in failure["what"] and failure["agent_replaced"], failure
