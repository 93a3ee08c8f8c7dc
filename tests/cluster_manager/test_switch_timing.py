"""The switch rule at run time on the fake cluster: a deferred switch, a switch at the earliest point, a run kept
synchronous; each decision in summary.json."""

import math

from tests.cluster_manager.fake_cluster import FakeCluster
from tests.cluster_manager.test_job_lifecycle import _run

LOSS_RULE = "policy.switch_rule=loss"


def _plateau(until):
    return lambda fraction, protocol: 2.3 if fraction < until else 0.1 + 2.2 * math.exp(-(fraction - until) / 0.03)


def test_a_switch_waits_until_the_loss_leaves_its_plateau(write_spec, tmp_path):
    cluster = FakeCluster(total=2000, loss=_plateau(0.3))
    summary, _, _ = _run(write_spec, tmp_path, ["policy.switch_at=0.25", LOSS_RULE], cluster=cluster)
    assert summary["status"] == "completed"
    (switch,) = summary["switches"]
    assert 0.35 < switch["at_fraction"] < 0.6
    bsp, after = summary["schedule"]
    assert bsp["protocol"] == "bsp" and after["protocol"] != "bsp"
    assert bsp["end_fraction"] == switch["at_fraction"] and after["end_fraction"] >= 1.0
    rule = summary["switch_rule"]
    assert rule["rule"] == "loss" and rule["earliest"] == 0.25 and rule["latest"] == 0.6
    (decision,) = rule["decisions"]
    assert decision["action"] == "switch" and decision["values"]["drop"] >= 0.5


def test_a_settled_run_switches_at_the_earliest_point(write_spec, tmp_path):
    cluster = FakeCluster(total=2000, loss=lambda f, p: 0.1 + 2.2 * math.exp(-f / 0.02))
    summary, _, _ = _run(write_spec, tmp_path, ["policy.switch_at=0.25", LOSS_RULE], cluster=cluster)
    (switch,) = summary["switches"]
    assert 0.25 <= switch["at_fraction"] <= 0.26  # decided just before it; the cut lands within a step or two


def test_past_the_latest_point_the_run_stays_synchronous(write_spec, tmp_path):
    cluster = FakeCluster(total=2000, loss=_plateau(0.9))
    summary, _, _ = _run(write_spec, tmp_path, ["policy.switch_at=0.25",
                                                "policy.switch_rule={rule: loss, latest: 0.5}"], cluster=cluster)
    assert summary["status"] == "completed" and summary["switches"] == []
    assert [p["protocol"] for p in summary["schedule"]] == ["bsp"]
    assert summary["schedule"][0]["end_fraction"] >= 1.0
    (decision,) = summary["switch_rule"]["decisions"]
    assert decision["action"] == "stay" and decision["fraction"] >= 0.5


def test_the_fixed_rule_keeps_the_schedule(write_spec, tmp_path):
    cluster = FakeCluster(total=2000, loss=_plateau(0.9))
    summary, _, _ = _run(write_spec, tmp_path, ["policy.switch_at=0.25"], cluster=cluster)
    (switch,) = summary["switches"]
    assert 0.25 <= switch["at_fraction"] <= 0.26
    assert summary["switch_rule"]["decisions"] == []


def test_auto_lets_the_rule_alone_decide(write_spec, tmp_path):
    cluster = FakeCluster(total=2000, loss=_plateau(0.05))
    summary, _, _ = _run(write_spec, tmp_path, ["policy.switch_at=auto", LOSS_RULE], cluster=cluster)
    (switch,) = summary["switches"]
    assert 0.1 <= switch["at_fraction"] < 0.25
    assert summary["switch_rule"]["auto"] and summary["switch_rule"]["earliest"] == 0.1


def test_a_deferred_switch_by_relaunch(write_spec, tmp_path):
    cluster = FakeCluster(total=2000, loss=_plateau(0.3))
    summary, _, _ = _run(write_spec, tmp_path, ["policy.switch_at=0.25", LOSS_RULE, "policy.switch_mode=relaunch"],
                         cluster=cluster)
    assert summary["status"] == "completed"
    (switch,) = summary["switches"]
    assert switch["mode"] == "relaunch" and 0.35 < switch["at_fraction"] < 0.6
