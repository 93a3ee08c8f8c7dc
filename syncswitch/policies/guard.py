"""Accuracy-safe switching: a guard that watches asynchronous phases and says when a run must roll back."""

from __future__ import annotations

import bisect
import dataclasses
import math
import statistics

from syncswitch.policies.base import GuardPolicy, Verdict, settings_from_spec
from syncswitch.policies.speed import SLOWER
from syncswitch.policies.forecast import (STALL_MARGIN, STALL_SPAN, AccuracyForecast, LossForecast, expected_accuracy,
                                          holding, scatter, stalled)
from syncswitch.spec.reference import interpolate

# How far the training loss may rise over an asynchronous phase for its accuracy verdict to be repaired from the
# current weights (GuardSettings.action "auto"). Replayed at the verdicts of 55 guard-off runs (BENCHMARKS.md): the
# quickstart's collapses into ASP had raised it 16-44%; where the evaluations only lagged (the ResNet's local SGD,
# the digits CNN's look-ahead, two quickstart ASP runs on 2 workers) it was 24-71% lower than at the switch.
LOSS_HELD = 0.1
# A loss report this many times the lowest one before it is part of a blow-up: a divergence's rollback goes to a
# checkpoint at or before the last report short of that, not just before the NaN (a Transformer at twice its rate
# reported 1.6, then 8026, then NaN; at four times, 1.6 then NaN: a checkpoint between them was no repair).
BLOWN_UP = 10.0


@dataclasses.dataclass(frozen=True)
class GuardSettings:
    """Thresholds of the degradation guard (`policy.guard` in a job spec); fractions are of the workload.

    Why these defaults (measured on the quickstart, digits, MNIST-1D and ResNet jobs, see BENCHMARKS.md):
    - loss_rule=False: the loss rule is off unless asked for; a non-finite loss is a verdict either way. In
      about 100 guarded and replayed runs it never flagged a degraded run that the accuracy rule did not
      flag as well, and it rolled back healthy switches whose loss rose as a collapsing one's does (the
      synthetic ResNet's by 36-47% before its learning rate decays, MNIST-1D's from 0.25-0.30 to
      0.58-1.15). Turn it on where evaluations are sparse.
    - loss_rise=0.5 over `window`, or half that rise over `long_window` (the loss rule): on the quickstart
      and digits jobs a healthy BSP->ASP switch raised the smoothed training loss by up to about 35% for a
      few percent of the workload (stale gradients at a new learning rate); a collapsing one climbs towards
      the loss of chance (ln 10 = 2.3 for ten classes) and stays there, or stays 30-45% above where it was
      for a tenth of the workload or more.
    - accuracy_drop=0.05: the test accuracy of a healthy run dips by up to 3 points between two
      evaluations on test sets of 1000 examples; five points below the best so far in two of the last
      three evaluations, spanning `window`, is not noise. More where BSP's own evaluations scatter more
      (`accuracy_noise`): the synthetic ResNet's swing 10-40 points under BSP at its high rate.
    - loss_margin=0.1: a rise also has to exceed this much absolute loss (nats of cross-entropy). Near
      convergence the loss is tiny and noisy (the digits CNN's went from 0.029 to 0.049 in a healthy ASP
      phase, +69%): a relative rule alone rolled back healthy runs there; a collapse climbs by far more.
    - window=0.04: degradation must last this long before the guard acts, about one evaluation
      interval; the price of waiting is the asynchronous stretch thrown away at a rollback.
    - smoothing=0.02: the loss is the median of every worker's reports over this trailing stretch.
    - action="auto": what a degradation verdict does. "rollback" restores the last healthy checkpoint and goes on
      with the fallback protocol; "fall-back" switches to the fallback protocol from the current weights and
      throws nothing away; "auto" falls back where the training loss held since the phase began (`LOSS_HELD`),
      else rolls back. A non-finite loss, and a verdict at the end of the workload, always roll back. Measured
      (BENCHMARKS.md): falling back from a collapsed quickstart model ended at 0.10 and 0.41 under BSP (BSP
      alone: 0.74), so a rising loss must roll back; where only the evaluations lagged (the ResNet's local SGD,
      training loss down 60%), a rollback threw 0.2-0.4 of the workload away and cost 1.45x BSP's time for no
      accuracy, and a fall-back cost 0.94-1.07x.
    """

    enabled: bool = True
    loss_rule: bool = False
    loss_rise: float = 0.5
    loss_margin: float = 0.1
    accuracy_drop: float = 0.05
    # The drop is also at least this many times the scatter of BSP's evaluations over the last 0.2 before the
    # switch about their own trend (forecast.scatter; twice it, as the forecast band's PREDICTION_T): a job whose
    # evaluations swing under BSP itself needs a deeper dip before a verdict. Replayed over 86 pretended switches
    # of 8 jobs' BSP runs and 50 switches made with the guard off (bench guard-corpus, results.md): false alarms
    # on BSP 10 -> 2 (all the ResNet's), verdicts on switches that ended within 2 points of BSP 7 -> 5, and every
    # switch that lost more than 3 points caught where accuracy_drop alone caught it (6 of 7, at 0.35-0.36;
    # neither caught a 4.7-point loss). 0: accuracy_drop alone.
    accuracy_noise: float = 2.0
    window: float = 0.04
    long_window: float = 0.1
    smoothing: float = 0.02
    max_rollbacks: int = 2
    action: str = "auto"
    # The reference that does not depend on the run's accuracy so far: BSP's loss trend before the switch
    # (policies/forecast.py). An asynchronous phase whose loss stops falling while BSP's was still falling is
    # degraded ("loss stalled"), even where the best accuracy before the switch was chance.
    forecast: bool = True
    # BSP's accuracy trend before the switch, carried on a little (forecast.AccuracyForecast): an asynchronous phase
    # more than accuracy_drop below the lower edge of its band is degraded. Off: replayed over 20 stored BSP runs
    # with a pretend switch at 0.25, the forecast said BSP would reach more than BSP itself then reached in 6 (the
    # curves bend, the ResNet's evaluations swing), and over 35 stored switches it found no degraded phase the best
    # accuracy before the switch missed (bench/notebook/2026-11-26-switch-timing.md).
    accuracy_forecast: bool = False
    # (fraction, accuracy): what earlier runs of the job had reached where (policy.guard.reference); an
    # asynchronous phase more than accuracy_drop behind it is degraded too, even if it never fell below
    # its own best. With the accuracy forecast on, the lower edge of the band the two span is the bar.
    reference: tuple[tuple[float, float], ...] = ()

    @classmethod
    def from_spec(cls, spec) -> "GuardSettings":
        """The settings of a spec's `policy.guard` (a GuardSpec), defaults where it gives none."""
        return settings_from_spec(cls, spec)


class DegradationGuard(GuardPolicy):
    """Flags an asynchronous phase whose test accuracy (and, with `loss_rule`, smoothed loss) degrades and stays so.

    Watched are the asynchronous phases after a synchronous one (above all the stretch right after a
    switch): their references come from before them, the smoothed loss where the phase began and the
    best test accuracy so far. During the phase the references keep the best value reached (the lowest loss,
    the highest accuracy), so a collapse late in a long asynchronous phase is caught as well. A
    non-finite loss is a verdict at once. Synchronous phases are not watched for degradation: there
    is nothing safer to fall back to (divergence is still reported).
    Deterministic: every value comes with its fraction of the workload; nothing reads a clock.
    """

    name = "degradation"

    def __init__(self, settings: GuardSettings = GuardSettings()):
        self.settings = settings
        self._fractions: list[float] = []      # every loss report so far, in the order received
        self._losses: list[float] = []
        self._scores: list[tuple[float, float]] = []  # every evaluation so far: (fraction, accuracy), by fraction
        self.watching = False
        self._after_synchronous = False  # a synchronous phase ran: an asynchronous one now has a reference
        self.phase_start = 0.0
        self._windows_full = 0.0  # where the running phase's metrics windows have filled (on_phase)
        self.reference_loss: float | None = None
        self._loss_onset: float | None = None       # since when the smoothed loss is above the limit
        self.forecast: LossForecast | None = None   # BSP's loss trend before the watched phase
        self._stall_onset: float | None = None      # since when the phase's loss has held at its low
        self._stall_low: float | None = None        # its lowest smoothed loss since the switch (None: the switch's)
        self._long_onset: float | None = None       # since when it is above the lower, long-window limit

    # -- inputs ---------------------------------------------------------------------------------
    def on_phase(self, protocol: str, synchronous: bool, fraction: float, window: float = 0.0) -> None:
        """`window`: the workload fraction a worker's metrics window spans in this phase (its reported loss is the
        mean of its last steps there, counted from the phase's first): until it has filled, the phase's reports
        lag less than the ones before the switch, which the loss forecast is fitted on."""
        # An asynchronous phase that starts the run has nothing trustworthy to be compared with (early
        # training is noisy, and the user chose that protocol): only divergence is watched there.
        self.watching = not synchronous and self._after_synchronous
        self._after_synchronous |= synchronous
        self.phase_start = fraction
        self._windows_full = fraction + window
        self._loss_onset = self._long_onset = None
        self._forget_after(fraction)  # a rollback restarts training from `fraction`
        self.reference_loss = self.smoothed_loss(fraction)
        self._stall_onset = self._stall_low = None
        self.forecast = LossForecast.fit(self._fractions, self._losses, fraction) \
            if self.watching and self.settings.forecast else None

    def on_loss(self, fraction: float, loss: float) -> Verdict | None:
        if not math.isfinite(loss):
            return self.on_divergence(fraction, loss)
        # Kept even without the loss rule: `loss_rose` reads them when a verdict picks its repair.
        at = bisect.bisect_right(self._fractions, fraction)  # workers report slightly out of order
        self._fractions.insert(at, fraction)
        self._losses.insert(at, loss)
        stall = self._stalled(fraction) if self.watching else None
        if stall is not None:
            return stall
        if not self.watching or not self.settings.loss_rule:
            return None
        smoothed = self.smoothed_loss(fraction)
        if fraction - self.phase_start < self.settings.smoothing:
            return None
        if self.reference_loss is None:  # no report before the phase: its first smoothed value is the reference
            self.reference_loss = smoothed
            return None
        settings, lag = self.settings, self.settings.smoothing  # the median may lag a rise that far
        reference = self.reference_loss
        limit = max(reference * (1.0 + settings.loss_rise), reference + settings.loss_margin)
        long_limit = max(reference * (1.0 + settings.loss_rise / 2), reference + settings.loss_margin / 2)
        if smoothed <= long_limit:
            self.reference_loss = min(self.reference_loss, smoothed)
            self._loss_onset = self._long_onset = None
            return None
        if self._long_onset is None:
            self._long_onset = fraction - lag
        if smoothed <= limit:
            self._loss_onset = None
        elif self._loss_onset is None:
            self._loss_onset = fraction - lag
        for onset, span, bound in ((self._loss_onset, settings.window, limit),
                                   (self._long_onset, settings.long_window, long_limit)):
            if onset is not None and fraction - onset - lag >= span:
                return Verdict("loss", fraction, max(self.phase_start, onset),
                               {"smoothed_loss": smoothed, "reference_loss": self.reference_loss, "limit": bound})
        return None

    def _stalled(self, fraction: float) -> Verdict | None:
        """The forecast's verdict: the phase's loss has held at its low while BSP's forecast was well below it.

        The low is the loss at the switch until the phase's smoothed loss falls more than STALL_MARGIN below it,
        then that lower value: a phase that falls for a while and then stops (the memory GRU's ASP phase fell from
        0.69 to 0.35 and held there to the end, where BSP's went to ~0) stalled as surely as one that never fell."""
        if self.forecast is None or fraction - self._windows_full < self.settings.smoothing:
            # The median still holds reports from before the switch, or the phase's windows still fill: a report
            # of its first few steps has no lag behind the loss, where BSP's before it had half a window's. On the
            # ResNet's local SGD (a window is 0.21 of its workload at 4 workers) the phase's first reports set a
            # low its later full-window means came back to while still falling as BSP's did: 4 of 5 runs fell
            # back for a stall their accuracy never showed.
            return None
        smoothed = self.smoothed_loss(fraction)
        if smoothed is None:
            return None  # no report in the window (sparse reports): nothing new either way
        low = self.forecast.loss_at_start if self._stall_low is None else self._stall_low
        if smoothed < low * (1 - STALL_MARGIN):  # fell further: a stall, if any, is judged from here
            self._stall_low, self._stall_onset = smoothed, max(self.phase_start, fraction - self.settings.smoothing)
            return None
        if not holding(self.forecast, smoothed, low):
            self._stall_onset = None
            return None
        if self._stall_onset is None:
            self._stall_onset = max(self.phase_start, fraction - self.settings.smoothing)
        values = stalled(self.forecast, self._stall_onset, fraction, smoothed, low, self._initial_loss(),
                         self.smoothed_loss(fraction - STALL_SPAN))
        if values is None:
            return None
        self.forecast = None  # one verdict per phase
        return Verdict("loss stalled", fraction, self.phase_start, values)

    def _initial_loss(self) -> float | None:
        """The run's initial training loss: the median of its reports over the first `smoothing` of the workload."""
        if not self._fractions:
            return None
        end = bisect.bisect_right(self._fractions, self._fractions[0] + self.settings.smoothing)
        return statistics.median(self._losses[:end])

    def floor(self, fraction: float, best: float | None) -> float | None:
        """The accuracy below which an evaluation at `fraction` is degraded: `accuracy_drop` below the best
        reached so far (`best`), or below what BSP would have reached there (`expected`) when that is higher; None
        without either."""
        candidates = [v for v in (best, self.expected(fraction)) if v is not None]
        return max(candidates) - self.drop() if candidates else None

    def drop(self) -> float:
        """How far below its bar an evaluation must fall: `accuracy_drop`, or `accuracy_noise` times the scatter of the
        evaluations before the watched phase where that is more (fitted when asked: the evaluator may score the
        checkpoints before a switch after it)."""
        drop = self.settings.accuracy_drop
        if self.settings.accuracy_noise <= 0:
            return drop
        noise = scatter(self._scores, self.phase_start)  # it reads the evaluations up to the phase start alone
        return drop if noise is None else max(drop, self.settings.accuracy_noise * noise)

    def expected(self, fraction: float) -> float | None:
        """What BSP would have reached at `fraction` of the watched phase: the band of the forecast from the
        evaluations before the switch and the earlier runs' reference (forecast.expected_accuracy)."""
        reference = interpolate(self.settings.reference, fraction)
        return expected_accuracy(self.accuracy_forecast(), reference, fraction)

    def accuracy_forecast(self) -> AccuracyForecast | None:
        """BSP's accuracy trend from the evaluations before the watched phase. Fitted when asked, not at the phase
        start: the evaluator scores the checkpoints just before a switch after the switch."""
        if not self.watching or not self.settings.accuracy_forecast:
            return None
        return AccuracyForecast.fit(self._scores, self.phase_start)  # fitted on those up to the phase start alone

    def on_evaluation(self, fraction: float, accuracy: float) -> Verdict | None:
        bisect.insort(self._scores, (fraction, accuracy))
        if not self.watching or fraction <= self.phase_start:
            return None
        # Judged by fraction, not by arrival: the evaluator scores the newest checkpoint first and fills in older
        # ones later, so an evaluation can land between two it arrived after. Each is held against the best
        # reached before it. The latest must be below its floor (a model that has recovered is not rolled back
        # for its past), and two of the last three, the first of them at least `window` back: twice in a row
        # alone missed an ASP phase that oscillated (0.36, 0.41, 0.22, 0.39, 0.34 against a floor of 0.37) and
        # ended 17 points below BSP; one dip between healthy evaluations still does not fire.
        last = [(f, a, self._below(f, a)) for f, a in self._scores if f > self.phase_start][-3:]
        bad = [f for f, _, below in last if below]
        latest, latest_accuracy, latest_below = last[-1]
        sustained = latest_below and len(bad) >= 2 and latest - bad[0] >= self.settings.window
        # The final evaluation is the model the run delivers, and no later one can confirm or refute a dip: below
        # its floor it is a verdict alone (a GRU job's switched run scored 0.88-0.90 up to 95% and 0.72 at the end).
        final = latest_below and latest >= 1.0
        if not (sustained or final):
            return None
        if not sustained:
            bad = [latest]  # the final dip alone: the rollback goes to the last healthy checkpoint before it
        best = self._best_before(latest)
        values = {"accuracy": latest_accuracy, "best_accuracy": best, "floor": self.floor(latest, best)}
        reference = interpolate(self.settings.reference, latest)
        if reference is not None:
            values["reference_accuracy"] = reference
        forecast = self.accuracy_forecast()
        if forecast is not None:
            values["forecast_accuracy"] = forecast.at(latest)
        return Verdict("accuracy", latest, bad[0], values)

    def on_divergence(self, fraction: float, loss: float) -> Verdict:
        return Verdict("diverged", fraction, self._blow_up_onset(fraction), {"loss": loss})

    def _blow_up_onset(self, fraction: float) -> float:
        """Where the loss may have begun to blow up before a non-finite one at `fraction`: the last report before it
        no more than `BLOWN_UP` times the lowest before it (what came after is unknown or blown up); `fraction`
        where there is none."""
        onset, lowest = fraction, math.inf
        for f, loss in zip(self._fractions, self._losses):
            if f >= fraction:
                break
            lowest = min(lowest, loss)
            if loss <= BLOWN_UP * lowest:
                onset = f
        return onset

    def may_fall_back(self, verdict: Verdict) -> bool:
        """Whether `verdict` can be repaired from the current weights (`action`): not after a non-finite loss (no
        weights to go on from), nor at the end of the workload (no training left to repair them)."""
        if verdict.reason == SLOWER:  # nothing degraded: the target was only slower, its weights are sound
            return verdict.fraction < 1.0
        return self.settings.action != "rollback" and verdict.reason != "diverged" and verdict.fraction < 1.0

    def rolls_back(self, verdict: Verdict, workers: int) -> bool:
        """Whether `verdict` is repaired by a rollback rather than from the current weights: always where it cannot
        fall back, never with action "fall-back"; "auto" rolls back where the training loss rose, or where no
        reports tell. Asked once every worker has paused, when each has reported its loss at the pause."""
        if not self.may_fall_back(verdict):
            return True
        if self.settings.action == "fall-back" or verdict.reason == SLOWER:
            return False
        return self.loss_rose(workers) is not False

    def loss_rose(self, reports: int) -> bool | None:
        """Whether the training loss of the watched phase rose more than `LOSS_HELD` above where it stood when the
        phase began: the median of the last `reports` reports (one per worker: each reports its recent loss as it
        pauses) against that of the last `reports` at or before the phase start. None without both."""
        start = bisect.bisect_right(self._fractions, self.phase_start)
        before, now = self._losses[max(0, start - reports):start], self._losses[start:][-reports:]
        if not before or not now:
            return None
        return statistics.median(now) > statistics.median(before) * (1.0 + LOSS_HELD)

    # -- helpers --------------------------------------------------------------------------------
    def smoothed_loss(self, fraction: float) -> float | None:
        """Median of the loss reports in (fraction - smoothing, fraction]; None if there are none."""
        lo = bisect.bisect_right(self._fractions, fraction - self.settings.smoothing)
        hi = bisect.bisect_right(self._fractions, fraction)
        window = self._losses[lo:hi]
        return statistics.median(window) if window else None

    @property
    def best_accuracy(self) -> float | None:
        """The best accuracy evaluated on the running branch."""
        return max((a for _, a in self._scores), default=None)

    def _best_before(self, fraction: float) -> float | None:
        """The best accuracy evaluated before `fraction` (None without any)."""
        return max((a for f, a in self._scores if f < fraction), default=None)

    def _below(self, fraction: float, accuracy: float) -> bool:
        floor = self.floor(fraction, self._best_before(fraction))
        return floor is not None and accuracy < floor

    def _forget_after(self, fraction: float) -> None:
        keep = bisect.bisect_right(self._fractions, fraction)
        del self._fractions[keep:], self._losses[keep:]
        self._scores = [(f, a) for f, a in self._scores if f <= fraction]  # the abandoned branch's evaluations
