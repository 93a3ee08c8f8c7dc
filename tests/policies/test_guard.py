"""The degradation guard on synthetic metric streams: a sustained rise fires, noise and transients do not."""

import math
import random

import pytest

from syncswitch.policies.guard import DegradationGuard, GuardSettings


LOSS_RULE = GuardSettings(loss_rule=True)


def _feed(guard, losses, start, step=0.002, workers=2, noise=0.0, seed=0):
    """Report `losses(fraction)` from every worker every `step` of the workload from `start`; first verdict."""
    rng = random.Random(seed)
    f = start
    while f < 1.0:
        for _ in range(workers):
            verdict = guard.on_loss(f, losses(f) * (1 + rng.gauss(0, noise)))
            if verdict is not None:
                return verdict
        f = round(f + step, 9)
    return None


def _bsp(guard, loss=1.3, until=0.25):
    """A BSP phase from 0 to `until` whose loss reports settled at `loss`."""
    guard.on_phase("bsp", True, 0.0)
    for i in range(int(until / 0.002)):
        assert guard.on_loss(i * 0.002, loss) is None


def test_a_sustained_rise_after_the_switch_fires_and_names_its_onset():
    guard = DegradationGuard(GuardSettings(loss_rule=True, loss_rise=0.5, window=0.04, smoothing=0.02))
    _bsp(guard)
    guard.on_phase("asp", False, 0.25)
    assert guard.reference_loss == pytest.approx(1.3)
    verdict = _feed(guard, lambda f: 1.3 if f < 0.30 else 2.3, 0.25)
    assert verdict.reason == "loss"
    assert 0.28 <= verdict.onset <= 0.30            # where the loss left the band (less the smoothing)
    assert 0.34 <= verdict.fraction <= 0.37         # after the window, not before
    assert verdict.values["smoothed_loss"] == pytest.approx(2.3)


def test_by_default_only_evaluations_and_divergence_are_judged_not_a_loss_rise():
    # A healthy switch's loss can rise as much as a collapsing one's (BENCHMARKS.md): the loss rule is opt-in.
    guard = DegradationGuard()
    _bsp(guard)
    guard.on_phase("asp", False, 0.25)
    assert _feed(guard, lambda f: 1.3 if f < 0.30 else 2.3, 0.25) is None
    assert guard.on_loss(0.9, math.nan).reason == "diverged"
    guard.on_evaluation(0.2, 0.8)
    assert guard.on_evaluation(0.3, 0.5) is None
    assert guard.on_evaluation(0.35, 0.5).reason == "accuracy"


def test_a_transient_bump_and_noise_do_not_fire():
    guard = DegradationGuard(LOSS_RULE)
    _bsp(guard)
    guard.on_phase("asp", False, 0.25)
    # +35% for 5% of the workload right after the switch, then learning goes on; 10% noise per report.
    bump = lambda f: 1.3 * (1.35 if f < 0.30 else max(0.3, 1.0 - (f - 0.30)))  # noqa: E731
    assert _feed(guard, bump, 0.25, noise=0.1, seed=3) is None


def test_a_rise_shorter_than_the_window_does_not_fire():
    guard = DegradationGuard(GuardSettings(loss_rule=True, window=0.04, smoothing=0.01))
    guard.on_phase("bsp", True, 0.0)
    guard.on_phase("asp", False, 0.0)
    blip = lambda f: 3.0 if 0.5 <= f < 0.52 else 1.0  # noqa: E731
    assert _feed(guard, blip, 0.0) is None


def test_synchronous_phases_are_not_watched_but_divergence_always_is():
    guard = DegradationGuard(LOSS_RULE)
    guard.on_phase("bsp", True, 0.0)
    assert _feed(guard, lambda f: 1.0 + 10 * f, 0.0) is None  # BSP rising: nothing safer to fall back to
    verdict = guard.on_loss(0.6, math.nan)
    # Dated from the last report before it, within 10x the lowest (up to 6.98 against 1.0).
    assert (verdict.reason, verdict.fraction, verdict.onset) == ("diverged", 0.6, pytest.approx(0.598))


def test_a_divergence_dates_from_where_the_loss_blew_up():
    """The rollback's target lies at or before the last sane loss report, not just before the NaN: a Transformer at
    twice its rate reported 1.6, then 8026, then NaN."""
    guard = DegradationGuard(LOSS_RULE)
    guard.on_phase("bsp", True, 0.0)
    for fraction, loss in [(0.1, 1.6), (0.2, 1.2), (0.3, 80.0), (0.4, 8026.0)]:
        assert guard.on_loss(fraction, loss) is None
    assert guard.on_loss(0.5, math.nan).onset == 0.2  # the last sane report
    guard = DegradationGuard(LOSS_RULE)
    guard.on_phase("bsp", True, 0.0)
    for fraction, loss in [(0.1, 1.0), (0.2, 50.0), (0.3, 0.9)]:  # a spike it recovered from
        guard.on_loss(fraction, loss)
    assert guard.on_divergence(0.4, math.inf).onset == 0.3
    fresh = DegradationGuard(LOSS_RULE)
    fresh.on_phase("bsp", True, 0.0)
    assert fresh.on_loss(0.1, math.nan).onset == 0.1  # no report before it: from the NaN


def test_accuracy_below_the_best_twice_over_the_window_fires():
    # accuracy_noise off: BSP's 4 evaluations bend (0.4, 0.6, 0.7, 0.75), which would widen the drop to 0.065.
    guard = DegradationGuard(GuardSettings(accuracy_drop=0.05, window=0.04, accuracy_noise=0.0))
    guard.on_phase("bsp", True, 0.0)
    for f, acc in [(0.05, 0.4), (0.1, 0.6), (0.15, 0.7), (0.2, 0.75)]:
        assert guard.on_evaluation(f, acc) is None
    guard.on_phase("asp", False, 0.2)
    assert guard.on_evaluation(0.25, 0.72) is None        # within 5 points of the best
    assert guard.on_evaluation(0.30, 0.55) is None        # the first bad one: not yet
    verdict = guard.on_evaluation(0.35, 0.40)
    assert verdict.reason == "accuracy" and verdict.onset == 0.30
    assert verdict.values == {"accuracy": 0.40, "best_accuracy": 0.75, "floor": pytest.approx(0.70)}


def test_one_bad_evaluation_between_good_ones_is_noise():
    guard = DegradationGuard()
    guard.on_phase("bsp", True, 0.0)
    guard.on_evaluation(0.2, 0.8)
    guard.on_phase("asp", False, 0.25)
    # (Two low evaluations out of three, e.g. 0.7, 0.79, 0.72, now fire: see the oscillating collapse below.)
    assert [guard.on_evaluation(f, a) for f, a in [(0.3, 0.79), (0.35, 0.7), (0.4, 0.78), (0.45, 0.8)]] == [None] * 4


def test_an_asynchronous_phase_that_starts_the_run_is_watched_for_divergence_only():
    guard = DegradationGuard(LOSS_RULE)
    guard.on_phase("asp", False, 0.0)
    assert _feed(guard, lambda f: 1.0 if f < 0.4 else 3.0, 0.0) is None
    assert guard.on_loss(0.9, math.inf).reason == "diverged"


def test_a_rollback_restarts_the_watch_from_the_checkpoint():
    guard = DegradationGuard(GuardSettings(loss_rule=True, window=0.04, smoothing=0.02))
    guard.on_phase("bsp", True, 0.0)
    guard.on_phase("asp", False, 0.0)
    assert _feed(guard, lambda f: 1.0 if f < 0.4 else 3.0, 0.0).reason == "loss"
    guard.on_phase("bsp", True, 0.35)  # rolled back to 0.35 and falling back to BSP
    assert guard.reference_loss == pytest.approx(1.0)  # the abandoned reports after 0.35 are forgotten


def test_a_relative_rise_at_a_tiny_loss_needs_the_absolute_margin():
    # Near convergence: 0.03 -> 0.05 is +67% but 0.02 nats, ASP noise rather than a collapse.
    guard = DegradationGuard(LOSS_RULE)
    _bsp(guard, loss=0.03)
    guard.on_phase("asp", False, 0.25)
    assert _feed(guard, lambda f: 0.05, 0.25, noise=0.1, seed=1) is None
    # A real collapse from the same level still fires.
    guard = DegradationGuard(LOSS_RULE)
    _bsp(guard, loss=0.03)
    guard.on_phase("asp", False, 0.25)
    verdict = _feed(guard, lambda f: 0.03 if f < 0.3 else 0.5, 0.25)
    assert verdict.reason == "loss" and verdict.values["limit"] == pytest.approx(0.13)


def test_without_a_margin_the_relative_rule_alone_decides():
    guard = DegradationGuard(GuardSettings(loss_rule=True, loss_margin=0.0))
    _bsp(guard, loss=0.03)
    guard.on_phase("asp", False, 0.25)
    assert _feed(guard, lambda f: 0.05, 0.25).reason == "loss"


def _watched_after_bsp(best=0.42):
    guard = DegradationGuard(GuardSettings(accuracy_drop=0.05, window=0.04))
    guard.on_phase("bsp", True, 0.0)
    guard.on_evaluation(0.2, best)
    guard.on_phase("asp", False, 0.25)
    return guard


def test_an_oscillating_collapse_fires_on_two_of_three_low_evaluations():
    # Measured in a 4-worker quickstart run that ended 17 points below BSP with the old twice-in-a-row rule.
    guard = _watched_after_bsp()
    assert guard.on_evaluation(0.30, 0.36) is None   # low
    assert guard.on_evaluation(0.35, 0.41) is None   # back within 5 points
    verdict = guard.on_evaluation(0.40, 0.22)        # low again: 2 of the last 3
    assert verdict.reason == "accuracy" and verdict.onset == 0.30 and verdict.fraction == 0.40


def test_isolated_dips_between_healthy_evaluations_do_not_fire():
    guard = _watched_after_bsp()
    for f, acc in [(0.30, 0.36), (0.35, 0.41), (0.40, 0.43), (0.45, 0.36), (0.50, 0.45), (0.55, 0.46)]:
        assert guard.on_evaluation(f, acc) is None, f


def test_evaluations_are_judged_by_fraction_not_by_arrival():
    # The evaluator scores the newest checkpoint first and fills in the older ones after.
    def guard_after_switch():
        guard = DegradationGuard(GuardSettings(accuracy_drop=0.05, window=0.04))
        guard.on_phase("bsp", True, 0.0)
        guard.on_evaluation(0.2, 0.75)
        guard.on_phase("asp", False, 0.25)
        return guard

    guard = guard_after_switch()
    assert guard.on_evaluation(0.40, 0.40) is None         # the newest: bad, alone so far
    verdict = guard.on_evaluation(0.30, 0.50)               # filled in: two of the last three are bad
    assert (verdict.fraction, verdict.onset, verdict.values["accuracy"]) == (0.40, 0.30, 0.40)

    recovered = guard_after_switch()
    assert recovered.on_evaluation(0.45, 0.78) is None      # the newest is healthy again
    assert recovered.on_evaluation(0.30, 0.40) is None
    assert recovered.on_evaluation(0.40, 0.45) is None      # the past dip is no reason to roll back now


def test_a_rollback_forgets_the_abandoned_branchs_evaluations():
    guard = DegradationGuard()
    guard.on_phase("bsp", True, 0.0)
    guard.on_evaluation(0.2, 0.7)
    guard.on_phase("asp", False, 0.25)
    guard.on_evaluation(0.3, 0.9)   # a lucky evaluation of the branch that is then rolled back
    guard.on_phase("bsp", True, 0.25)
    assert guard.best_accuracy == 0.7


def test_a_dip_at_the_final_evaluation_fires_alone():
    # The final checkpoint is what the run delivers and nothing after it can confirm the dip: judged on its own.
    guard = _watched_after_bsp()
    for f, acc in [(0.30, 0.80), (0.50, 0.88), (0.90, 0.90), (0.95, 0.89)]:
        assert guard.on_evaluation(f, acc) is None
    verdict = guard.on_evaluation(1.0024, 0.72)
    assert (verdict.reason, verdict.fraction, verdict.onset) == ("accuracy", 1.0024, 1.0024)
    assert verdict.values["floor"] == pytest.approx(0.85)


def test_a_final_evaluation_within_its_floor_does_not_fire():
    guard = _watched_after_bsp()
    for f, acc in [(0.30, 0.80), (0.50, 0.88), (0.90, 0.90), (0.95, 0.89)]:
        assert guard.on_evaluation(f, acc) is None
    assert guard.on_evaluation(1.0, 0.86) is None  # 4 points down: within accuracy_drop


def test_a_final_dip_after_a_sustained_one_keeps_the_earlier_onset():
    guard = _watched_after_bsp()
    for f, acc in [(0.30, 0.80), (0.50, 0.88), (0.90, 0.80)]:
        assert guard.on_evaluation(f, acc) is None
    verdict = guard.on_evaluation(1.0, 0.79)
    assert (verdict.fraction, verdict.onset) == (1.0, 0.90)


def _reports(guard, fraction, losses):
    for loss in losses:
        guard.on_loss(fraction, loss)


def test_loss_rose_compares_the_recent_reports_with_those_before_the_phase():
    # Kept and read with the loss rule off: the repair of an accuracy verdict asks it.
    guard = DegradationGuard(GuardSettings())
    guard.on_phase("bsp", True, 0.0)
    assert guard.loss_rose(4) is None  # nothing reported yet
    _reports(guard, 0.2, [2.0, 2.0])
    _reports(guard, 0.24, [1.5, 1.6, 1.5, 1.6])
    guard.on_phase("asp", False, 0.25)
    assert guard.loss_rose(4) is None  # nothing reported in the phase
    _reports(guard, 0.3, [3.0, 3.0])        # an early spike, older than the last four
    _reports(guard, 0.35, [1.4, 1.5, 1.6, 1.5])
    assert guard.loss_rose(4) is False      # held: 1.5 against 1.55
    _reports(guard, 0.4, [1.75, 1.8, 1.7, 1.8])
    assert guard.loss_rose(4) is True       # 1.775 against 1.55: 15% up, more than LOSS_HELD


def test_loss_rose_after_a_rollback_compares_with_the_branch_it_restarts():
    guard = DegradationGuard(GuardSettings())
    guard.on_phase("bsp", True, 0.0)
    _reports(guard, 0.2, [1.0, 1.0])
    guard.on_phase("asp", False, 0.25)
    _reports(guard, 0.4, [5.0, 5.0])
    guard.on_phase("bsp", True, 0.25)  # rolled back to 0.25: the abandoned reports are forgotten
    guard.on_phase("ssp", False, 0.3)
    _reports(guard, 0.35, [1.05, 1.0])
    assert guard.loss_rose(2) is False


def _after_scattered_bsp(noise_t, bsp):
    guard = DegradationGuard(GuardSettings(accuracy_noise=noise_t))
    guard.on_phase("bsp", True, 0.0)
    for f, acc in bsp:
        guard.on_evaluation(f, acc)
    guard.on_phase("asp", False, 0.25)
    return guard


# Before the switch: rising about 0.2 over 0.15 with a 10-point scatter about the line (0.5, 0.65, 0.55, 0.72 ...).
SCATTERED = [(0.1, 0.5), (0.15, 0.65), (0.2, 0.55), (0.25, 0.72)]


def test_with_accuracy_noise_a_job_whose_bsp_evaluations_swing_needs_a_deeper_dip():
    guard = _after_scattered_bsp(2.0, SCATTERED)
    assert 0.15 < guard.drop() < 0.25
    assert guard.on_evaluation(0.30, 0.60) is None and guard.on_evaluation(0.35, 0.58) is None  # a BSP-sized swing
    collapsed = _after_scattered_bsp(2.0, SCATTERED)
    assert collapsed.on_evaluation(0.30, 0.30) is None
    assert collapsed.on_evaluation(0.35, 0.28).reason == "accuracy"
    plain = _after_scattered_bsp(0.0, SCATTERED)   # off: accuracy_drop alone
    assert plain.drop() == 0.05
    assert plain.on_evaluation(0.30, 0.60) is None and plain.on_evaluation(0.35, 0.58).reason == "accuracy"


def test_with_accuracy_noise_steady_evaluations_keep_accuracy_drop():
    steady = _after_scattered_bsp(2.0, [(0.1, 0.5), (0.15, 0.55), (0.2, 0.6), (0.25, 0.65)])
    assert steady.drop() == 0.05          # no scatter: twice the floor of 0.01 is less than accuracy_drop
    few = _after_scattered_bsp(2.0, [(0.2, 0.5), (0.25, 0.7)])
    assert few.drop() == 0.05             # too few evaluations to tell a scatter
