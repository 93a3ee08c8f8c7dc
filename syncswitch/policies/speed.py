"""Whether a switch out of BSP can buy time: rules that compare the switch target's measured throughput with BSP's.

A switch pays only where the target protocol trains faster than BSP on that job. With BSP by all-reduce, an
asynchronous protocol through the parameter servers can be the slower one (a 2-worker GRU: ASP at 0.3-0.4x BSP's
examples per second), and then a switch only loses time and risks accuracy. A rule decides from measured speeds:
BSP's in this run, and the target's from earlier runs of the job (the policy store) where they exist; where no
measure of the target exists the run switches, measures the target over a short trial, and goes back to BSP when
it is not faster by a margin. Rules are pure: every measure comes with its worker and phase, nothing reads a clock.
"""

from __future__ import annotations

import abc
import dataclasses
import statistics

from syncswitch.policies.base import settings_from_spec

SWITCH, STAY, TRIAL, KEEP, BACK = "switch", "stay", "trial", "keep", "back"  # a rule's decisions

SLOWER = "slower"  # the guard's verdict reason for a trial whose target was not faster: a fall-back, not a rollback


@dataclasses.dataclass(frozen=True)
class SpeedSettings:
    """Thresholds of a speed rule (`policy.switch_speed` in a job spec).

    - margin=1.2: the target must train at least this many times BSP's examples per second. An in-place switch
      pauses every worker (about a second on a small local job, 2026-11-25's switch-overhead figure) and a trial
      that goes back pauses twice; a target only a few percent faster does not win that back on what is left of
      the workload, and throughputs measured over a second or two scatter by 10-20% on a loaded machine.
    - trial_reports=3: a trial judges the target after this many metrics reports from each worker in its phase,
      the first one left out (it holds the steps right after the switch: graph entry, the first fetches). Workers
      report about every half second: a trial of about two seconds.
    - bsp_reports=10: BSP's throughput is the median of each worker's last this-many reports (summed over workers).
    """

    margin: float = 1.2
    trial_reports: int = 3
    bsp_reports: int = 10

    @classmethod
    def from_spec(cls, spec) -> SpeedSettings:
        """The settings of a spec's `policy.switch_speed` (a SwitchSpeedSpec), defaults where it gives none."""
        return settings_from_spec(cls, spec)


@dataclasses.dataclass(frozen=True)
class KnownSpeed:
    """The target's speed measured in earlier runs of the job (the policy store): its throughput as a share of
    BSP's, measured side by side in those runs (absolute rates move with the machine's load; their ratio less)."""

    target: str
    ratio: float
    runs: int = 1


@dataclasses.dataclass(frozen=True)
class SpeedDecision:
    """What a rule decided at `fraction`, why, and the numbers it decided on."""

    action: str        # SWITCH | STAY | TRIAL before a switch; KEEP | BACK after a trial
    fraction: float
    reason: str
    values: dict


class SwitchSpeedPolicy(abc.ABC):
    """Decides, from measured throughputs, whether a switch out of BSP happens and whether its target stays."""

    name: str = ""

    def __init__(self, settings: SpeedSettings = SpeedSettings(), known: tuple[KnownSpeed, ...] = ()):
        self.settings = settings
        self.known = {k.target: k for k in known}
        self._reports: dict[tuple[str, int], list[float]] = {}  # (phase kind, worker) -> examples per second
        self.bsp_at_switch: float | None = None

    def on_rate(self, kind: str, worker: int, examples_per_s: float) -> None:
        """A worker's throughput report in a BSP phase (`kind` "bsp") or in the target's trial ("target")."""
        if examples_per_s > 0:
            self._reports.setdefault((kind, worker), []).append(float(examples_per_s))

    def start_trial(self) -> None:
        """The target's phase starts: its reports are counted from here."""
        for key in [k for k in self._reports if k[0] == "target"]:
            del self._reports[key]

    def rate(self, kind: str, last: int | None = None, skip: int = 0) -> tuple[float | None, int]:
        """(summed over workers of each worker's median report, the fewest reports any worker gave): `skip` drops
        each worker's first reports, `last` keeps its last ones."""
        series = [r[skip:] for (k, _), r in self._reports.items() if k == kind]
        series = [r[-last:] if last else r for r in series]
        if not series or not all(series):
            return None, 0
        return sum(statistics.median(r) for r in series), min(len(r) for r in series)

    def _workers(self, kind: str) -> set[int]:
        return {worker for (k, worker), reports in self._reports.items() if k == kind and reports}

    @abc.abstractmethod
    def before_switch(self, fraction: float, target: str) -> SpeedDecision:
        """The switch rule said switch at `fraction`: SWITCH, STAY synchronous, or TRIAL (switch, then measure)."""

    def after_trial(self, fraction: float, target: str) -> SpeedDecision | None:
        """During a trial: None while the measure is short, KEEP the target, or BACK to BSP."""
        return None


class IgnoreSpeed(SwitchSpeedPolicy):
    """Speeds are not judged: the switch happens where the switch rule says."""

    name = "off"

    def before_switch(self, fraction: float, target: str) -> SpeedDecision:
        return SpeedDecision(SWITCH, fraction, "speeds not judged (policy.switch_speed off)", {})


class MeasuredSpeed(SwitchSpeedPolicy):
    """Switch only where the target is measured faster than BSP by `margin`: from earlier runs of the job where
    the store has them, else by a trial of the target in this run."""

    name = "measured"

    def _values(self, target: str, bsp: float | None, target_rate: float | None, ratio: float | None,
                source: str) -> dict:
        return {"target": target, "bsp_examples_per_s": bsp, "target_examples_per_s": target_rate,
                "ratio": ratio, "margin": self.settings.margin, "source": source}

    def before_switch(self, fraction: float, target: str) -> SpeedDecision:
        # BSP's measure is taken here, before the pause: the reports workers send as they pause hold the wait.
        bsp, _ = self.rate("bsp", last=self.settings.bsp_reports, skip=1)
        self.bsp_at_switch = bsp
        known = self.known.get(target)
        if known is None:
            return SpeedDecision(TRIAL, fraction, f"no measure of {target} on this job: switching to measure it",
                                 self._values(target, bsp, None, None, "trial"))
        expected = None if bsp is None else bsp * known.ratio
        values = self._values(target, bsp, expected, known.ratio, f"earlier runs ({known.runs})")
        said = f"{target} measured {known.ratio:.2f}x BSP's throughput on this job (earlier runs)"
        if known.ratio < self.settings.margin:
            return SpeedDecision(STAY, fraction, f"{said}; a switch needs {self.settings.margin:g}x", values)
        return SpeedDecision(SWITCH, fraction, said, values)

    def after_trial(self, fraction: float, target: str) -> SpeedDecision | None:
        s = self.settings
        measured, reports = self.rate("target", skip=1)
        bsp = self.bsp_at_switch
        if measured is None or reports < s.trial_reports or bsp is None:
            return None
        if self._workers("target") < self._workers("bsp"):
            return None  # a worker not heard from yet would leave its share out of the target's sum
        ratio = measured / bsp
        values = self._values(target, bsp, measured, ratio, "trial")
        said = f"{target} measured {ratio:.2f}x BSP's throughput on this job"
        if ratio < s.margin:
            return SpeedDecision(BACK, fraction, f"{said}; a switch needs {s.margin:g}x", values)
        return SpeedDecision(KEEP, fraction, said, values)
