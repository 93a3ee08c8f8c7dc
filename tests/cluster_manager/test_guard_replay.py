"""Replaying recorded runs through the guard: same verdict as the live guard, other settings, pretended switches."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from syncswitch.cli import cli
from syncswitch.cluster_manager.guard_replay import replay_run, replay_runs, settings_for, tally
from syncswitch.errors import SpecError
from syncswitch.policies.guard import DegradationGuard, GuardSettings

SWITCH = 0.25


def _stream(accuracies, switch=SWITCH, losses=None):
    """metrics.jsonl records: a loss report every 0.01 of the workload, an evaluation every 0.05."""
    records = [{"kind": "entered", "source": 0, "phase": 0, "fraction": 0.0}]
    for i in range(1, 101):
        f = round(i / 100, 4)
        if switch is not None and f > switch and not any(r.get("phase") == 1 for r in records):
            records.append({"kind": "entered", "source": 0, "phase": 1, "fraction": switch})
        loss = losses(f) if losses else 1.0
        records += [{"kind": "metrics", "worker": w, "fraction": f, "loss": loss} for w in (0, 1)]
        if i % 5 == 0:
            records.append({"kind": "evaluation", "abandoned": False, "fraction": f, "accuracy": accuracies(f)})
    return records


def _run(tmp_path, name, records, schedule=("bsp", "asp"), guard=None, final=0.5):
    folder = tmp_path / name
    folder.mkdir()
    summary = {"status": "completed", "final_accuracy": final,
               "schedule": [{"protocol": p} for p in schedule],
               "guard": guard or {**vars(GuardSettings()), "reference": [], "enabled": False, "fallback": ["bsp"]}}
    (folder / "summary.json").write_text(json.dumps(summary))
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(folder)


def _collapse(f):
    return min(0.5, 2 * f) if f <= SWITCH else 0.3   # 0.5 at the switch, then 20 points below


def _rising(f):
    return 0.45 + f * 0.3


def test_a_collapse_gets_the_verdict_the_live_guard_gives(tmp_path):
    records = _stream(_collapse)
    replay = replay_run(_run(tmp_path, "collapse", records))
    live = DegradationGuard(GuardSettings())
    live.on_phase("bsp", True, 0.0)
    verdict = None
    for r in records:
        if r["kind"] == "entered" and r["phase"] == 1:
            live.on_phase("asp", False, r["fraction"])
        elif r["kind"] == "metrics":
            verdict = live.on_loss(r["fraction"], r["loss"])
        elif r["kind"] == "evaluation":
            verdict = live.on_evaluation(r["fraction"], r["accuracy"])
        if verdict:
            break
    assert replay.verdict == verdict and replay.verdict.reason == "accuracy"
    assert replay.watched_from == SWITCH and not replay.pretended
    assert "accuracy verdict at 35.0%" in replay.line() and "the run's own guard: off" in replay.line()


def test_other_settings_change_the_decision(tmp_path):
    run = _run(tmp_path, "collapse", _stream(_collapse))
    assert replay_run(run, {"accuracy_drop": 0.25}).verdict is None
    assert replay_run(run, {"policy.guard.accuracy_drop": 0.1}).verdict is not None


def test_a_synchronous_run_is_watched_only_from_a_pretended_switch(tmp_path):
    # BSP's own noise: a 10-point dip at 0.4-0.5, as the synthetic ResNet's evaluations show at its high rate.
    def noisy(f):
        return 0.6 if 0.38 < f < 0.52 else 0.7
    run = _run(tmp_path, "bsp", _stream(noisy, switch=None), schedule=("bsp",))
    assert replay_run(run).watched_from is None
    pretended = replay_run(run, as_switch_at=0.3)
    assert pretended.pretended and pretended.watched_from == 0.3
    assert pretended.verdict is not None and pretended.verdict.reason == "accuracy"
    assert replay_run(run, {"accuracy_drop": 0.15}, as_switch_at=0.3).verdict is None


def test_a_pretended_switch_sees_held_back_scores_where_their_checkpoints_were_written(tmp_path):
    # A local BSP run holds its checkpoints back (evaluation.live) and records their scores after training, newest
    # first: in that order the latest is always the final model, and no dip could be judged.
    def noisy(f):
        return 0.6 if 0.38 < f < 0.52 else 0.7
    records = _stream(noisy, switch=None)
    scores = [r for r in records if r["kind"] == "evaluation"]
    held = [r for r in records if r["kind"] != "evaluation"] + scores[::-1]
    run = _run(tmp_path, "held", held, schedule=("bsp",))
    live = _run(tmp_path, "live", records, schedule=("bsp",))
    verdict = replay_run(run, as_switch_at=0.3).verdict
    assert verdict is not None and verdict == replay_run(live, as_switch_at=0.3).verdict
    assert (verdict.fraction, verdict.onset) == (0.45, 0.4)


def test_the_runs_own_rollback_ends_the_replay(tmp_path):
    records = _stream(_collapse)
    cut = next(i for i, r in enumerate(records) if r.get("fraction", 0) >= 0.33)
    own = {"kind": "guard", "fraction": 0.33, "reason": "loss", "onset": 0.26, "action": "rollback to 25.0%"}
    records.insert(cut, own)
    guarded = {**vars(GuardSettings()), "reference": [], "fallback": ["bsp"]}
    replay = replay_run(_run(tmp_path, "rolled", records, guard=guarded))
    assert replay.verdict is None and replay.replayed_to < 0.33
    assert replay.recorded["reason"] == "loss"
    assert "the run's own guard: loss at 33.0%, rollback to 25.0%" in replay.line()


def test_a_loss_climb_and_a_divergence_are_replayed(tmp_path):
    climb = _run(tmp_path, "climb", _stream(_rising, losses=lambda f: 1.0 if f <= 0.3 else 2.5))
    assert replay_run(climb).verdict is None  # the loss rule is off by default
    assert replay_run(climb, {"loss_rule": True}).verdict.reason == "loss"
    assert replay_run(climb, {"loss_rise": 0.5}).verdict.reason == "loss"  # a loss threshold asks for the rule
    # A run recorded before the rule became optional had it on, and is replayed so.
    old = {k: v for k, v in vars(GuardSettings()).items() if k != "loss_rule"}
    climb = _run(tmp_path, "old", _stream(_rising, losses=lambda f: 1.0 if f <= 0.3 else 2.5),
                 guard={**old, "reference": [], "fallback": ["bsp"]})
    assert replay_run(climb).verdict.reason == "loss"
    assert replay_run(climb, {"loss_rule": False}).verdict is None
    records = _stream(_rising)
    records.insert(len(records) // 2, {"kind": "diverged", "fraction": 0.5, "loss": float("nan")})
    assert replay_run(_run(tmp_path, "nan", records)).verdict.reason == "diverged"


def test_bad_overrides_and_folders_fail_with_one_line(tmp_path):
    with pytest.raises(SpecError, match="policy.guard.accuracy_dorp.*did you mean 'accuracy_drop'"):
        settings_for(None, {"accuracy_dorp": 0.1})
    with pytest.raises(SpecError, match="policy.guard.window=0.9"):
        settings_for(None, {"window": 0.9})
    with pytest.raises(SpecError, match="as_switch_at=1.5"):
        replay_runs([str(tmp_path)], as_switch_at=1.5)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "summary.json").write_text("{")
    (tmp_path / "broken" / "metrics.jsonl").write_text("")
    with pytest.raises(SpecError, match="corrupt JSON"):
        replay_run(str(tmp_path / "broken"))


def test_recorded_settings_are_kept_and_overrides_win():
    recorded = {**vars(GuardSettings(accuracy_drop=0.2)), "enabled": False, "reference": [[0.5, 0.8]],
                "fallback": ["ssp", "bsp"]}
    settings = settings_for(recorded, {"window": 0.08})
    assert settings.enabled and settings.accuracy_drop == 0.2 and settings.window == 0.08
    assert settings.reference == ((0.5, 0.8),)


def test_the_command_prints_a_line_per_run_and_a_tally(tmp_path):
    parent = tmp_path / "runs"
    parent.mkdir()
    _run(parent, "a-collapse", _stream(_collapse))
    _run(parent, "b-healthy", _stream(_rising))
    result = CliRunner().invoke(cli, ["guard", "replay", str(parent)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("a-collapse: completed") and "accuracy verdict" in lines[0]
    assert lines[1].startswith("b-healthy: completed") and "quiet up to 100.0%" in lines[1]
    assert lines[2] == ("1 of 2 watched run(s) would be repaired (decided at 35-35%; 0 rolled back, 1 falling back "
                        "from there); 0 had nothing to watch")
    as_json = CliRunner().invoke(cli, ["guard", "replay", "--json", str(parent)])
    assert [json.loads(line)["verdict"] is None for line in as_json.output.splitlines()] == [False, True]
    bad = CliRunner().invoke(cli, ["guard", "replay", "--set", "accuracy_drop", str(parent)])
    assert bad.exit_code == 2 and bad.output.strip().startswith("error: --set 'accuracy_drop': expected KEY=VALUE")
    assert tally([]) == "0 of 0 watched run(s) would be repaired; 0 had nothing to watch"
    assert os.path.isdir(parent)


def test_the_replay_says_which_repair_the_verdict_gets(tmp_path):
    # The same collapse of the evaluations: with the training loss flat it falls back from there (the default
    # "auto"), with the loss up 30% since the switch it rolls back, and `--set action=rollback` always rolls back.
    held = replay_run(_run(tmp_path, "held", _stream(_collapse)))
    rose = replay_run(_run(tmp_path, "rose", _stream(_collapse, losses=lambda f: 1.0 if f <= SWITCH else 1.3)))
    assert held.verdict is not None and not held.rolls_back and "falling back from there" in held.line()
    assert rose.verdict is not None and rose.rolls_back and rose.line().split("decided at")[1].endswith(
        "rolling back; the run's own guard: off")
    assert replay_run(held.run_dir, {"action": "rollback"}).rolls_back


def test_a_late_evaluation_is_decided_where_training_had_got_to(tmp_path):
    # The evaluator of a guarded run lags: the evaluations of 0.30-0.40 arrive only once training reports 0.6.
    records = _stream(_collapse)
    late = [r for r in records if r["kind"] == "evaluation" and 0.25 < r["fraction"] <= 0.6]
    rest = [r for r in records if r not in late]
    at = next(i for i, r in enumerate(rest) if r.get("fraction", 0) >= 0.6 and r["kind"] == "metrics")
    guarded = {**vars(GuardSettings()), "reference": [], "enabled": True, "fallback": ["bsp"]}
    replay = replay_run(_run(tmp_path, "late", rest[:at + 1] + late + rest[at + 1:], guard=guarded))
    assert replay.verdict.fraction == 0.35 and replay.decided_at == 0.6
    assert "decided at 60.0%" in replay.line()


def test_a_run_without_a_guard_is_replayed_as_if_its_scores_came_in_live(tmp_path):
    # Nothing watched it, so it held every checkpoint back and scored them after training, newest first.
    records = _stream(_collapse)
    scores = [r for r in records if r["kind"] == "evaluation"]
    held = [r for r in records if r["kind"] != "evaluation"] + scores[::-1]
    replay = replay_run(_run(tmp_path, "held", held))
    assert (replay.verdict.reason, replay.verdict.fraction, replay.decided_at) == ("accuracy", 0.35, 0.35)


def test_a_replay_tells_the_guard_how_long_each_phases_metrics_windows_take_to_fill():
    from syncswitch.cluster_manager.guard_replay import _window

    summary = {"workers": 4, "total_samples": 12000,
               "schedule": [{"protocol": "bsp", "config": {"per_worker_batch": 32}}, {"protocol": "local-sgd"}]}
    assert _window(summary, 0) == pytest.approx(20 * 4 * 32 / 12000)  # the ResNet's: 0.21 of its workload
    assert _window(summary, 1) == 0.0  # a summary without the phase's batch: not waited for
