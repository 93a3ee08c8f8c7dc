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
import math
import statistics

from syncswitch.policies.speed_settings import (  # noqa: F401 - the rules' vocabulary, imported from here too
    BACK, KEEP, MEASURE, REPORT_INTERVAL_S, REPORT_WINDOW, SLOWER, STAY, SWITCH, TRIAL, KnownSpeed, RunCosts,
    SpeedDecision, SpeedSettings)


class SwitchSpeedPolicy(abc.ABC):
    """Decides, from measured throughputs, whether a switch out of BSP happens and whether its target stays."""

    name: str = ""

    def __init__(self, settings: SpeedSettings = SpeedSettings(), known: tuple[KnownSpeed, ...] = (),
                 mode: str = "in-place", costs: RunCosts = RunCosts()):
        self.settings = settings
        self.mode = mode  # the run's switch mode: what a switch's pause is assumed to be until one is measured
        self.costs = costs
        self.known = {k.target: k for k in known}
        self._reports: dict[tuple[str, int], list[float]] = {}  # (phase kind, worker) -> examples per second
        self.bsp_at_switch: float | None = None
        self.bsp_scatter: tuple[float, int] = (0.0, 0)  # BSP's measure at the switch: (relative scatter, reports)
        self.left_at_switch: float | None = None  # the workload's samples left when the trial started
        self.pause_s: float | None = None  # the pause of the run's last switch, as measured

    def on_pause(self, seconds: float) -> None:
        """A switch paused every worker for `seconds` (decision to the group's first step in the new phase)."""
        self.pause_s = max(0.0, float(seconds))

    def bsp_step(self, bsp: float | None) -> float | None:
        """BSP's step time in seconds: its global batch over its measured examples/s (None where either is unknown)."""
        if not bsp or not self.costs.global_batch:
            return None
        return self.costs.global_batch / bsp

    def pause(self, bsp: float | None = None) -> tuple[float, str]:
        """(a switch's pause, where it comes from): the run's own last one where it has switched; else the earlier
        runs' (policy store); else by relaunch the assumed one, in place one predicted from the nodes' CPU budget and
        BSP's step time (`bsp`, its measured examples/s; the CPU share alone before BSP is measured)."""
        s, costs = self.settings, self.costs
        if self.pause_s is not None:
            return self.pause_s, "this run"
        if costs.stored_pause_s is not None:  # the pilots switched as this run does (their cache is per mode)
            return costs.stored_pause_s, "earlier runs"
        if self.mode == "relaunch":
            return s.relaunch_pause_s, "assumed"
        step = self.bsp_step(bsp) or 0.0
        return s.pause_cpu_s / min(1.0, costs.cpus_per_node or 1.0) + s.pause_steps * step, "cpu budget and step"

    @staticmethod
    def _time_left(bsp: float, samples_left: float) -> float:
        """The seconds BSP would take over the workload's `samples_left` at its measured `bsp` examples/s."""
        return max(0.0, samples_left) / bsp

    def trial_length(self, bsp: float | None) -> float:
        """A trial's expected length in seconds: its first step, then a report every REPORT_WINDOW steps at BSP's step
        time or every REPORT_INTERVAL_S, whichever comes first, for the mean of `trial_reports` and
        `trial_max_reports` (a trial that goes back decides anywhere between: ResNet's, 4 workers, after 2-8 reports
        in 1.8-5.5 s)."""
        s = self.settings
        step = self.bsp_step(bsp) or 0.0
        every = min(REPORT_WINDOW * step, REPORT_INTERVAL_S) if step else REPORT_INTERVAL_S
        return step + every * (s.trial_reports + s.trial_max_reports) / 2

    def worth_trying(self, bsp: float | None, samples_left: float | None) -> tuple[bool, dict]:
        """(whether a trial can pay for itself, the numbers it came from). A trial that goes back is rolled back to
        where it started: it costs two pauses and its whole length; one that keeps a target at `hoped` times BSP's
        speed wins T (1 - 1/hoped) - pause on the T seconds BSP has left. Worth it only where that gain covers the
        loss. Unknown work left: tried; BSP's speed unknown: weighed in its steps (`_worth_in_steps`)."""
        s = self.settings
        if s.margin is not None or samples_left is None:
            return True, {}
        if not bsp:
            return self._worth_in_steps(samples_left)
        (pause, source), left_s = self.pause(bsp), self._time_left(bsp, samples_left)
        trial = self.trial_length(bsp)
        loss = 2 * pause + trial
        gain = left_s * (1 - 1 / s.hoped) - pause
        return gain >= loss, {**self._cost_values(bsp, pause, source), "bsp_time_left_s": left_s, "trial_s": trial,
                              "failed_trial_s": loss, "hoped": s.hoped, "hoped_gain_s": gain}

    def _worth_in_steps(self, samples_left: float) -> tuple[bool, dict]:
        """`worth_trying` before BSP has filled a report window (its speed unknown), in BSP steps: the trial's
        windows and the pauses' steps against a fifth of the steps left (the pauses' CPU part, unknown in steps, left
        out: in the trial's favour). Such a phase is short, so a trial is worth it only with far more work left
        (more than 550 steps at the defaults). No global batch: tried."""
        s, batch = self.settings, self.costs.global_batch
        if not batch:
            return True, {}
        left = samples_left / batch
        trial = 1 + REPORT_WINDOW * (s.trial_reports + s.trial_max_reports) / 2
        loss = 2 * s.pause_steps + trial
        gain = left * (1 - 1 / s.hoped) - s.pause_steps
        return gain >= loss, {"bsp_steps_left": left, "trial_steps": trial, "failed_trial_steps": loss,
                              "hoped": s.hoped, "hoped_gain_steps": gain}

    def _cost_values(self, bsp: float | None, pause: float, source: str) -> dict:
        return {"pause_s": pause, "pause_source": source, "bsp_step_s": self.bsp_step(bsp),
                "cpus_per_node": self.costs.cpus_per_node}

    def needed(self, bsp: float | None, samples_left: float | None, keeping: bool = False) -> tuple[float, dict]:
        """(the least target/BSP ratio that buys time, the numbers it came from). A fixed margin where one is set.
        Switching costs a pause of c seconds; at r times BSP's speed the T seconds BSP would still take become T/r,
        so r must exceed 1 / (1 - c/T) (no r does when c >= T). Keeping a target already switched to costs nothing
        more, and going back costs a pause: any r above 1 is worth keeping. Neither below `noise` (after a trial,
        `_cheaper_to_keep` weighs what going back throws away)."""
        s = self.settings
        if s.margin is not None:
            return s.margin, {}
        if keeping or not bsp or samples_left is None:
            return s.noise, {}
        pause, source = self.pause(bsp)
        left_s = self._time_left(bsp, samples_left)
        pay_back = float("inf") if pause >= left_s else 1.0 / (1.0 - pause / left_s)
        return max(s.noise, pay_back), {**self._cost_values(bsp, pause, source), "bsp_time_left_s": left_s}

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

    def scatter(self, kind: str, last: int | None = None, skip: int = 0) -> tuple[float, int]:
        """(relative standard deviation of the summed throughput from report to report, reports it is over): each
        worker's i-th report of the same stretch summed over workers (workers step and report alike)."""
        series = [r[skip:] for (k, _), r in self._reports.items() if k == kind]
        n = min((len(r) for r in series), default=0)
        n = min(n, last) if last else n
        if n < 2:
            return 0.0, n
        totals = [sum(r[len(r) - n + i] for r in series) for i in range(n)]
        return statistics.stdev(totals) / statistics.mean(totals), n

    def band(self, reports: int, skip: int = 0) -> float:
        """The relative half-width of the noise band around a trial's target/BSP ratio over `reports` a worker (the
        ones its measure used, after `skip` left out): `sigmas` standard errors of the ratio, the target's per-report
        scatter at least `noise` - 1."""
        s = self.settings
        target, _ = self.scatter("target", skip=skip)
        bsp, bsp_n = self.bsp_scatter
        variance = max(target, s.noise - 1.0) ** 2 / max(reports, 1) + (bsp ** 2 / bsp_n if bsp_n else 0.0)
        return s.sigmas * math.sqrt(variance)

    def _workers(self, kind: str) -> set[int]:
        return {worker for (k, worker), reports in self._reports.items() if k == kind and reports}

    @abc.abstractmethod
    def before_switch(self, fraction: float, target: str, samples_left: float | None = None) -> SpeedDecision:
        """The switch rule said switch at `fraction` (`samples_left` of the workload after it): SWITCH, STAY
        synchronous, or TRIAL (switch, then measure)."""

    def after_trial(self, fraction: float, target: str, samples_left: float | None = None) -> SpeedDecision | None:
        """During a trial: None while the measure is short, MEASURE on while it is within the noise of the bar,
        KEEP the target, or BACK to BSP."""
        return None


class IgnoreSpeed(SwitchSpeedPolicy):
    """Speeds are not judged: the switch happens where the switch rule says."""

    name = "off"

    def before_switch(self, fraction: float, target: str, samples_left: float | None = None) -> SpeedDecision:
        return SpeedDecision(SWITCH, fraction, "speeds not judged (policy.switch_speed off)", {})


class MeasuredSpeed(SwitchSpeedPolicy):
    """Switch only where the target is measured faster than BSP by the margin the switch's cost needs (`needed`):
    from earlier runs of the job where the store has them, else by a trial of the target in this run."""

    name = "measured"

    @staticmethod
    def _values(target: str, bsp: float | None, target_rate: float | None, ratio: float | None, needed: float,
                cost: dict, source: str) -> dict:
        return {"target": target, "bsp_examples_per_s": bsp, "target_examples_per_s": target_rate,
                "ratio": ratio, "margin": None if needed == float("inf") else needed, **cost, "source": source}

    def _needs(self, needed: float, cost: dict) -> str:
        if needed == float("inf"):
            return f"its {cost['pause_s']:.2f} s pause is more than the {cost['bsp_time_left_s']:.2f} s BSP has left"
        if cost and needed > self.settings.noise:
            return (f"a switch needs {needed:.3g}x to win back its {cost['pause_s']:.2f} s pause in the "
                    f"{cost['bsp_time_left_s']:.1f} s BSP has left")
        return f"a switch needs {needed:.3g}x"

    @staticmethod
    def _not_worth(target: str, w: dict) -> str:
        if "trial_steps" in w:
            return (f"not trying {target}: BSP's speed is not measured yet, and a trial that goes back would cost "
                    f"{w['failed_trial_steps']:.0f} steps, more than a {w['hoped']:g}x target would win back "
                    f"({max(0.0, w['hoped_gain_steps']):.0f}) in the {w['bsp_steps_left']:.0f} steps left")
        return (f"not trying {target}: a trial that goes back would cost {w['failed_trial_s']:.1f} s (two "
                f"{w['pause_s']:.2f} s pauses and the {w['trial_s']:.1f} s trial), more than a {w['hoped']:g}x "
                f"target would win back ({max(0.0, w['hoped_gain_s']):.1f} s) in the {w['bsp_time_left_s']:.1f} s BSP "
                "has left")

    def before_switch(self, fraction: float, target: str, samples_left: float | None = None) -> SpeedDecision:
        # BSP's measure is taken here, before the pause: the reports workers send as they pause hold the wait.
        bsp, _ = self.rate("bsp", last=self.settings.bsp_reports, skip=1)
        self.bsp_at_switch = bsp
        self.bsp_scatter = self.scatter("bsp", last=self.settings.bsp_reports, skip=1)
        self.left_at_switch = samples_left
        known = self.known.get(target)
        needed, cost = self.needed(bsp, samples_left)
        if known is None and needed == float("inf"):  # no speed would win the switch back: nothing to try
            return SpeedDecision(STAY, fraction, self._needs(needed, cost),
                                 self._values(target, bsp, None, None, needed, cost, "work left"))
        # A short BSP phase may have filled at most one window a worker: its first, which reads low while the
        # phase warms up (so the time left looks longer and a trial more worth its cost); without it the rule tried
        # whatever the work left (a 4-worker probe job of 66 steps tried local-sgd at step 21, its trial never
        # decided, and the run trained 1.6x BSP's time on the slower target).
        worth, weighed = self.worth_trying(bsp or self.rate("bsp", last=self.settings.bsp_reports)[0], samples_left)
        if known is None and not worth:
            return SpeedDecision(STAY, fraction, self._not_worth(target, weighed),
                                 {**self._values(target, bsp, None, None, needed, cost, "work left"), **weighed})
        if known is None:
            return SpeedDecision(TRIAL, fraction, f"no measure of {target} on this job: switching to measure it",
                                 {**self._values(target, bsp, None, None, needed, cost, "trial"), **weighed})
        expected = None if bsp is None else bsp * known.ratio
        values = self._values(target, bsp, expected, known.ratio, needed, cost, f"earlier runs ({known.runs})")
        said = f"{target} measured {known.ratio:.2f}x BSP's throughput on this job (earlier runs)"
        if known.ratio < needed:
            return SpeedDecision(STAY, fraction, f"{said}; {self._needs(needed, cost)}", values)
        return SpeedDecision(SWITCH, fraction, said, values)

    def _measuring_spent(self, bsp: float, measured: float, best: float, samples_left: float | None) -> dict | None:
        """None while a trial may measure on; else the numbers that end it. A trial that goes back is rolled back:
        it throws away its whole length and pays its two pauses. Once that is more than a target at the top of its
        noise band (`best` times BSP's speed) could still win in the time BSP has left, measuring on can only lose:
        the ratio decides. (ResNet-4's trials measured on to the cap: 20-35% of the workload thrown away.)"""
        if samples_left is None or self.left_at_switch is None or measured <= 0:
            return None
        trial_s = max(0.0, self.left_at_switch - samples_left) / measured
        cost = trial_s + 2 * self.pause(bsp)[0]
        left_s = self._time_left(bsp, samples_left)
        gain = left_s * (1 - 1 / best) if best > 1 else 0.0
        if cost < gain:
            return None
        return {"trial_so_far_s": trial_s, "rollback_cost_s": cost, "best_gain_s": gain, "bsp_time_left_s": left_s}

    def _cheaper_to_keep(self, bsp: float, ratio: float, band: float, samples_left: float | None) -> dict | None:
        """The numbers that keep a target measured at least as fast as BSP (`ratio` >= 1) but not clearly by the bar,
        where going back costs more than keeping could: a trial that goes back is rolled back, so BSP trains its
        samples again (at BSP's speed) after one more pause, while a kept target at the bottom of its noise band
        (`ratio` x (1 - `band`)) loses T (1/low - 1) on the T seconds BSP has left. None otherwise, and with a fixed
        margin (the bar a trial's target must clear, as asked). A residual MLP's trial read 1.35x, then 1.10x after
        0.09 of the workload (its other seeds' local SGD ran 1.25-1.41x): going back, the run took 1.18x its BSP's
        time where keeping would have lost at most 0.7 s of 17."""
        if self.settings.margin is not None or samples_left is None or self.left_at_switch is None or ratio < 1.0:
            return None
        low = ratio * (1 - band)
        left_s = self._time_left(bsp, samples_left)
        worst = left_s * (1 / low - 1) if low > 0 else math.inf
        going_back = max(0.0, self.left_at_switch - samples_left) / bsp + self.pause(bsp)[0]
        if worst >= going_back:
            return None
        return {"going_back_s": going_back, "keeping_worst_s": worst, "low_ratio": low, "bsp_time_left_s": left_s}

    @staticmethod
    def _kept_all_the_same(needed: float, w: dict) -> str:
        return (f"not clearly the {needed:.3g}x a switch needs, but going back would cost {w['going_back_s']:.1f} s "
                f"(the trial's work again at BSP's speed, and a pause), more than keeping it could lose even at "
                f"{w['low_ratio']:.2f}x in the {w['bsp_time_left_s']:.1f} s BSP has left "
                f"({max(0.0, w['keeping_worst_s']):.1f} s)")

    def after_trial(self, fraction: float, target: str, samples_left: float | None = None) -> SpeedDecision | None:
        """A sequential decision: from `trial_reports` a worker on, KEEP or BACK as soon as the bar lies outside the
        ratio's noise band (`band`, over the reports the measure uses: each worker's first is left out once its
        second is in); MEASURE on while the band straddles it, until `trial_max_reports` a worker. A target not clearly
        faster by the bar is kept all the same where going back would cost more than it (`_cheaper_to_keep`)."""
        s = self.settings
        _, reports = self.rate("target")  # reports each worker sent in the trial (the fewest of any worker)
        bsp = self.bsp_at_switch
        if reports < s.trial_reports or bsp is None:
            return None
        if self._workers("target") < self._workers("bsp"):
            return None  # a worker not heard from yet would leave its share out of the target's sum
        # A phase's first window reads low while the phase warms up (the first read lowest in 7 of 8 MNIST-1D
        # trials, up to 0.72x against 1.1-1.3x after): once the second is in, the first is left out of the measure,
        # and the band is as wide as the reports the measure still holds.
        skip = 1 if reports >= 2 else 0
        measured, used = self.rate("target", skip=skip)
        ratio = measured / bsp
        needed, cost = self.needed(bsp, samples_left, keeping=True)
        band = self.band(used, skip=skip)
        values = {**self._values(target, bsp, measured, ratio, needed, cost, "trial"), "reports": reports,
                  "reports_used": used, "band": band}
        said = f"{target} measured {ratio:.2f}x BSP's throughput on this job"
        if ratio * (1 - band) < needed:  # not clearly faster by the bar, but going back has a price of its own
            cheaper = self._cheaper_to_keep(bsp, ratio, band, samples_left)
            if cheaper is not None:
                values.update(cheaper)
                return SpeedDecision(KEEP, fraction, f"{said}, {self._kept_all_the_same(needed, cheaper)}", values)
        if ratio * (1 - band) < needed <= ratio * (1 + band) and reports < s.trial_max_reports:
            spent = self._measuring_spent(bsp, measured, ratio * (1 + band), samples_left)
            if spent is None:
                return SpeedDecision(MEASURE, fraction, f"{said} over {used} of {reports} reports a worker, within "
                                     f"the noise (+-{band * 100:.0f}%) of the {needed:.3g}x a switch needs: measuring "
                                     "on", values)
            values.update(spent)
            said += (f"; measuring on is not worth it: going back would throw away {spent['rollback_cost_s']:.1f} s, "
                     f"more than even {ratio * (1 + band):.2f}x would win in the {spent['bsp_time_left_s']:.1f} s BSP "
                     f"has left ({spent['best_gain_s']:.1f} s)")
        if ratio < needed:
            return SpeedDecision(BACK, fraction, f"{said}; {self._needs(needed, cost)}", values)
        return SpeedDecision(KEEP, fraction, said, values)
