"""The guard at run time: feeds the guard policy, keeps the run's checkpoints, and picks where a rollback goes."""

from __future__ import annotations

import dataclasses
import math

from syncswitch.cluster_manager.record import EvaluationResult
from syncswitch.policies.base import Verdict
from syncswitch.policies.guard import DegradationGuard, GuardSettings
from syncswitch.policies.speed import SLOWER
from syncswitch.protocols.catalog import synchronous
from syncswitch.runfolder import NO_ACTION, guard_acted


@dataclasses.dataclass
class Checkpoint:
    """A checkpoint of the running branch: where it was taken and, once known, how it scored."""

    path: str
    fraction: float
    samples: int
    accuracy: float | None = None
    # Taken before any asynchronous step of the running branch (in a synchronous phase, or the switch
    # checkpoint at an asynchronous phase's start): sound without an evaluation.
    before_async: bool = True


class GuardRuntime:
    """Per-run guard state: the policy, the checkpoints of the current branch, the fallback ladder, the log.

    It touches nothing in the cluster: `on_loss`, `on_evaluation` and `on_divergence` return a
    Verdict when the running phase must be abandoned; the job pauses every worker and calls
    `plan_rollback`, which names the checkpoint and the protocol to continue with, or `plan_fall_back`
    where `rolls_back` says the run goes on from its current weights.
    """

    def __init__(self, settings: GuardSettings, fallback: tuple[str, ...] = ("bsp",), workers: int = 2):
        self.settings = settings
        self.fallback = tuple(fallback)
        self.workers = workers  # each reports its loss as it pauses: that many reports are the loss at the pause
        self.policy = DegradationGuard(settings)
        self.checkpoints: list[Checkpoint] = []
        self.events: list[dict] = []
        self.rollbacks = 0
        self.verdict: Verdict | None = None      # decided, not yet acted on
        self.chosen: Checkpoint | None = None    # the verdict's target when it was decided
        self.falling_back = False                # the verdict's fall-back switch is under way (until recorded)
        # The accuracy the run had kept up with before its first repaired degradation: a repaired run that ends
        # below it is said loudly (`shortfall`), whichever repair it got.
        self.repair_floor: float | None = None
        self.scores: list[tuple[float, float]] = []  # the branch's evaluations: (fraction, accuracy)
        self.decided_at: float | None = None
        self._phase_start, self._phase_synchronous = 0.0, True

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    @property
    def watching(self) -> bool:
        """Whether the running phase's evaluations may draw a verdict: they are needed as soon as they exist."""
        return self.enabled and self.policy.watching

    def can_roll_back(self, verdict: Verdict | None = None) -> bool:
        """Whether a repair is left: up to `max_rollbacks`, one per rung of the ladder; a synchronous phase that
        diverged may go on repeating the last rung, since each repeat runs at a backed-off rate (plan.fall_back)."""
        if not self.enabled or self.rollbacks >= self.settings.max_rollbacks:
            return False
        repeats = verdict is not None and verdict.reason == "diverged" and self._phase_synchronous
        return repeats or self.rollbacks < len(self.fallback)

    def _rung(self) -> str:
        return self.fallback[min(self.rollbacks, len(self.fallback) - 1)]

    # -- inputs ----------------------------------------------------------------------------------
    def on_phase(self, protocol: str, fraction: float, window: float = 0.0) -> None:
        """`window`: the workload fraction one metrics window of the phase spans (DegradationGuard.on_phase)."""
        self._phase_start, self._phase_synchronous = fraction, synchronous(protocol)
        self.policy.on_phase(protocol, self._phase_synchronous, fraction, window)

    def on_loss(self, fraction: float, loss: float) -> Verdict | None:
        return self._decide(self.policy.on_loss(fraction, loss))

    def on_evaluation(self, path: str, fraction: float, accuracy: float, loss: float) -> Verdict | None:
        for checkpoint in self.checkpoints:
            if checkpoint.path == path:
                checkpoint.accuracy = accuracy if math.isfinite(loss) else float("nan")
        self.scores.append((fraction, accuracy))
        return self._decide(self.policy.on_evaluation(fraction, accuracy))

    def on_divergence(self, fraction: float, loss: float) -> Verdict | None:
        return self._decide(self.policy.on_divergence(fraction, loss) or Verdict("diverged", fraction, fraction,
                                                                               {"loss": loss}))

    def on_slower(self, verdict: Verdict) -> Verdict | None:
        """The speed rule's trial found the switch target slower than BSP: the run goes back to the ladder's next
        rung from where the trial started (None where the guard is off or no rung is left). The verdict's onset is
        the trial phase's start, so the rollback's target is the checkpoint taken there, before the target's first
        step: a slower target leaves no mark on the model. Its evaluations were held through the trial, so nobody
        judged the target's weights; continued from, ASP trials of up to 35% of a 4-worker ResNet run left 6 of the 7
        runs that went back 0.6-4.0 points below the same seed's BSP run (`bench/notebook/`)."""
        return self._decide(dataclasses.replace(verdict, onset=min(verdict.onset, self._phase_start)))

    def on_checkpoint(self, path: str, fraction: float, samples: int) -> None:
        if any(c.path == path for c in self.checkpoints):
            return  # reported again (a resumed run's replay, a relaunched chief): one checkpoint
        before_async = self._phase_synchronous or fraction <= self._phase_start
        self.checkpoints.append(Checkpoint(path, fraction, samples, before_async=before_async))

    def _decide(self, verdict: Verdict | None) -> Verdict | None:
        """The verdict to act on: with the guard on, the first until it is acted on, and only where a
        rollback can go; one that cannot be acted on is recorded once and the phase is no longer watched."""
        if verdict is None or self.verdict is not None or not self.enabled:
            return None
        if self.can_roll_back(verdict) and (self.target(verdict) is not None or self.policy.may_fall_back(verdict)):
            self.verdict, self.chosen = verdict, self.target(verdict)
            return verdict
        why = "no healthy checkpoint before the degradation" if self.can_roll_back(verdict) else \
            f"no rollback left (policy.guard.max_rollbacks={self.settings.max_rollbacks}, policy.fallback=" \
            f"{list(self.fallback)})"
        self.events.append({"fraction": verdict.fraction, "reason": verdict.reason, "onset": verdict.onset,
                            "values": dict(verdict.values), "action": f"{NO_ACTION}: {why}"})
        self.policy.watching = False
        return None

    def replay(self, phases: list[tuple[str, float]], evaluations: list[EvaluationResult], checkpoints: list) -> None:
        """A resumed run: what the dead manager's guard knew. `phases` ran before the resume point ((protocol,
        start fraction) each): an asynchronous phase resumed after a synchronous one is watched again; the
        evaluations give the best accuracy to compare with; `checkpoints` (durable, up to the resume point)
        are the branch's rollback targets, the scored ones with their accuracy. No verdict is drawn here."""
        for protocol, start in phases:
            self.on_phase(protocol, start)
        scored = {e.written: e for e in evaluations}
        for e in sorted(evaluations, key=lambda e: e.fraction):
            self.policy.on_evaluation(e.fraction, e.accuracy)
            self.scores.append((e.fraction, e.accuracy))
        for c in checkpoints:
            if any(known.path == c.path for known in self.checkpoints):
                continue
            e = scored.get(c.path)
            synchronous_phase = c.phase is not None and c.phase < len(phases) and synchronous(phases[c.phase][0])
            self.checkpoints.append(Checkpoint(c.path, c.fraction, c.samples, accuracy=e and e.accuracy,
                                               before_async=c.kind == "switch" or synchronous_phase))

    # -- the rollback ---------------------------------------------------------------------------
    def target(self, verdict: Verdict) -> Checkpoint | None:
        """The latest checkpoint before the degradation began that is sound: evaluated healthy, or (not yet
        evaluated) taken before any asynchronous step of the branch.

        Healthy is measured against the best accuracy reached up to the onset: an evaluation of the condemned
        stretch must not raise the bar (an asynchronous phase whose loss already climbs can still score its
        best accuracy, and that bar would disqualify every checkpoint before it)."""
        before = [accuracy for fraction, accuracy in self.scores if fraction <= verdict.onset
                  and math.isfinite(accuracy)]
        best = max(before) if before else None
        for checkpoint in sorted(self.checkpoints, key=lambda c: c.fraction, reverse=True):
            # At the onset itself is healthy: that is the phase start (an onset is clamped to it), where the
            # switch checkpoint was taken before any step of the condemned phase.
            if checkpoint.fraction > verdict.onset:
                continue
            acc = checkpoint.accuracy
            if acc is None and not checkpoint.before_async:
                continue  # asynchronous training may have damaged it before the loss showed: unproven
            if acc is not None and math.isnan(acc):
                continue
            # Below the floor only condemns what asynchronous training wrote: a checkpoint from before any
            # asynchronous step scores what synchronous training had reached there, lower than later, healthy
            # ASP evaluations (a digits run found no target at all: "no healthy checkpoint").
            floor = self.policy.floor(checkpoint.fraction, best)
            if acc is not None and not checkpoint.before_async and floor is not None and acc < floor:
                continue
            return checkpoint
        return None

    def unproven(self, verdict: Verdict) -> list[Checkpoint]:
        """Checkpoints that could be a later rollback target than today's once their evaluation is in."""
        chosen = self.target(verdict)
        return [c for c in self.checkpoints if c.accuracy is None and not c.before_async
                and chosen is not None and chosen.fraction < c.fraction <= verdict.onset]

    def rolls_back(self, reached: float) -> bool:
        """Whether the verdict being acted on is repaired by a rollback rather than from the current weights (the
        policy's choice, `action`), once every worker has paused at `reached`: there, at the end of the workload,
        no training is left to repair them. False without a checkpoint to roll back to."""
        target = self.target(self.verdict) or self.chosen
        if self.verdict.reason == SLOWER:
            # Back to the trial's start where its checkpoint is there; else (none taken) from the current weights.
            return target is not None
        return target is not None and (reached >= 1.0 or self.policy.rolls_back(self.verdict, self.workers))

    def plan_fall_back(self) -> str:
        """The protocol the rest of the workload runs on when the run falls back from its current weights."""
        protocol = self._rung()
        self.rollbacks += 1
        self.chosen, self.falling_back = None, True
        return protocol

    def plan_rollback(self, verdict: Verdict) -> tuple[Checkpoint, str]:
        """(checkpoint, protocol) to continue from; `_decide` made sure both exist. Evaluations that came in
        since (the job may wait for one) can move the target later, or earlier where they condemn it; where
        they condemn every candidate, the one chosen at the verdict stands: the run must go somewhere."""
        target = self.target(verdict) or self.chosen
        protocol = self._rung()
        self.rollbacks += 1
        self.forget_after(target.fraction)
        self.chosen = None
        return target, protocol

    def forget_after(self, fraction: float) -> None:
        """Training goes on from `fraction`: the abandoned branch's checkpoints and evaluations are not part of
        the run any more."""
        self.checkpoints = [c for c in self.checkpoints if c.fraction <= fraction]
        self.scores = [(f, a) for f, a in self.scores if f <= fraction]

    def log_repair(self, verdict: Verdict, action: str, **details) -> dict:
        """The guard event of a repair carried out (`action` says which); the verdict is settled."""
        entry = {"fraction": verdict.fraction, "reason": verdict.reason, "onset": verdict.onset,
                 "values": dict(verdict.values), "action": action, **details}
        if self.repair_floor is None and guard_acted([entry]):
            before = [a for f, a in self.scores if f < verdict.onset and math.isfinite(a)]
            self.repair_floor = self.policy.floor(verdict.onset, max(before) if before else None)
        self.events.append(entry)
        self.verdict, self.decided_at, self.falling_back = None, None, False
        return entry

    def shortfall(self, fraction: float, accuracy: float) -> dict | None:
        """The event for a repaired run whose final evaluation (`accuracy` at `fraction`) is below the floor of
        the best it had reached before the degradation: the repair did not bring it back, and no rung is left to
        try. None where it did, or where nothing was repaired."""
        if self.repair_floor is None or not accuracy < self.repair_floor:
            return None
        entry = {"fraction": fraction, "reason": "short after repair", "onset": fraction,
                 "values": {"accuracy": accuracy, "floor": self.repair_floor},
                 "action": f"{NO_ACTION}: the run ends below the accuracy it had before the repaired degradation"}
        self.events.append(entry)
        return entry

    def summary(self) -> dict:
        return {"guard": {**dataclasses.asdict(self.settings), "fallback": list(self.fallback)},
                "guard_events": self.events}
