"""The switch rules on deterministic loss streams: a plateau defers, a steep fall defers, a settled loss switches."""

import math

import pytest

from syncswitch.policies import SWITCH_RULES
from syncswitch.policies.timing import STAY, SWITCH, FixedTiming, LossRegimeTiming, TimingSettings


def _fed(curve, until, step=0.005, settings=TimingSettings()):
    rule = LossRegimeTiming(settings)
    f = 0.0
    while f <= until + 1e-9:
        rule.on_loss(f, curve(f))
        f += step
    return rule


def plateau_then_fall(start):
    """ln 10 until `start`, then a fall to 0.1 within about 0.15 of the workload."""
    return lambda f: 2.3 if f < start else 0.1 + 2.2 * math.exp(-(f - start) / 0.04)


def test_rules_are_registered_by_name():
    assert SWITCH_RULES.get("loss") is LossRegimeTiming and SWITCH_RULES.get("fixed") is FixedTiming


def test_a_loss_still_on_its_plateau_defers_and_says_why():
    rule = _fed(plateau_then_fall(0.4), 0.25)
    assert rule.decide(0.25, 0.25) is None
    assert "near its initial value" in rule.waiting_reason(0.25)
    assert rule.observed(0.25)["drop"] == pytest.approx(0.0)


def test_a_steep_fall_defers_until_it_flattens():
    curve = plateau_then_fall(0.3)
    rule = _fed(curve, 0.36)
    assert rule.observed(0.36)["drop"] >= 0.5
    assert rule.decide(0.36, 0.25) is None
    assert "falling fast" in rule.waiting_reason(0.36)
    rule = _fed(curve, 0.5)
    decision = rule.decide(0.5, 0.25)
    assert decision is not None and decision.action == SWITCH
    assert decision.values["recent_share"] <= TimingSettings().max_rate


def test_a_run_that_settled_early_switches_at_the_earliest_point():
    rule = _fed(lambda f: 0.2 + 2.1 * math.exp(-f / 0.03), 0.25)
    decision = rule.decide(0.25, 0.25)
    assert decision.action == SWITCH and decision.fraction == 0.25


def test_past_the_latest_point_the_run_stays_synchronous():
    rule = _fed(plateau_then_fall(0.9), 0.6)
    decision = rule.decide(0.6, 0.25)
    assert decision.action == STAY and "latest" in decision.reason
    assert _fed(plateau_then_fall(0.9), 0.55).decide(0.55, 0.25) is None


def test_the_latest_point_is_never_before_the_earliest():
    rule = _fed(plateau_then_fall(0.95), 0.7, settings=TimingSettings(latest=0.5))
    assert rule.decide(0.65, 0.7) is None or rule.decide(0.65, 0.7).action != STAY
    assert rule.decide(0.7, 0.7).action == STAY


def test_sparse_reports_still_decide():
    """Reports 8% of the workload apart (a short job): the windows fall back to the last report before them."""
    rule = _fed(lambda f: 0.2 + 2.1 * math.exp(-f / 0.03), 0.4, step=0.08)
    assert rule.observed(0.4)["recent_share"] is not None
    assert rule.decide(0.4, 0.25).action == SWITCH


def test_reports_far_apart_judge_the_fall_per_window():
    """The quickstart on a quiet machine: a 3-second job whose workers report about every 0.17 of the workload.
    The fall between two reports is scaled to one window; unscaled, it never settled before the latest point."""
    reports = [(0.0016, 2.311), (0.1264, 1.603), (0.2976, 1.277), (0.4656, 0.798), (0.6432, 0.514)]
    rule = LossRegimeTiming()
    for fraction, loss in reports[:2]:
        rule.on_loss(fraction, loss)
    assert rule.decide(0.1264, 0.1) is None  # 31% below its start, all of it since the last report
    rule.on_loss(*reports[2])
    decision = rule.decide(0.2976, 0.25)
    # 32% of the fall came in the last 0.17 of the workload: 9% a window (unscaled 32%: it waited past 0.6)
    assert decision.action == SWITCH
    assert decision.values["recent_span"] == pytest.approx(0.1712)
    assert decision.values["recent_share"] == pytest.approx((1.603 - 1.277) / (2.311 - 1.277) * 0.05 / 0.1712)


def test_a_loss_that_settles_only_past_the_latest_point_says_so():
    rule = _fed(lambda f: 0.2 + 2.1 * math.exp(-f / 0.03), 0.7, step=0.1)
    decision = rule.decide(0.7, 0.25)
    assert decision.action == STAY and "left its early regime only" in decision.reason


def test_no_history_a_window_back_waits():
    rule = LossRegimeTiming()
    rule.on_loss(0.3, 0.1)
    assert rule.decide(0.3, 0.25) is None


def test_non_finite_losses_are_ignored():
    rule = _fed(lambda f: 0.2 + 2.1 * math.exp(-f / 0.03), 0.3)
    rule.on_loss(0.3, float("nan"))
    assert rule.decide(0.3, 0.25).action == SWITCH


def test_the_fixed_rule_switches_where_the_schedule_says():
    assert FixedTiming().decide(0.25, 0.25).action == SWITCH
