"""The guard's BSP forecast on deterministic streams: a phase whose loss stalls while BSP's was falling is a verdict."""

import math

from syncswitch.policies.forecast import LossForecast
from syncswitch.policies.guard import DegradationGuard, GuardSettings

STEP = 0.005


def _run(before, after, switch_at=0.25, until=0.6, settings=None):
    """Feed BSP's losses up to `switch_at`, then the asynchronous phase's; the first verdict (or None)."""
    guard = DegradationGuard(settings or GuardSettings())
    guard.on_phase("bsp", True, 0.0)
    f = 0.0
    while f <= switch_at + 1e-9:
        assert guard.on_loss(f, before(f)) is None
        f += STEP
    guard.on_phase("asp", False, switch_at)
    while f <= until:
        verdict = guard.on_loss(f, after(f))
        if verdict is not None:
            return guard, verdict
        f += STEP
    return guard, None


def falling(f):
    return 2.3 * math.exp(-4.0 * f)  # still falling fast at the switch


def test_the_fit_reads_the_trend_before_the_switch():
    fractions = [i * STEP for i in range(51)]
    forecast = LossForecast.fit(fractions, [falling(f) for f in fractions], 0.25)
    assert abs(forecast.slope + 4.0) < 1e-6 and forecast.falling
    assert abs(forecast.at(0.35) - falling(0.25) * math.exp(-0.4)) < 0.05


def test_a_stalled_phase_is_a_verdict_while_bsp_was_falling():
    stuck = falling(0.25)
    guard, verdict = _run(falling, lambda f: stuck * 1.01)
    assert verdict is not None and verdict.reason == "loss stalled" and verdict.onset == 0.25
    assert 0.25 + 0.1 <= verdict.fraction <= 0.25 + 0.1 + 0.03
    assert verdict.values["forecast_loss"] < verdict.values["smoothed_loss"] * 0.75
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


def test_a_rising_loss_is_left_to_the_loss_rule():
    stuck = falling(0.25)
    _, verdict = _run(falling, lambda f: stuck * 1.4)
    assert verdict is None
