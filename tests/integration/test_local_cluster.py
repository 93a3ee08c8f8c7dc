"""Real 2-worker local clusters: BSP, ASP and an in-place switch train above chance and leave nothing running."""

import json
import os
import re

import pytest
from click.testing import CliRunner

from syncswitch import spec as specmod
from syncswitch.cli import cli
from syncswitch.cluster_manager import submission
from syncswitch.spec import default_switch_to
from syncswitch.spec.model import LrDecay
from syncswitch.wire import saved

pytestmark = pytest.mark.cluster

JOB = """
name: digits
script: EXAMPLES/digits_mlp.py
hyperparameters: {batch_size: 16, learning_rate: 0.05, momentum: 0.9}
workload: {epochs: 4}
cluster: {backend: local, workers: 2}
# The switch where the schedule puts it: these tests drive the switch mechanics, not the switch rule.
evaluation: {every: 0.25}
policy: {switch_rule: fixed}
"""


def _run(write_spec, tmp_path, overrides):
    job = specmod.load(write_spec(JOB), overrides)
    return submission.submit(job, output_dir=str(tmp_path / "run"), progress=False)


def _check_common(summary, tmp_path):
    assert summary["status"] == "completed", summary["message"]
    assert summary["final_accuracy"] > 0.5  # 10 classes: chance is 0.1
    assert summary["converged_accuracy"] > 0.5
    for key in ("job", "backend", "workers", "schedule", "switches", "total_time_s", "time_to_accuracy_s",
                "target_accuracy", "init_time_s"):
        assert key in summary
    run = tmp_path / "run"
    assert json.loads((run / "summary.json").read_text())["status"] == "completed"
    assert (run / "metrics.jsonl").stat().st_size > 0
    assert os.listdir(run / "tensorboard")
    assert any(name.endswith(".index") for name in os.listdir(run / "checkpoints"))
    assert summary["evaluations"][-1]["fraction"] >= 1.0
    # Checkpoints are named by the global step: a phase that left it still would save one over another (a
    # rollback would then restore the wrong one, and the evaluator skip a path it had scored).
    paths = [r["path"] for r in _records(tmp_path, "eval_checkpoint")]
    assert len(paths) == len(set(paths)), paths


def _check_copies(tmp_path):
    """A synchronous run's evaluation checkpoints each hold the model at their own step (BSP's all-reduce engine
    copies its replica at the step and writes it beside training): the counts inside are those each was named and
    reported with (asynchronous workers move the counts between the read and the save, so not there)."""
    import tensorflow as tf

    records = _records(tmp_path, "eval_checkpoint")
    assert records
    for record in records:
        reader = tf.train.load_checkpoint(record["path"])
        assert reader.get_tensor("global_step") == int(record["path"].rsplit("-", 1)[1]), record
        assert reader.get_tensor("syncswitch/samples") == record["samples"], record


@pytest.mark.parametrize("protocol, parameter_servers", [("bsp", 1), ("asp", "per-node")])
def test_single_protocol_run(write_spec, tmp_path, no_leftovers, protocol, parameter_servers):
    # the local default (one PS task) and the paper's layout (one per node)
    summary = _run(write_spec, tmp_path, [f"policy.schedule=[{{protocol: {protocol}}}]",
                                          "evaluation.target_accuracy=0.5",
                                          f"cluster.parameter_servers={parameter_servers}"])
    _check_common(summary, tmp_path)
    if protocol == "bsp":
        _check_copies(tmp_path)
    assert [p["protocol"] for p in summary["schedule"]] == [protocol]
    assert summary["switches"] == []
    phase = summary["schedule"][0]
    assert phase["start_fraction"] == 0.0 and phase["end_fraction"] >= 1.0
    assert phase["samples"] >= summary["total_samples"]
    assert summary["parameter_servers"] == (1 if parameter_servers == 1 else 2)
    assert summary["time_to_accuracy_s"] is not None and summary["time_to_accuracy_s"] <= summary["total_time_s"]
    # The local nodes share the evaluator's machine: an unwatched run's checkpoints were scored after its last step,
    # every one of them, each at its checkpoint's time.
    live = summary["evaluation_live"]
    assert live["setting"] == "auto" and live["deferred"]
    assert live["scored_after_a_pause"] == len(_records(tmp_path, "eval_checkpoint")) == len(summary["evaluations"]) - 1
    assert all(e["time_s"] <= summary["total_time_s"] + 1e-3 for e in summary["evaluations"])


def test_in_place_switch(write_spec, tmp_path, no_leftovers):
    # Into a stale protocol, which momentum-ramp configures (the default local-sgd is configured as BSP).
    summary = _run(write_spec, tmp_path, ["policy.switch_at=0.5", "policy.configuration=momentum-ramp",
                                          "policy.switch_to=lookahead"])
    _check_common(summary, tmp_path)
    assert [p["protocol"] for p in summary["schedule"]] == ["bsp", "lookahead"]
    (switch,) = summary["switches"]
    assert (switch["from"], switch["to"], switch["mode"]) == ("bsp", "lookahead", "in-place")
    assert 0.5 <= switch["at_fraction"] < 0.55 and switch["overhead_s"] > 0
    # progress is continuous across the switch: the ASP phase starts where BSP stopped
    assert summary["schedule"][1]["start_fraction"] == summary["schedule"][0]["end_fraction"]
    assert summary["timing_policy"] == {"source": "spec", "switch_at": 0.5}
    # momentum-ramp: BSP at full momentum; ASP enters at 0 on its way to 0.9 over 0.9 * 2 epochs
    bsp, asp = (p["config"] for p in summary["schedule"])
    assert (bsp["momentum_ramp_epochs"], asp["momentum_ramp_epochs"]) == (0.0, pytest.approx(1.8))
    entered = {r["phase"]: r for r in _records(tmp_path, "entered")}
    assert entered[0]["momentum_now"] == pytest.approx(0.9) and entered[1]["momentum"] == pytest.approx(0.9)
    assert entered[1]["momentum_now"] == 0.0
    # Every checkpoint the chief reported has its own record beside it, for a resume after a manager kill.
    manifest = json.loads((tmp_path / "run" / "checkpoints" / "durable.json").read_text())["checkpoints"]
    records = {r["path"]: r for r in saved.read_all(str(tmp_path / "run" / "checkpoints" / "model.ckpt"))}
    assert manifest and {c["path"] for c in manifest} <= set(records)
    for checkpoint in manifest:  # (the switch at 50% saves the evaluation point's checkpoint again)
        record = records[checkpoint["path"]]
        assert record["samples"] == checkpoint["samples"]
        assert record["kind"] in {c["kind"] for c in manifest if c["path"] == checkpoint["path"]}


def test_script_error_is_one_line_and_cleans_up(write_spec, tmp_path, no_leftovers):
    script = tmp_path / "broken.py"
    script.write_text("def input_fn(split, batch_size, params):\n    raise ValueError('no data here')\n\n"
                      "def model_fn(features, labels, params, training):\n    pass\n\n"
                      "def num_examples(split, params):\n    return 10\n")
    path = write_spec(JOB.replace("EXAMPLES/digits_mlp.py", str(script)))
    result = CliRunner().invoke(cli, ["submit", path, "--output-dir", str(tmp_path / "run"), "--quiet"])
    assert result.exit_code == 2
    # The tasks and the evaluator load the script side by side: whichever calls input_fn first reports it.
    assert re.search(r"broken.py: input_fn\('(train', 16|test', 500), params\) raised ValueError: no data here",
                     result.output), result.output
    assert result.output.count("\n") == 1 and "Traceback" not in result.output
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["status"] == "failed"


def test_divergence_stops_the_run(write_spec, tmp_path, no_leftovers):
    path = write_spec(JOB)
    result = CliRunner().invoke(cli, ["submit", path, "--protocol", "asp", "--set",
                                      "hyperparameters.learning_rate=1.0e+30", "--output-dir",
                                      str(tmp_path / "run"), "--quiet"])
    assert result.exit_code == 3, result.output
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "diverged" and "training diverged" in summary["message"]


def _records(tmp_path, kind):
    with open(tmp_path / "run" / "metrics.jsonl", encoding="utf-8") as fh:
        return [r for r in map(json.loads, fh) if r.get("kind") == kind]


def _check_learning_rate(summary, tmp_path):
    """Each phase starts with its configured rate times the decay factor the progress has reached (the spec's, which
    the simulator uses: step factors, a warm-up, a cosine)."""
    decay = LrDecay(**summary["hyperparameters"]["lr_decay"])
    for record in _records(tmp_path, "entered"):
        phase = summary["schedule"][record["phase"]]
        factor = decay.factor_at(phase["start_fraction"])
        assert record["learning_rate"] == pytest.approx(phase["config"]["learning_rate"] * factor, rel=1e-5)
        assert record["momentum"] == pytest.approx(phase["config"]["momentum"], rel=1e-6)


def test_relaunch_switch_restores_exactly(write_spec, tmp_path, no_leftovers, monkeypatch):
    monkeypatch.setenv("SYNCSWITCH_REPORT_VARIABLES", "1")
    summary = _run(write_spec, tmp_path, ["policy.switch_at=0.5", "policy.switch_mode=relaunch",
                                          "hyperparameters.lr_decay={boundaries: [0.25], factors: [0.5]}"])
    _check_common(summary, tmp_path)
    (switch,) = summary["switches"]
    assert (switch["from"], switch["to"], switch["mode"]) == ("bsp", default_switch_to(2).protocol, "relaunch")
    assert summary["schedule"][1]["start_fraction"] == summary["schedule"][0]["end_fraction"]
    _check_learning_rate(summary, tmp_path)
    # Parameters, momentum slots, global step and counters after the relaunch equal those saved before it.
    (saved,) = [r for r in _records(tmp_path, "saved") if r["reason"] == "switch"]
    (restored,) = [r for r in _records(tmp_path, "entered") if r["phase"] == 1]
    # The relaunched graph holds only the ASP update path; BSP's group size is runtime state, never saved,
    # so both graphs checkpoint the same variables (and a checkpoint of either restores into the other).
    assert "syncswitch/sync_group" not in saved["variables"]
    assert restored["variables"] == saved["variables"]
    names = set(saved["variables"])
    assert any(name.endswith("/Momentum") for name in names)  # optimizer slots are covered
    assert {"global_step", "syncswitch/samples"} <= names
    assert restored["samples"] == saved["samples"]


def test_relaunch_from_asp_back_to_bsp(write_spec, tmp_path, no_leftovers):
    # The ASP graph's checkpoint restores into the BSP graph (a rollback's fallback, a greedy resume).
    summary = _run(write_spec, tmp_path, ["policy.schedule=[{protocol: asp, until: 0.4}, {protocol: bsp}]",
                                          "policy.switch_mode=relaunch"])
    _check_common(summary, tmp_path)
    (switch,) = summary["switches"]
    assert (switch["from"], switch["to"], switch["mode"]) == ("asp", "bsp", "relaunch")


def test_in_place_asp_to_bsp(write_spec, tmp_path, no_leftovers):
    # A warm-up and a cosine decay (spec.model.LrDecay): BSP enters at the cosine's factor at 0.4.
    summary = _run(write_spec, tmp_path, ["policy.schedule=[{protocol: asp, until: 0.4}, {protocol: bsp}]",
                                          "hyperparameters.lr_decay={warmup: 0.05, cosine: 0.2}"])
    _check_common(summary, tmp_path)
    assert [p["protocol"] for p in summary["schedule"]] == ["asp", "bsp"]
    (switch,) = summary["switches"]
    assert (switch["from"], switch["to"], switch["mode"]) == ("asp", "bsp", "in-place")
    assert summary["schedule"][1]["start_fraction"] == summary["schedule"][0]["end_fraction"]
    _check_learning_rate(summary, tmp_path)


def _final_variables(tmp_path):
    (final,) = [r for r in _records(tmp_path, "saved") if r["reason"] == "final"]
    return final["variables"]


def test_an_in_place_run_that_stays_synchronous_is_bsps_run(write_spec, tmp_path, no_leftovers, monkeypatch):
    # An in-place run builds every protocol of its schedule into one graph and warms up before training those it
    # starts in or surely enters, one or two steps apiece; were those batches not given back, it would train on
    # another stream than a BSP-only run of the same seed, and end elsewhere although it never left BSP.
    monkeypatch.setenv("SYNCSWITCH_REPORT_VARIABLES", "1")
    bsp = _run(write_spec, tmp_path, ["policy.schedule=[{protocol: bsp}]"])
    _check_common(bsp, tmp_path)
    alone = _final_variables(tmp_path)
    os.rename(tmp_path / "run", tmp_path / "bsp")
    # A loss that must fall by its whole value never leaves the early regime: the rule keeps BSP past `latest`.
    stayed = _run(write_spec, tmp_path, ["policy.switch_at=0.3", "policy.switch_mode=in-place",
                                         "policy.switch_rule={rule: loss, min_drop: 1.0, latest: 0.6}"])
    _check_common(stayed, tmp_path)
    assert stayed["switches"] == [] and len(stayed["schedule"]) == 1, stayed["schedule"]
    assert _final_variables(tmp_path) == alone
