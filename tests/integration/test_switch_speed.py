"""Real 2-worker clusters where the speed rule must act: a trial that finds the switch target not faster than BSP
goes back to BSP from the checkpoint at the trial's start, and a speed stored by earlier runs keeps the run
synchronous."""

import json

import pytest
from click.testing import CliRunner

from syncswitch import spec as specmod
from syncswitch.cli import cli
from syncswitch.search import store as storemod

pytestmark = pytest.mark.cluster

# 24 epochs (about 6 s of training): a trial of one report a worker takes a few tenths of a second; the switch
# rule's thresholds let it switch where the schedule says (these tests drive the speed rule, not the loss rule).
JOB = """
name: digits-speed
script: EXAMPLES/digits_mlp.py
hyperparameters: {batch_size: 16, learning_rate: 0.05, momentum: 0.9}
workload: {epochs: 24}
cluster: {backend: local, workers: 2}
policy:
  switch_at: 0.25
  switch_to: asp
  switch_rule: {min_drop: 0.0, max_rate: 1.0}
"""


def _submit(job, tmp_path, *extra):
    result = CliRunner().invoke(cli, ["submit", job, *extra, "--output-dir", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    return result, json.loads((tmp_path / "run" / "summary.json").read_text())


def test_a_target_not_faster_by_the_margin_goes_back_to_bsp(write_spec, tmp_path, no_leftovers):
    # A margin of 20x: no protocol on one machine's two cores trains 20 times BSP's throughput, so the trial must
    # go back whatever this machine's load (BSP by all-reduce against ASP through the parameter server).
    result, summary = _submit(write_spec(JOB), tmp_path, "--set", "policy.switch_speed={margin: 20, trial_reports: 1}")
    assert summary["status"] == "completed", summary["message"]
    assert [p["protocol"] for p in summary["schedule"]] == ["bsp", "asp", "bsp"]
    trial, back = summary["switch_speed"]["decisions"]
    assert trial["action"] == "trial" and back["action"] == "back" and "not_acted" not in back
    values = back["values"]
    assert values["bsp_examples_per_s"] > 0 and values["target_examples_per_s"] > 0
    assert values["ratio"] == pytest.approx(values["target_examples_per_s"] / values["bsp_examples_per_s"])
    assert back["reason"] == f"asp measured {values['ratio']:.2f}x BSP's throughput on this job; a switch needs 20x"
    # Back to the checkpoint the switch wrote at the trial's start (real files, restored in place): the trial's
    # ASP steps are thrown away, and BSP trains the rest of the workload from where it had left off.
    (event,) = summary["guard_events"]
    bsp, asp, again = summary["schedule"]
    assert event["reason"] == "slower" and event["action"].startswith("rollback to")
    assert event["checkpoint"] and event["checkpoint_fraction"] == asp["start_fraction"] == bsp["end_fraction"]
    assert event["samples_lost"] > 0
    assert asp["rolled_back_to"] == again["start_fraction"] == asp["start_fraction"] and again["end_fraction"] >= 1.0
    assert asp["end_fraction"] - asp["start_fraction"] < 0.4  # a trial, not the rest of the run
    assert "going back to bsp at" in result.output and "a switch needs 20x" in result.output
    assert summary["final_accuracy"] > 0.8


def test_a_speed_stored_by_earlier_runs_keeps_the_run_synchronous(write_spec, tmp_path, no_leftovers, monkeypatch):
    monkeypatch.setenv("SYNCSWITCH_HOME", str(tmp_path / "home"))
    job = write_spec(JOB)
    signature, inputs = storemod.signature_for_spec(specmod.load(job))
    storemod.PolicyStore().put(storemod.PolicyRecord(
        signature=signature, job_name="digits-speed", switch_at=0.25, target_accuracy=0.9, achieved_mean=0.9,
        achieved_std=0.0, threshold=0.01, search_cost_s=0.0, search_cost_bsp=None, runs=4, created="",
        inputs=inputs, speed={"target": "asp", "ratio": 0.55, "runs": 4, "rule": "measured"}))
    result, summary = _submit(job, tmp_path)
    assert summary["status"] == "completed", summary["message"]
    assert summary["switches"] == [] and [p["protocol"] for p in summary["schedule"]] == ["bsp"]
    (stay,) = summary["switch_speed"]["decisions"]
    assert stay["action"] == "stay" and stay["values"]["source"] == "earlier runs (4)"
    assert stay["values"]["bsp_examples_per_s"] > 0  # measured in this run before the decision
    (decision,) = summary["switch_rule"]["decisions"]
    # The margin weighs the pause predicted from BSP's step against the time BSP has left (this run's measure):
    # at least 1.1x.
    assert decision["reason"].startswith("staying synchronous: asp measured 0.55x BSP's throughput on this job "
                                         "(earlier runs); a switch needs ")
    assert stay["values"]["margin"] >= 1.1 and stay["values"]["pause_source"] == "cpu budget and step"
    assert stay["values"]["pause_s"] == pytest.approx(0.2 + 4 * stay["values"]["bsp_step_s"])
    assert "staying synchronous at" in result.output
