"""Real 2-worker clusters whose asynchronous phase is made to fail: the guard rolls back, falls back to BSP,
completes."""

import json

import pytest
from click.testing import CliRunner

from syncswitch.cli import cli

pytestmark = pytest.mark.cluster

JOB = """
name: digits-guarded
script: EXAMPLES/digits_mlp.py
hyperparameters: {batch_size: 16, learning_rate: 0.05, momentum: 0.9}
workload: {epochs: 4}
cluster: {backend: local, workers: 2}
# The switch where the schedule puts it: these tests drive the switch mechanics, not the switch rule.
evaluation: {every: 0.125}
policy: {switch_rule: fixed}
"""


def _submit(write_spec, tmp_path, asp_rate: str, *extra: str):
    asp = f"{{protocol: asp, hyperparameters: {{learning_rate: {asp_rate}}}}}"
    schedule = f"policy.schedule=[{{protocol: bsp, until: 0.25}}, {asp}]"
    result = CliRunner().invoke(cli, ["submit", write_spec(JOB), "--set", schedule, *extra, "--output-dir",
                                      str(tmp_path / "run"), "--quiet"])
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    return result, summary


def _records(tmp_path, kind):
    with open(tmp_path / "run" / "metrics.jsonl", encoding="utf-8") as fh:
        return [r for r in map(json.loads, fh) if r.get("kind") == kind]


def _check_rolled_back(result, summary, tmp_path, mode):
    assert result.exit_code == 0, result.output
    assert summary["status"] == "completed", summary["message"]
    (event,) = summary["guard_events"]
    assert event["action"].endswith("continue with bsp") and event["mode"] == mode
    # Rolled back to a checkpoint at or before the switch's first troubles, never past where it was decided.
    assert 0.0 < event["checkpoint_fraction"] <= event["fraction"] and event["samples_lost"] >= 0
    assert event["overhead_s"] > 0
    assert [p["protocol"] for p in summary["schedule"]] == ["bsp", "asp", "bsp"]
    assert summary["schedule"][-1]["end_fraction"] >= 1.0
    # The BSP fallback trains the model back: well above chance (0.1) at the end.
    assert summary["final_accuracy"] > 0.5
    (recorded,) = _records(tmp_path, "guard")
    assert recorded["checkpoint"] == event["checkpoint"]
    return event


def test_a_diverging_asp_phase_is_rolled_back_in_place(write_spec, tmp_path, no_leftovers):
    # An ASP learning rate 1e30 makes the loss non-finite on the first asynchronous steps.
    result, summary = _submit(write_spec, tmp_path, "1.0e+30")
    event = _check_rolled_back(result, summary, tmp_path, "in-place")
    assert event["reason"] == "diverged"


def test_a_rollback_onto_a_rung_on_standby_trains_on(write_spec, tmp_path, no_leftovers):
    """A fallback rung no phase of the schedule runs (local SGD here) is built on standby, not warmed up before
    training (launch.py): the rollback's phase pays its first calls when entered, its group's first average (a
    collective) included, and trains the model back."""
    result, summary = _submit(write_spec, tmp_path, "1.0e+30", "--set", "policy.fallback=[local-sgd]")
    assert result.exit_code == 0, result.output
    assert summary["status"] == "completed", summary["message"]
    event, *after = summary["guard_events"]  # the guard also watches the rung; it has no rung left to act on
    assert event["reason"] == "diverged" and event["mode"] == "in-place"
    assert event["action"].endswith("continue with local-sgd")
    assert all(e["action"].startswith("none") for e in after)
    assert [p["protocol"] for p in summary["schedule"]] == ["bsp", "asp", "local-sgd"]
    assert summary["schedule"][-1]["end_fraction"] >= 1.0 and summary["final_accuracy"] > 0.5


def test_an_asp_rate_100x_too_high_is_rolled_back_by_relaunch(write_spec, tmp_path, no_leftovers):
    # 100x the ASP phase's rate (0.05 per worker): the loss rises or overflows soon after the switch.
    result, summary = _submit(write_spec, tmp_path, "5.0", "--set", "policy.switch_mode=relaunch")
    event = _check_rolled_back(result, summary, tmp_path, "relaunch")
    assert event["reason"] in ("diverged", "loss", "accuracy")


def test_with_the_guard_off_the_same_phase_ends_the_run_diverged(write_spec, tmp_path, no_leftovers):
    result, summary = _submit(write_spec, tmp_path, "1.0e+30", "--no-guard")
    assert result.exit_code == 3, result.output
    assert summary["status"] == "diverged" and summary["guard_events"] == []


def test_a_forced_fall_back_goes_on_from_the_current_weights(write_spec, tmp_path, no_leftovers):
    # 20x the ASP rate collapses the model; `action: fall-back` goes on with BSP from it, restoring nothing (the
    # default `auto` rolls this one back: its training loss rose, see test_an_asp_rate_100x_too_high...).
    # 12 epochs, not 4: the verdict waits for the evaluator, and at 4 epochs (1.4 s of training) the workers reached
    # the end 0.4 s after the verdict's evaluation; an evaluator that lagged more under load let the run finish
    # first, and a verdict at the end of the workload rolls back whatever `action` says (nothing left to repair).
    result, summary = _submit(write_spec, tmp_path, "1.0", "--set", "policy.guard.action=fall-back",
                              "--set", "workload.epochs=12")
    assert result.exit_code == 0, result.output
    assert summary["status"] == "completed", summary["message"]
    event, *after = summary["guard_events"]
    assert event["action"].startswith("fall back at") and event["action"].endswith("continue with bsp")
    # BSP from a collapsed model rarely brings it back: where it ends below the floor, the guard says so.
    assert [e["reason"] for e in after] == (["short after repair"] if summary["final_accuracy"]
                                            < event["values"]["floor"] else [])
    assert event["checkpoint"] is None and event["samples_lost"] == 0 and event["overhead_s"] > 0
    bsp, asp, fallback = summary["schedule"]
    assert [p["protocol"] for p in summary["schedule"]] == ["bsp", "asp", "bsp"] and "rolled_back_to" not in asp
    assert fallback["start_fraction"] == asp["end_fraction"] == event["continued_at"]
    assert summary["switches"][-1]["reason"] == "guard" and summary["abandoned_evaluations"] == []
    # Each worker reported its loss as it paused for the repair (what `auto` chooses from): its last ASP report is
    # at the fraction it paused at. (Each worker pauses where it stands; under load one may pause well behind the
    # other, so nearness to the phase's end does not identify these reports.)
    paused_at = {r["source"]: r["fraction"] for r in _records(tmp_path, "paused") if r["phase"] == 1}
    last_report = {r["worker"]: r["fraction"] for r in _records(tmp_path, "metrics") if r.get("protocol") == "asp"}
    assert paused_at.keys() == {0, 1} and last_report == paused_at
    assert max(paused_at.values()) == asp["end_fraction"]
