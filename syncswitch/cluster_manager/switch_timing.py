"""The switch rule at run time: a scheduled switch out of BSP becomes the earliest point, and the rule moves it.

When a BSP phase followed by an asynchronous one starts, BSP's boundary is pushed to the end of that asynchronous
phase and the phase is held aside; the rule reads every loss report from the earliest point on. When it says
switch, BSP's boundary comes back to the progress reached and the held phase runs from there; when it says stay
(past its latest point), the held phase is dropped and the run goes on synchronously. Either way no extra pause
is taken: workers pause only where the switch happens.

Where the rule says switch, the speed rule (`policy.switch_speed`, policies/speed.py) asks whether the switch can
buy time: it keeps the run synchronous where earlier runs measured the target slower than BSP, and otherwise lets
the switch happen; without such a measure the target's first reports are a trial, and a target measured not faster
than BSP is handed to the guard as a `slower` verdict, whose rollback returns the run to BSP from the checkpoint
taken at the trial's start (the target's weights were never judged: its evaluations are held through the trial).
A run resumed (`syncswitch resume`) while its switch was deferred goes on with the plan it had saved: synchronous to
the end of the held phase.
"""

from __future__ import annotations

import dataclasses

from syncswitch.policies import SWITCH_RULES, SWITCH_SPEEDS
from syncswitch.policies.base import Verdict
from syncswitch.policies.speed import (BACK, MEASURE, SLOWER, TRIAL, KnownSpeed, RunCosts, SpeedSettings,
                                      SwitchSpeedPolicy)
from syncswitch.policies.timing import STAY, SWITCH, SwitchTimingPolicy, TimingSettings
from syncswitch.protocols.catalog import synchronous

# How often (in workload) a deferred switch says so again on the progress line.
REPEAT_EVERY = 0.1


def decided_as_it_goes(spec) -> bool:
    """Whether the run's switches out of BSP are decided as it goes (the switch rule, then the speed rule), so a
    scheduled switch target may never run: not under a fixed rule (the schedule as written) or a greedy straggler
    policy (which moves the switch itself)."""
    return spec.stragglers.policy != "greedy" and spec.policy.switch_rule.rule != "fixed"


def judged_switch(phases, k: int) -> bool:
    """Whether phase k is a switch out of BSP that the rules judge: a synchronous phase before it, it not one."""
    return 0 < k < len(phases) and synchronous(phases[k - 1].protocol) and not synchronous(phases[k].protocol)


class SwitchTiming:
    """Moves the plan's BSP -> asynchronous boundaries as the switch rule decides; records what it saw."""

    def __init__(self, rule_spec, say=lambda line: None, enabled: bool = True, speed_spec=None,
                 total_samples=lambda: None, switch_mode: str = "in-place", costs: RunCosts = RunCosts()):
        self.spec = rule_spec
        self.total_samples = total_samples  # the workload's samples, once the nodes said (None before)
        self._say = say
        self.settings = TimingSettings.from_spec(rule_spec)
        self.rule: SwitchTimingPolicy = SWITCH_RULES.get(rule_spec.rule)(self.settings)
        # No speed spec (the simulator, whose speeds are simulated): speeds are not judged.
        self.speed_name = speed_spec.rule if speed_spec is not None else "off"
        self.speed_settings = SpeedSettings.from_spec(speed_spec) if speed_spec is not None else SpeedSettings()
        known = tuple(KnownSpeed(*entry) for entry in getattr(speed_spec, "known", ()))
        self.speed: SwitchSpeedPolicy = SWITCH_SPEEDS.get(self.speed_name)(self.speed_settings, known, switch_mode,
                                                                           costs)
        self.trial: tuple[int, str] | None = None  # (phase, target) of a switch whose target is on trial
        self.measuring_on = False  # the trial's ratio was within the noise of the bar: it measures on (said once)
        self.speed_decisions: list[dict] = []
        # Greedy straggler policies move the switch themselves; a fixed rule leaves the schedule as written.
        self.enabled = enabled and rule_spec.rule != "fixed"
        self.phase: int | None = None      # the BSP phase whose end the rule is deciding
        self.earliest = self.latest = 0.0
        self.held = None                   # the asynchronous phase waiting for the decision
        self.said_at: float | None = None
        self.decisions: list[dict] = []

    def on_phase(self, plan, k: int) -> None:
        """Phase k is about to start: a BSP phase with an asynchronous one after it runs on until the rule decides."""
        phases = plan.phases
        if self.phase is not None:  # another phase started first (a repair, a recovery): that deferral is over
            self.decisions.append({"action": "abandoned", "phase": self.phase, "reason": f"phase {k} started first"})
            self.phase = None
        if self.trial is not None and self.trial[0] != k:  # the trial's phase was cut short before it was judged
            self.speed_decisions.append({"action": "abandoned", "phase": self.trial[0],
                                         "reason": f"phase {k} started first"})
            self.trial, self.measuring_on = None, False
        if self.trial is not None:
            self.speed.start_trial()
        if not self.enabled or not judged_switch(phases, k + 1):
            return
        self.earliest = phases[k].until
        self.phase, self.held = k, plan.hold_after(k)
        self.latest = min(max(self.settings.latest, self.earliest), self.held.until)

    def on_loss(self, plan, running: int | None, fraction: float, loss: float, reached: float) -> float | None:
        """A loss report at `fraction` (`reached`: the furthest any worker got). Returns the progress to end the BSP
        phase at when the rule says switch; None otherwise (the plan is updated either way)."""
        self.rule.on_loss(fraction, loss)
        if self.phase is None or running != self.phase or reached < self.earliest - self.settings.smoothing:
            return None
        decision = self.rule.decide(reached, self.earliest)
        if reached < self.earliest and (decision is None or decision.action != SWITCH):
            return None  # just before the earliest point only a switch there is decided; waiting is said from it on
        if decision is None:
            if self.said_at is None or reached - self.said_at >= REPEAT_EVERY:
                self.said_at = reached
                self._say(f"switch deferred at {reached * 100:.1f}%: {self.rule.waiting_reason(reached)}")
            return None
        k, self.phase = self.phase, None
        entry = {"action": decision.action, "fraction": reached, "reason": decision.reason,
                 "values": {key: v for key, v in decision.values.items() if v is not None}}
        self.decisions.append(entry)
        if decision.action == STAY:
            self._say(f"stayed synchronous at {reached * 100:.1f}%: {decision.reason}")
            return None
        assert decision.action == SWITCH
        speed = self.speed.before_switch(reached, self.held.protocol, self._left(reached))
        self._record_speed(speed)
        if speed.action == STAY:
            entry.update(action=STAY, reason=f"staying synchronous: {speed.reason}")
            self._say(f"staying synchronous at {reached * 100:.1f}%: {speed.reason}")
            return None
        at = max(reached, self.earliest)
        plan.release(k, at, self.held)
        if speed.action == TRIAL:
            self.trial = (k + 1, self.held.protocol)
        if at > self.earliest:
            self._say(f"switching to {self.held.protocol} at {at * 100:.1f}% (earliest "
                      f"{self.earliest * 100:g}%): {decision.reason}")
        return at

    def on_rate(self, worker: int, protocol: str, phase: int, examples_per_s: float, fraction: float) -> Verdict | None:
        """A worker's throughput report. During a BSP phase the rule decides the end of, it is BSP's measure; during a
        trial, the target's. Returns a `slower` verdict (for the guard's rollback) when the trial says go back."""
        if self.phase is not None and phase == self.phase and synchronous(protocol):
            self.speed.on_rate("bsp", worker, examples_per_s)
        if self.trial is None or phase != self.trial[0] or protocol != self.trial[1]:
            return None
        self.speed.on_rate("target", worker, examples_per_s)
        decision = self.speed.after_trial(fraction, protocol, self._left(fraction))
        if decision is None:
            return None
        if decision.action == MEASURE:
            if not self.measuring_on:
                self.measuring_on = True
                self._record_speed(decision)
                self._say(f"trying {protocol} at {fraction * 100:.1f}%: {decision.reason}")
            return None
        self.trial, self.measuring_on = None, False
        self._record_speed(decision)
        if decision.action != BACK:
            self._say(f"keeping {protocol} at {fraction * 100:.1f}%: {decision.reason}")
            return None
        self._say(f"going back to bsp at {fraction * 100:.1f}%: {decision.reason}")
        return Verdict(SLOWER, fraction, fraction, {k: v for k, v in decision.values.items()
                                                    if isinstance(v, float)})

    def on_trial(self, phase: int | None) -> bool:
        """Whether `phase` runs a switch target whose speed is on trial (not yet kept or sent back)."""
        return self.trial is not None and phase is not None and self.trial[0] == phase

    def scores_needed(self, watching: bool, phase: int | None) -> bool:
        """Whether `phase`'s evaluations are wanted as they come: the guard (`watching`) acts on them, and no speed
        trial holds them back (scored beside a trial, they would slow the target it measures)."""
        return watching and not self.on_trial(phase)

    def on_switch(self, pause_s: float) -> None:
        """A switch paused the run for `pause_s`: the speed rule weighs later switches and trials by it."""
        self.speed.on_pause(pause_s)

    def _left(self, fraction: float) -> float | None:
        total = self.total_samples()
        return None if not total else max(0.0, 1.0 - fraction) * total

    def not_acted(self, why: str) -> None:
        """The last `back` decision could not be acted on: the run stays on the target."""
        self.speed_decisions[-1]["not_acted"] = why
        self._say(f"staying on the switch target: {why}")

    def _record_speed(self, decision) -> None:
        self.speed_decisions.append({"action": decision.action, "fraction": decision.fraction,
                                     "reason": decision.reason,
                                     "values": {k: v for k, v in decision.values.items() if v is not None}})

    def speed_summary(self) -> dict:
        """summary.json `switch_speed`: the speed rule, its thresholds, the earlier runs' measures, its decisions."""
        out = {"rule": self.speed_name, **dataclasses.asdict(self.speed_settings),
               "known": [dataclasses.asdict(k) for k in self.speed.known.values()],
               "decisions": list(self.speed_decisions)}
        if self.trial is not None:
            out["decisions"].append({"action": "undecided", "phase": self.trial[0],
                                     "reason": "the trial's phase ended before enough reports"})
        return {"switch_speed": out}

    def summary(self) -> dict:
        """summary.json `switch_rule`: the rule, its thresholds, the window it decided in and what it decided."""
        if not self.enabled and self.spec.rule != "fixed":
            return {"switch_rule": {"rule": self.spec.rule, "active": False}}
        out = {"rule": self.spec.rule, "auto": self.spec.auto, **dataclasses.asdict(self.settings),
               "earliest": self.earliest or None, "decisions": self.decisions}
        if self.phase is not None:  # the run ended (or failed) before the rule decided
            out["decisions"] = self.decisions + [{"action": "undecided", "reason": "the run ended first"}]
        return {"switch_rule": out, **(self.speed_summary() if self.enabled else {})}
