"""What BSP would have done after a switch, from the run's own reports before it: the guard's reference when the
run's past is no yardstick (a model switched during its steep early fall has no accuracy worth keeping up with).

The training loss before the switch is fitted as a power of the workload fraction over its last stretch (a
straight line in log-log, as training curves fall: fast at first, then slower); the fit says how fast BSP's loss
was still falling; it is carried on for a short horizon, then held. An asynchronous
phase whose smoothed loss stops falling (at its switch value, or at a lower one it fell to) while the forecast
lies well below it has lost what BSP was gaining: a verdict, whatever the accuracy.

The evaluations before the switch are fitted as linear in the fraction: where BSP's accuracy was still rising,
the best accuracy so far understates what BSP would have reached a little later, and the forecast carries the
rise on for a short horizon (curves bend: a longer extrapolation would be a guess), then holds it.
Pure: every value comes with its fraction of the workload.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import statistics

FIT_WINDOW = 0.1      # the stretch before the switch the trend is fitted over
MIN_REPORTS = 4       # fewer reports there: no forecast
STALL_SPAN = 0.1      # how long the phase's loss may hold at its low (the switch value, or lower) before a verdict
STALL_MARGIN = 0.02   # "stopped falling": not more than this share below the low ...
STALL_RISE = 0.25     # ... nor more than this share above it (a larger rise is the loss rule's, see `holding`)
STALL_FALL = 0.05     # a loss this share below its value STALL_SPAN ago is still falling: no stall, whatever its low
LOSS_HORIZON = 0.15   # BSP's loss trend is carried on this far past the switch, then held (curves flatten)
STALL_GAP = 0.2       # a stall condemns only where BSP's forecast lies at least this share below the phase's low
STALL_FLOOR = 0.1     # ... and only while that low is above this share of the run's initial loss (see `stalled`)
ACCURACY_FIT_WINDOW = 0.2   # the stretch of evaluations before the switch the accuracy trend is fitted over
MIN_EVALUATIONS = 3         # fewer evaluations there: no accuracy forecast
ACCURACY_HORIZON = 0.1      # the rise before the switch is carried on this far past it, then held
PREDICTION_T = 2.0          # the band's half-width in standard errors of a new evaluation
MIN_NOISE = 0.01            # an evaluation's scatter is at least this (a test set of 1000: about 1.4 points)


@dataclasses.dataclass(frozen=True)
class LossForecast:
    """BSP's loss after `start`: `loss_at_start` * (fraction / start) ** `slope`; slope < 0 is falling.

    A power of the fraction, not an exponential: fitted over the stretch just before an early switch (a searched
    point can be 0.03, and the switch rule then moves it to where the loss left its first steep fall, 0.11-0.15 on
    a tabular MLP), an exponential carries that fall on at its own pace and forecast a loss BSP itself did not reach
    (0.27 at 0.27 of the workload where BSP's own runs were at about 0.55): BSP runs replayed as though switched there
    drew `loss stalled` in 3 of 5, and 4 of 5 recurring runs fell back from a local SGD whose loss was BSP's. The
    power law slows as the fraction grows, as the curves do: none of 48 BSP runs replayed as though switched at
    0.06-0.32 drew it (bench/notebook/2026-11-29-coordinator-24.md). Past an early stretch the two agree closely
    (over the 0.15 horizon after a switch at 0.5, the power carries a fall about 0.87 times the exponential's)."""

    start: float
    loss_at_start: float
    slope: float  # d log(loss) / d log(fraction)

    def at(self, fraction: float) -> float:
        return self.loss_at_start * (max(fraction, self.start) / self.start) ** self.slope

    @classmethod
    def fit(cls, fractions: list[float], losses: list[float], start: float) -> LossForecast | None:
        """The trend of the reports in (start - FIT_WINDOW, start]; None with too few or non-positive losses."""
        lo, hi = bisect.bisect_right(fractions, start - FIT_WINDOW), bisect.bisect_right(fractions, start)
        pairs = [(x, y) for x, y in zip(fractions[lo:hi], losses[lo:hi]) if x > 0]
        if len(pairs) < MIN_REPORTS or start <= 0 or min(y for _, y in pairs) <= 0:
            return None
        xs, logs = [math.log(x) for x, _ in pairs], [math.log(y) for _, y in pairs]
        if max(xs) - min(xs) <= 0:
            return None
        mx, my = statistics.fmean(xs), statistics.fmean(logs)
        slope = sum((x - mx) * (v - my) for x, v in zip(xs, logs)) / sum((x - mx) ** 2 for x in xs)
        # The fitted line at the switch, not a trailing median: that lags a falling loss by half its window.
        return cls(start, math.exp(my + slope * (math.log(start) - mx)), slope)


def stalled(forecast: LossForecast | None, onset: float | None, fraction: float, smoothed: float | None,
            low: float | None = None, initial: float | None = None, span_ago: float | None = None) -> dict | None:
    """The verdict's values when the phase's smoothed loss has held at its low `low` (its value at the switch until
    it falls further) since `onset` for STALL_SPAN, while BSP's forecast, carried on for LOSS_HORIZON and then held,
    lies at least STALL_GAP below that low; None otherwise. Not below STALL_FLOOR of the run's `initial` loss: the
    fitted forecast knows no floor, so after a steep fall it says BSP's loss would go on down past where a
    converged loss stops (a loss that fell from 2.3 to its floor of 0.1 just after the switch, as BSP's would have);
    a loss down to a tenth of where training began has converged as far as this verdict can tell.

    Nor while the loss is still falling: `span_ago`, the smoothed loss STALL_SPAN before, more than STALL_FALL above
    it. The low can be a dip the phase then climbs out of and back down to: a switch's first reports cover a step or
    two, under the lag of the window means before them, and the loss then rises for a while (the ResNet's local SGD
    at 4 workers: a dip to 0.44 at the switch, 0.58 a tenth later, back to 0.46 at 0.62, falling 14% over the span
    as BSP's own run fell 16% there, to the same accuracy; held near that low, it drew a verdict)."""
    if forecast is None or onset is None or smoothed is None:
        return None
    if span_ago is not None and smoothed < span_ago * (1.0 - STALL_FALL):
        return None
    low = forecast.loss_at_start if low is None else low
    if fraction - onset < STALL_SPAN or (initial is not None and low < STALL_FLOOR * initial):
        return None
    expected = forecast.at(min(fraction, forecast.start + LOSS_HORIZON))
    if expected > low * (1.0 - STALL_GAP):
        return None
    return {"smoothed_loss": smoothed, "loss_at_switch": forecast.loss_at_start, "stalled_at": low,
            "forecast_loss": expected, "forecast_slope": forecast.slope}


def holding(forecast: LossForecast | None, smoothed: float | None, low: float | None = None) -> bool:
    """Whether the phase's smoothed loss stopped falling and did not rise: within [1 - STALL_MARGIN, 1 + STALL_RISE]
    of `low` (its lowest since the switch, where the stall is judged; the loss at the switch by default). A rise is
    the loss rule's to judge (off by default: healthy switches raised the loss by 36-47% for a while, guard.py),
    so the forecast never condemns one."""
    if forecast is None or smoothed is None:
        return False
    low = forecast.loss_at_start if low is None else low
    return low * (1 - STALL_MARGIN) <= smoothed <= low * (1 + STALL_RISE)


@dataclasses.dataclass(frozen=True)
class AccuracyForecast:
    """BSP's test accuracy after `start`: `level` rising by `slope` per unit of workload for ACCURACY_HORIZON, then
    held (never falling: a falling trend before the switch forecasts nothing better than its level), at most 1.
    The band's lower edge is the forecast less PREDICTION_T times the standard error of a new evaluation there
    (the scatter `noise` about the line, widened by the fit's own uncertainty, which grows with the distance from
    the evaluations it was fitted on): a line through three or four noisy evaluations is a rough guess, and the
    band says how rough."""

    start: float
    level: float
    slope: float
    noise: float
    n: int          # evaluations fitted
    mean_x: float   # their mean fraction
    sxx: float      # sum of squared deviations of their fractions

    def at(self, fraction: float) -> float:
        return min(1.0, self.level + max(0.0, self.slope) * self._ahead(fraction))

    def low(self, fraction: float) -> float:
        x = self.start + self._ahead(fraction)
        error = self.noise * math.sqrt(1 + 1 / self.n + (x - self.mean_x) ** 2 / self.sxx)
        return self.at(fraction) - PREDICTION_T * error

    def _ahead(self, fraction: float) -> float:
        return min(max(0.0, fraction - self.start), ACCURACY_HORIZON)

    def within(self, fraction: float) -> bool:
        """Whether `fraction` lies in the stretch the rise is extrapolated over."""
        return self.start < fraction <= self.start + ACCURACY_HORIZON

    @classmethod
    def fit(cls, points: list[tuple[float, float]], start: float) -> AccuracyForecast | None:
        """The trend of the (fraction, accuracy) evaluations in (start - ACCURACY_FIT_WINDOW, start]; None with
        fewer than MIN_EVALUATIONS there."""
        chosen = _recent(points, start)
        xs, ys = [f for f, _ in chosen], [a for _, a in chosen]
        if len(xs) < MIN_EVALUATIONS or max(xs) - min(xs) <= 0:
            return None
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
        residuals = [y - (my + slope * (x - mx)) for x, y in zip(xs, ys)]
        noise = max(MIN_NOISE, math.sqrt(sum(r * r for r in residuals) / (len(xs) - 2)))
        return cls(start, my + slope * (start - mx), slope, noise, len(xs), mx, sxx)


def _recent(points: list[tuple[float, float]], start: float) -> list[tuple[float, float]]:
    """The finite (fraction, accuracy) evaluations in (start - ACCURACY_FIT_WINDOW, start], in their given order: what
    the accuracy trend is fitted on and its scatter measured over."""
    return [(f, a) for f, a in points if start - ACCURACY_FIT_WINDOW < f <= start and math.isfinite(a)]


def expected_accuracy(forecast: AccuracyForecast | None, reference: float | None, fraction: float) -> float | None:
    """What BSP would have reached at `fraction`: the lower edge of the band the accuracy forecast and the earlier
    runs' reference span there, so neither one's optimism alone sets the bar. The forecast counts within its
    horizon where a reference exists (past it, measured runs of the job beat a rise held flat) and everywhere
    after the switch without one. None with neither."""
    low = forecast.low(fraction) if forecast is not None and fraction > forecast.start else None
    if low is not None and reference is not None:
        return min(low, reference) if forecast.within(fraction) else reference
    return low if low is not None else reference


def scatter(points: list[tuple[float, float]], start: float) -> float | None:
    """The scatter of the (fraction, accuracy) evaluations in (start - ACCURACY_FIT_WINDOW, start] about their own
    trend, from their second differences: for evaluations a smooth curve plus independent noise of deviation s, the
    difference a[i+1] - 2 a[i] + a[i-1] has deviation s * sqrt(6), where a curve's bend adds little (a line's
    residuals read the bend of a steep early rise as noise). None with fewer than MIN_EVALUATIONS + 1 there."""
    values = [a for _, a in sorted(_recent(points, start))]
    if len(values) < MIN_EVALUATIONS + 1:
        return None
    second = [values[i + 1] - 2 * values[i] + values[i - 1] for i in range(1, len(values) - 1)]
    return math.sqrt(sum(d * d for d in second) / len(second) / 6)
