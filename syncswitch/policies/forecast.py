"""What BSP would have done after a switch, from the run's own reports before it: the guard's reference when the
run's past is no yardstick (a model switched during its steep early fall has no accuracy worth keeping up with).

The training loss before the switch is fitted as log-linear in the workload fraction over its last stretch; the
fit says how fast BSP's loss was still falling. An asynchronous phase whose smoothed loss stops falling while the
forecast says BSP's would have gone on falling has lost what BSP was gaining: a verdict, whatever the accuracy.
Pure: every value comes with its fraction of the workload.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import statistics

FIT_WINDOW = 0.1      # the stretch before the switch the trend is fitted over
MIN_REPORTS = 4       # fewer reports there: no forecast
FALLING = 0.1         # BSP counts as still falling where its forecast drops this share over STALL_SPAN
STALL_SPAN = 0.1      # how long the phase's loss may stay at or above its switch value
STALL_MARGIN = 0.02   # "stopped falling": not more than this share below the loss at the switch ...
STALL_RISE = 0.1      # ... nor more than this share above it (guard.LOSS_HELD: a loss that held)


@dataclasses.dataclass(frozen=True)
class LossForecast:
    """BSP's loss after `start`: `loss_at_start` * exp(`slope` * (fraction - start)); slope < 0 is falling."""

    start: float
    loss_at_start: float
    slope: float

    def at(self, fraction: float) -> float:
        return self.loss_at_start * math.exp(self.slope * max(0.0, fraction - self.start))

    @property
    def falling(self) -> bool:
        """Whether BSP's loss was still falling fast enough for a stalled phase to have lost anything."""
        return self.at(self.start + STALL_SPAN) <= self.loss_at_start * (1.0 - FALLING)

    @classmethod
    def fit(cls, fractions: list[float], losses: list[float], start: float) -> LossForecast | None:
        """The trend of the reports in (start - FIT_WINDOW, start]; None with too few or non-positive losses."""
        lo, hi = bisect.bisect_right(fractions, start - FIT_WINDOW), bisect.bisect_right(fractions, start)
        xs, ys = fractions[lo:hi], losses[lo:hi]
        if len(xs) < MIN_REPORTS or min(ys) <= 0 or max(xs) - min(xs) <= 0:
            return None
        logs = [math.log(y) for y in ys]
        mx, my = statistics.fmean(xs), statistics.fmean(logs)
        slope = sum((x - mx) * (v - my) for x, v in zip(xs, logs)) / sum((x - mx) ** 2 for x in xs)
        # The fitted line at the switch, not a trailing median: that lags a falling loss by half its window.
        return cls(start, math.exp(my + slope * (start - mx)), slope)


def stalled(forecast: LossForecast | None, onset: float | None, fraction: float, smoothed: float | None) -> dict | None:
    """The verdict's values when the phase's smoothed loss has stayed at its switch value since `onset` for
    STALL_SPAN while BSP's forecast fell; None otherwise."""
    if forecast is None or not forecast.falling or onset is None or smoothed is None:
        return None
    if fraction - onset < STALL_SPAN:
        return None
    return {"smoothed_loss": smoothed, "loss_at_switch": forecast.loss_at_start,
            "forecast_loss": forecast.at(fraction), "forecast_slope": forecast.slope}


def holding(forecast: LossForecast | None, smoothed: float | None) -> bool:
    """Whether the phase's smoothed loss stopped falling and did not rise: within [1 - STALL_MARGIN, 1 + STALL_RISE]
    of its value at the switch. A rise is the loss rule's to judge (off by default: healthy switches raised the
    loss by 36-47% for a while, guard.py), so the forecast never condemns one."""
    if forecast is None or smoothed is None:
        return False
    return forecast.loss_at_start * (1 - STALL_MARGIN) <= smoothed <= forecast.loss_at_start * (1 + STALL_RISE)
