"""The guard's BSP forecast on deterministic streams: a phase whose loss stalls while BSP's was falling is a verdict;
with the accuracy forecast on, one that falls behind where BSP's accuracy was heading."""

import math
import random

import pytest

from syncswitch.errors import SpecError
from syncswitch.policies.forecast import (ACCURACY_HORIZON, LOSS_HORIZON, MIN_NOISE, STALL_FLOOR, STALL_GAP,
                                          STALL_SPAN, AccuracyForecast, LossForecast, expected_accuracy, stalled)
from syncswitch.policies.guard import DegradationGuard, GuardSettings
from syncswitch.spec.policy import guard_section

STEP = 0.005


def _run(before, after, switch_at=0.25, until=0.6, settings=None, window=0.0):
    """Feed BSP's losses up to `switch_at`, then the asynchronous phase's (`window`: the fraction its metrics
    windows take to fill); the first verdict (or None)."""
    guard = DegradationGuard(settings or GuardSettings())
    guard.on_phase("bsp", True, 0.0)
    f = 0.0
    while f <= switch_at + 1e-9:
        assert guard.on_loss(f, before(f)) is None
        f += STEP
    guard.on_phase("asp", False, switch_at, window)
    while f <= until:
        verdict = guard.on_loss(f, after(f))
        if verdict is not None:
            return guard, verdict
        f += STEP
    return guard, None


def falling(f):
    # A short plateau, then a power of the fraction, the shape training curves take (fast at first, then slower):
    # still falling fast at the switch.
    return 2.3 * (max(f, 0.1) / 0.1) ** -1.5


def test_the_fit_reads_the_trend_before_the_switch():
    fractions = [i * STEP for i in range(51)]
    forecast = LossForecast.fit(fractions, [falling(f) for f in fractions], 0.25)
    assert forecast.slope == pytest.approx(-1.5) and forecast.loss_at_start == pytest.approx(falling(0.25))
    assert forecast.at(0.35) == pytest.approx(falling(0.35)) and forecast.at(0.2) == forecast.loss_at_start


def test_the_fit_follows_an_early_fall_slowing_down_as_bsps_own_did():
    # A tabular MLP switched at 0.12: an exponential fitted to the steep fall before it forecast 0.27 at 0.27,
    # where BSP's own runs were at about 0.55; as a power of the fraction the fall slows as the real one did.
    fractions = [i * STEP for i in range(1, 25)]
    early = [0.4 + 2.0 * (f / 0.02) ** -0.8 for f in fractions]  # falling fast, then flattening towards 0.4
    forecast = LossForecast.fit(fractions, early, 0.12)
    truth = 0.4 + 2.0 * (0.27 / 0.02) ** -0.8
    assert forecast.at(0.27) > 0.8 * truth
    exponential = forecast.loss_at_start * math.exp(math.log(early[-1] / early[len(early) // 2]) /
                                                    (fractions[-1] - fractions[len(early) // 2]) * 0.15)
    assert exponential < 0.6 * truth  # what the old fit would have said


def test_a_stalled_phase_is_a_verdict_while_bsp_was_falling():
    stuck = falling(0.25)
    guard, verdict = _run(falling, lambda f: stuck * 1.01)
    assert verdict is not None and verdict.reason == "loss stalled" and verdict.onset == 0.25
    assert 0.25 + 0.1 <= verdict.fraction <= 0.25 + 0.1 + 0.03
    assert verdict.values["forecast_loss"] <= verdict.values["smoothed_loss"] * (1 - STALL_GAP)
    assert guard.loss_rose(2) is False  # the loss held: `auto` repairs it from the current weights


def test_a_phase_that_keeps_falling_is_not():
    _, verdict = _run(falling, lambda f: falling(f) * 1.05)
    assert verdict is None


def test_no_verdict_where_bsp_had_settled():
    settled = 0.3
    _, verdict = _run(lambda f: settled, lambda f: settled * 1.01)
    assert verdict is None


def test_the_forecast_can_be_turned_off():
    stuck = falling(0.25)
    _, verdict = _run(falling, lambda f: stuck, settings=GuardSettings(forecast=False))
    assert verdict is None


def test_a_loss_that_falls_again_resets_the_stall():
    stuck = falling(0.25)
    _, verdict = _run(falling, lambda f: stuck if f < 0.3 else stuck * 0.5)
    assert verdict is None


def test_a_phase_that_falls_then_holds_above_bsps_forecast_is_a_verdict():
    # The memory GRU's ASP phase: it fell for a while after the switch, then held there to the end while BSP's
    # went on to ~0; the stall is judged against the phase's low, not against the loss at the switch.
    at_switch = falling(0.25)
    low = at_switch * 0.7
    guard, verdict = _run(falling, lambda f: at_switch if f < 0.3 else low, until=0.8)
    assert verdict is not None and verdict.reason == "loss stalled"
    assert verdict.values["stalled_at"] == pytest.approx(low, rel=0.01)
    assert 0.3 + STALL_SPAN - 0.03 <= verdict.fraction <= 0.3 + STALL_SPAN + 0.03
    assert verdict.values["forecast_loss"] <= low * (1 - STALL_GAP)


def test_a_phase_that_fell_as_far_as_bsps_forecast_and_holds_is_not():
    at_switch = falling(0.25)
    reached = falling(0.25 + LOSS_HORIZON) * 0.95  # where BSP's trend, held past the horizon, says it would be
    _, verdict = _run(falling, lambda f: at_switch if f < 0.3 else reached, until=0.9)
    assert verdict is None


def _exit(f):
    return 2.3 if f < 0.2 else 2.3 * math.exp(-25.0 * (f - 0.2))  # a plateau, then a steep fall up to the switch


def test_a_loss_down_near_its_floor_is_not_judged():
    # The forecast after so steep a fall says BSP's loss would go on down to about 0.3 (from 0.66 at the switch);
    # a loss that reached its floor at a few percent of the initial 2.3 has converged as far as a stall verdict can
    # tell.
    at_switch = _exit(0.25)
    _, verdict = _run(_exit, lambda f: at_switch if f < 0.28 else 0.15, until=0.8)  # 6.5% of the initial loss
    assert verdict is None
    _, verdict = _run(_exit, lambda f: at_switch if f < 0.28 else 0.5, until=0.8)   # 22%: still judged
    assert verdict is not None and verdict.reason == "loss stalled" and STALL_FLOOR * 2.3 < 0.5


def test_the_forecast_is_held_past_its_horizon():
    fractions = [i * STEP for i in range(51)]
    forecast = LossForecast.fit(fractions, [falling(f) for f in fractions], 0.25)
    held = forecast.at(0.25 + LOSS_HORIZON)
    values = stalled(forecast, 0.5, 0.9, held * 1.1, low=held * 1.1)
    assert values is None  # held: 10% above the forecast is within STALL_GAP, however far the line would go on
    values = stalled(forecast, 0.5, 0.9, held * 1.5, low=held * 1.5)
    assert values["forecast_loss"] == pytest.approx(held)


def _steep(f):
    return 2.3 * (max(f, 0.15) / 0.15) ** -2.0


def _dip_then_falling(f, window=0.15):
    # The phase's first reports, means of its first few steps, lag less than BSP's full-window means before the
    # switch: they dip below the loss at the switch, and while the windows fill their growing lag hides the fall
    # (the ResNet's local SGD: 0.48 to 0.47 over 0.1 of its workload, as BSP's own fell 0.60 to 0.47); once full,
    # they fall as BSP's did.
    at_switch = _steep(0.25)
    return 0.6 * at_switch * math.exp(-1.5 * max(0.0, f - 0.25 - window))


def test_a_low_set_while_the_phases_windows_fill_is_not_held_against_it():
    _, verdict = _run(_steep, _dip_then_falling, until=0.8)
    assert verdict is not None and verdict.reason == "loss stalled"  # judged from the first reports, it looked held
    assert verdict.fraction < 0.25 + 0.15
    _, verdict = _run(_steep, _dip_then_falling, until=0.8, window=0.15)
    assert verdict is None


def test_a_phase_that_holds_once_its_windows_filled_is_still_a_verdict():
    at_switch = _steep(0.25)
    _, verdict = _run(_steep, lambda f: 0.6 * at_switch if f < 0.4 else 0.55 * at_switch, until=0.8, window=0.15)
    assert verdict is not None and verdict.reason == "loss stalled"
    assert verdict.fraction >= 0.4 + STALL_SPAN
    assert verdict.values["stalled_at"] == pytest.approx(0.55 * at_switch, rel=0.01)


def test_a_rising_loss_is_left_to_the_loss_rule():
    stuck = falling(0.25)
    _, verdict = _run(falling, lambda f: stuck * 1.4)
    assert verdict is None


# -- the accuracy side: BSP's evaluations before the switch, carried on, as a band with earlier runs ----------------

def _rise(f):
    return 0.1 + 1.6 * f  # BSP's accuracy still rising steeply at the switch (0.5 at 0.25)


def _switched(accuracy_after, settings=None, before=(0.1, 0.15, 0.2, 0.25), switch_at=0.25):
    guard = DegradationGuard(settings or GuardSettings(accuracy_forecast=True))
    guard.on_phase("bsp", True, 0.0)
    for f in before:
        assert guard.on_evaluation(f, _rise(f)) is None
    guard.on_phase("asp", False, switch_at)
    verdicts = [guard.on_evaluation(f, accuracy_after(f)) for f in (0.3, 0.35, 0.4, 0.45)]
    return guard, next((v for v in verdicts if v is not None), None)


def test_the_accuracy_fit_reads_the_rise_and_carries_it_on_for_its_horizon():
    points = [(f, _rise(f)) for f in (0.1, 0.15, 0.2, 0.25)]
    forecast = AccuracyForecast.fit(points, 0.25)
    assert forecast.slope == pytest.approx(1.6) and forecast.level == pytest.approx(0.5)
    assert forecast.noise == MIN_NOISE  # on the line: the scatter is the floor's
    assert forecast.at(0.3) == pytest.approx(0.58)
    assert forecast.at(0.9) == pytest.approx(forecast.at(0.25 + ACCURACY_HORIZON)) == pytest.approx(0.66)  # held
    assert forecast.low(0.3) < forecast.at(0.3) - 2 * MIN_NOISE  # the band widens away from the fitted points
    assert AccuracyForecast.fit(points[:2], 0.25) is None  # too few evaluations
    falling_trend = AccuracyForecast.fit([(f, 1 - f) for f in (0.1, 0.15, 0.2, 0.25)], 0.25)
    assert falling_trend.at(0.35) == pytest.approx(0.75)  # a falling trend forecasts its level, no lower


def test_a_phase_that_stops_rising_is_held_to_where_bsp_was_heading():
    # 0.48-0.5: never below the best before the switch (0.5) by 5 points, so the best alone sees nothing.
    guard, verdict = _switched(lambda f: 0.48)
    assert verdict is not None and verdict.reason == "accuracy" and verdict.onset == 0.3
    assert verdict.values["forecast_accuracy"] == pytest.approx(guard.accuracy_forecast().at(0.35))
    assert verdict.values["floor"] > verdict.values["best_accuracy"] - 0.05


def test_the_accuracy_forecast_is_off_by_default():
    _, verdict = _switched(lambda f: 0.48, settings=GuardSettings())
    assert verdict is None


def test_a_phase_that_keeps_rising_with_bsp_is_not_flagged():
    _, verdict = _switched(lambda f: _rise(f) - 0.02)
    assert verdict is None


def test_evaluations_from_before_the_switch_that_arrive_after_it_count():
    # The evaluator scores the checkpoint at the switch after the switch: the forecast is fitted when asked.
    guard = DegradationGuard(GuardSettings(accuracy_forecast=True))
    guard.on_phase("bsp", True, 0.0)
    for f in (0.1, 0.15, 0.2):
        guard.on_evaluation(f, _rise(f))
    guard.on_phase("asp", False, 0.25)
    guard.on_evaluation(0.25, _rise(0.25))
    assert guard.accuracy_forecast().level == pytest.approx(0.5)


def test_the_band_with_earlier_runs_takes_its_lower_edge_within_the_horizon_and_the_runs_past_it():
    forecast = AccuracyForecast.fit([(f, _rise(f)) for f in (0.1, 0.15, 0.2, 0.25)], 0.25)
    assert expected_accuracy(forecast, 0.9, 0.3) == pytest.approx(forecast.low(0.3))  # forecast lower: it is the bar
    assert expected_accuracy(forecast, 0.52, 0.3) == 0.52                              # runs lower: they are
    assert expected_accuracy(forecast, 0.9, 0.6) == 0.9      # past the horizon: measured runs, not a held guess
    assert expected_accuracy(forecast, None, 0.6) == pytest.approx(forecast.low(0.6))
    assert expected_accuracy(None, 0.7, 0.6) == 0.7 and expected_accuracy(None, None, 0.6) is None
    assert expected_accuracy(forecast, None, 0.2) is None    # before the switch: nothing forecast


def test_the_spec_turns_it_on_and_names_a_bad_value():
    assert GuardSettings.from_spec(guard_section({"accuracy_forecast": True})).accuracy_forecast is True
    assert GuardSettings.from_spec(guard_section({})).accuracy_forecast is False
    with pytest.raises(SpecError, match="policy.guard.accuracy_forecast"):
        guard_section({"accuracy_forecast": "yes"})


def test_a_loss_still_falling_back_to_its_low_is_not_held():
    # A phase back within STALL_RISE of a low it set earlier (a dip it climbed out of) and falling more than
    # STALL_FALL over the span is not stalled, though it has set no new low; holding still there, it is.
    at_switch = _steep(0.25)
    low = 0.6 * at_switch
    forecast = LossForecast(0.25, at_switch, -2.0)
    assert stalled(forecast, 0.28, 0.4, 1.1 * low, low, span_ago=1.2 * low) is None
    assert stalled(forecast, 0.28, 0.4, 1.1 * low, low, span_ago=1.12 * low) is not None
    assert stalled(forecast, 0.28, 0.4, 1.1 * low, low) is not None  # no report a span ago: judged as before


def test_scatter_reads_noise_about_a_bending_trend_not_the_bend():
    from syncswitch.policies.forecast import scatter
    bend = [(i * 0.02, 0.9 - 0.8 * math.exp(-i / 3)) for i in range(1, 14)]   # a steep rise flattening
    assert scatter(bend, 0.26) < 0.01
    rng = random.Random(0)
    noisy = [(f, a + rng.gauss(0, 0.05)) for f, a in bend]
    assert 0.03 < scatter(noisy, 0.26) < 0.08
    assert scatter(bend[:3], 0.06) is None   # too few evaluations in the window to tell
