"""When a scheduled switch out of BSP may happen: rules that read the run and defer the switch past BSP's early regime.

A schedule's boundary from BSP into an asynchronous protocol is the earliest point of the switch. Early training
is where staleness does its harm (a model on its initial plateau, or still falling fast, handed to asynchronous
updates at BSP-tuned hyperparameters collapsed or never recovered), so a rule waits until the training loss says
that regime is over, and keeps the run synchronous past its latest point. Rules are pure: every value comes with
its fraction of the workload, nothing reads a clock, and the same stream gives the same decision.
"""

from __future__ import annotations

import abc
import bisect
import dataclasses
import math
import statistics

from syncswitch.policies.base import settings_from_spec

SWITCH, STAY = "switch", "stay"  # a rule's decisions; None: wait


@dataclasses.dataclass(frozen=True)
class TimingDecision:
    """What a rule decided at `fraction`, why, and the values it decided on."""

    action: str        # SWITCH | STAY
    fraction: float
    reason: str
    values: dict


@dataclasses.dataclass(frozen=True)
class TimingSettings:
    """Thresholds of a switch rule (`policy.switch_rule` in a job spec); fractions are of the workload.

    - min_drop=0.3: the smoothed training loss must have fallen by this share of its initial value. A run still on
      its initial plateau (loss near ln(classes)) has dropped by nothing, however flat its loss is. Replayed over
      the stored BSP streams (bench/switch_replay.py): at a quarter of the workload the quickstart and the
      synthetic ResNet, which switched safely there, had dropped by 34-51%; the digits CNN, whose switch at 0.25
      into ASP ended at 0.30, by 12% (still on its plateau). 0.5 deferred the quickstart to 0.32-0.54.
    - max_rate=0.25: the last `window` of the workload may hold at most this share of the loss's whole fall so far.
      Right after a plateau the loss falls most of its way within a few percent of the workload (70-95% of the
      fall in one window); a switch into that steep descent hands asynchronous updates a model whose gradients
      are still large and coherent. 0.25 let the quickstart and the ResNet switch at 0.25-0.30 in the replay.
    - window=0.05: the stretch the recent fall is measured over; about one evaluation interval.
    - initial=0.02: the initial loss is the median of the reports in the first this-much of the workload.
    - smoothing=0.02: the current loss is the median of the reports over this trailing stretch.
    - latest=0.6: past this point the run stays synchronous: what is left of the workload is too short for the
      switch to buy back the accuracy risk (the time saved shrinks with the share left).
    """

    min_drop: float = 0.3
    max_rate: float = 0.25
    window: float = 0.05
    initial: float = 0.02
    smoothing: float = 0.02
    latest: float = 0.6

    @classmethod
    def from_spec(cls, spec) -> TimingSettings:
        """The settings of a spec's `policy.switch_rule` (a SwitchRuleSpec), defaults where it gives none."""
        return settings_from_spec(cls, spec)


class SwitchTimingPolicy(abc.ABC):
    """Decides, from the run's reports, whether a scheduled switch out of BSP happens now, later or never."""

    name: str = ""

    def __init__(self, settings: TimingSettings = TimingSettings()):
        self.settings = settings

    def on_loss(self, fraction: float, loss: float) -> None:
        """A worker reported its recent training loss at `fraction`."""

    @abc.abstractmethod
    def decide(self, fraction: float, earliest: float) -> TimingDecision | None:
        """At `fraction` (at or past the `earliest` point): SWITCH now, STAY synchronous, or None to wait."""

    def observed(self, fraction: float) -> dict:
        """What the rule sees at `fraction` (recorded with its decisions); empty by default."""
        return {}

    def waiting_reason(self, fraction: float) -> str:
        """Why the rule waits at `fraction` (the progress line's "switch deferred: ...")."""
        return "waiting"


class FixedTiming(SwitchTimingPolicy):
    """The schedule's boundary as it is: switch at the earliest point, whatever the run shows."""

    name = "fixed"

    def decide(self, fraction: float, earliest: float) -> TimingDecision | None:
        return TimingDecision(SWITCH, fraction, "the schedule's switch point", {})


class LossRegimeTiming(SwitchTimingPolicy):
    """Switch once the training loss has left its early regime: fallen by `min_drop` of its initial value, and its
    fall over the last `window` at most `max_rate` of its fall so far; stay synchronous past `latest`."""

    name = "loss"

    def __init__(self, settings: TimingSettings = TimingSettings()):
        super().__init__(settings)
        self._fractions: list[float] = []
        self._losses: list[float] = []

    def on_loss(self, fraction: float, loss: float) -> None:
        if not math.isfinite(loss):
            return  # the guard handles divergence; a rule reads only finite losses
        at = bisect.bisect_right(self._fractions, fraction)  # workers report slightly out of order
        self._fractions.insert(at, fraction)
        self._losses.insert(at, loss)

    def _median(self, lo: float, hi: float) -> float | None:
        """Median of the reports in [lo, hi]; with none there, the last report before `hi` (reports come every
        half second or so: on a short job that is several percent of the workload apart)."""
        return self._median_at(lo, hi)[0]

    def _median_at(self, lo: float, hi: float) -> tuple[float | None, float | None]:
        """`_median` and where it stands: `hi` for a median of reports in the stretch, else the fallback report's
        own fraction (the measured fall then spans more than the stretch)."""
        end = bisect.bisect_right(self._fractions, hi)
        window = self._losses[bisect.bisect_left(self._fractions, lo):end]
        if window:
            return statistics.median(window), hi
        return (self._losses[end - 1], self._fractions[end - 1]) if end else (None, None)

    def initial_loss(self) -> float | None:
        if not self._fractions:
            return None
        first = self._fractions[0]
        return self._median(first, first + self.settings.initial)

    def observed(self, fraction: float) -> dict:
        s = self.settings
        initial, now = self.initial_loss(), self._median(fraction - s.smoothing, fraction)
        # A window ago: None until the reports reach back that far (the first is the initial loss's).
        ago = fraction - s.window
        before, before_at = (self._median_at(ago - s.smoothing, ago) if self._fractions and self._fractions[0] <= ago
                             else (None, None))
        out = {"initial_loss": initial, "loss": now, "loss_window_ago": before}
        if initial is None or now is None or initial <= 0:
            return out
        out["drop"] = (initial - now) / initial
        if before is not None and initial > now:
            # Sparse reports (a short job): the fall since the last report before the window spans more than a
            # window; scaled to one window's worth. A loss falls fastest first, so this over-states the recent fall
            # (defers, never switches early); unscaled, a 3-second job never saw a window settle before `latest`.
            span = fraction - before_at if before_at < ago else s.window
            out["recent_share"] = max(0.0, before - now) / (initial - now) * s.window / span
            out["recent_span"] = span
        return out

    def waiting_reason(self, fraction: float) -> str:
        seen = self.observed(fraction)
        if seen.get("drop") is None:
            return "no training loss reported yet"
        if seen["drop"] < self.settings.min_drop:
            return (f"loss still near its initial value ({seen['loss']:.3g}, {seen['drop'] * 100:.0f}% below "
                    f"{seen['initial_loss']:.3g}; needs {self.settings.min_drop * 100:.0f}%)")
        return (f"loss still falling fast ({seen.get('recent_share', 1.0) * 100:.0f}% of its fall in the last "
                f"{self.settings.window * 100:g}% of the workload; needs at most {self.settings.max_rate * 100:.0f}%)")

    def decide(self, fraction: float, earliest: float) -> TimingDecision | None:
        s = self.settings
        seen = self.observed(fraction)
        # A window's worth of history is needed to judge the recent fall; the first reports may come late.
        settled = (seen.get("drop") is not None and seen["drop"] >= s.min_drop
                   and seen.get("recent_share") is not None and seen["recent_share"] <= s.max_rate)
        latest = max(s.latest, earliest)
        if fraction >= latest:  # checked first: on a short job the first report past it may come well past it
            if settled and fraction < latest + s.smoothing:
                return TimingDecision(SWITCH, fraction, "loss left its early regime", seen)
            why = ("the loss left its early regime only at this report" if settled
                   else self.waiting_reason(fraction))
            return TimingDecision(STAY, fraction, f"past the latest switch point {s.latest:g}: {why}", seen)
        if settled:
            return TimingDecision(SWITCH, fraction, "loss left its early regime", seen)
        return None
