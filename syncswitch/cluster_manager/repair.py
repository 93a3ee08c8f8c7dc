"""The guard's repairs of a degraded phase: roll every node back to a healthy checkpoint, or fall back from here."""

from __future__ import annotations

import time

from syncswitch.cluster_manager import events as ev
from syncswitch.cluster_manager.lifecycle import JobState
from syncswitch.cluster_manager.nodes import Nodes
from syncswitch.cluster_manager.plan import SwitchMode
from syncswitch.cluster_manager.restart import Restart
from syncswitch.cluster_manager.stragglers import StragglerController
from syncswitch.policies.speed import SLOWER
from syncswitch.wire import agent_pb2 as pb

EVAL_WAIT_S = 15.0  # how long a rollback waits for the evaluation of a later candidate checkpoint


class Repairs:
    """Pauses the phase the guard condemned (`abandon`) and repairs it once every worker has paused (`repair`)."""

    def __init__(self, restart: Restart, nodes: Nodes, stragglers: StragglerController):
        self.restart = restart
        self.ctx = restart.ctx
        self.guard = restart.guard
        self.journal = restart.journal
        self.nodes = nodes
        self.stragglers = stragglers

    def abandon(self, verdict, received: float) -> None:
        """The guard gave up on a phase: once it runs, every worker pauses at the progress reached so far."""
        ctx = self.ctx
        if self.guard.decided_at is None:
            self.guard.decided_at = received
            self.journal.save()  # a resume must not adopt what is saved past the onset
            ctx.bar.message(f"guard: {verdict.reason} degraded at {verdict.fraction * 100:.1f}% ("
                            f"{', '.join(f'{key} {value:.4g}' for key, value in verdict.values.items())}); "
                            "pausing to repair")
        if ctx.lifecycle.state is not JobState.RUNNING:
            return  # switching or finishing: acted on once the phase runs, or by the finish
        fraction = max(ctx.reached(), verdict.fraction)
        self.nodes.broadcast(set_boundary=pb.SetBoundary(phase=ctx.lifecycle.phase, until=fraction))

    def repair(self, k: int) -> None:
        """Continue the rest of the workload on the fallback ladder's next rung, from where the guard says."""
        # Without a healthy checkpoint (a verdict that could fall back, whose phase then ran to the end before it
        # paused) the fall-back still runs: a phase with no workload left, which ends the run as the verdict found it.
        if self.guard.rolls_back(reached=self.ctx.phase_run(k - 1).end_fraction):
            # A rollback goes to a checkpoint at or before the onset: the evaluator's time goes to those next.
            self.restart.evaluations.cancel_after(self.guard.verdict.onset)
            if self.guard.verdict.reason != SLOWER:  # a trial's start is sound unscored: nothing to score before BSP
                self.restart.evaluations.release("repair")  # training is paused: the candidates' scores can be had now
            self._rollback(k)
        else:
            self._fall_back_here(k)

    def _fall_back_here(self, k: int) -> None:
        """Switch to the next rung from the current weights: nothing is thrown away, the rung's protocol repairs the
        lag (a switch like any other: in place, or by relaunch from a checkpoint of these weights)."""
        ctx, guard = self.ctx, self.guard
        verdict = guard.verdict
        reached = ctx.phase_run(k - 1).end_fraction
        protocol = guard.plan_fall_back()
        ctx.plan.fall_back(k, protocol, at=reached)
        self.journal.save()
        self.restart.phases.switch(k, reason="guard")
        resumed = ctx.phase_run(k).last_start_time
        entry = guard.log_repair(verdict, f"fall back at {reached * 100:.1f}%, continue with {protocol}",
                                 checkpoint=None, checkpoint_fraction=None, continued_at=reached, samples_lost=0,
                                 overhead_s=resumed - guard.decided_at, mode=ctx.plan.mode)
        ctx.note("guard", time.time(), **entry)
        ctx.scalar("guard/fall_backs", float(guard.rollbacks), verdict.fraction, resumed)

    def _wait_for_candidates(self, verdict) -> None:
        """An asynchronous checkpoint before the onset whose evaluation is still on its way would be a later,
        cheaper target: the evaluator is seconds behind, the workload since the last proven one is more."""
        if not self.guard.unproven(verdict):
            return
        try:
            self.ctx.feed.wait_until(lambda: not self.guard.unproven(verdict),
                                     "the evaluation of the rollback's candidate checkpoints", timeout_s=EVAL_WAIT_S)
        except ev.WaitTimeout:
            pass  # no answer in time: roll back to the last proven checkpoint

    def _rollback(self, k: int) -> None:
        """Restore every node from the last good checkpoint and run the rest of the workload on the next rung."""
        ctx, guard = self.ctx, self.guard
        verdict = guard.verdict
        self._wait_for_candidates(verdict)
        checkpoint, protocol = guard.plan_rollback(verdict)
        ctx.lifecycle.to(JobState.ROLLING_BACK, k)
        abandoned = ctx.phase_run(k - 1)
        diverged_at = ctx.plan[k - 1].config.learning_rate if verdict.reason == "diverged" else None
        config = ctx.plan.fall_back(k, protocol, diverged=diverged_at is not None)
        rate = _rate_note(config.learning_rate, ctx.plan.config_for(protocol).learning_rate, diverged_at)
        self.restart.new_branch(f"model-r{guard.rollbacks}.ckpt", forget_after=checkpoint.fraction)
        ctx.bar.rolled_back()
        if ctx.plan.mode is SwitchMode.IN_PLACE:
            self.nodes.send(0, restore=pb.Restore(path=checkpoint.path, checkpoint_name=ctx.checkpoint_name))
            ctx.feed.wait_until(lambda: abandoned.restored is not None, "the rollback's restore", timeout_s=120)
        else:
            self.restart.launcher.relaunch(k, restore_from=checkpoint.path)
        self.restart.started(k, checkpoint.fraction)
        resumed = ctx.phase_run(k).last_start_time
        lost = abandoned.end_fraction - checkpoint.fraction
        action = f"rollback to {checkpoint.fraction * 100:.1f}%, continue with {protocol}{rate}"
        entry = guard.log_repair(verdict, action,
                                 checkpoint=checkpoint.path, checkpoint_fraction=checkpoint.fraction,
                                 samples_lost=round(lost * (ctx.record.total_samples or 0)),
                                 overhead_s=resumed - guard.decided_at, mode=ctx.plan.mode)
        ctx.record.phase_log[-1].rolled_back_to = checkpoint.fraction
        ctx.note("guard", time.time(), **entry)
        ctx.scalar("guard/rollbacks", float(guard.rollbacks), verdict.fraction, resumed)
        self.stragglers.phase_changed(bsp_share_done=not ctx.plan.owes_bsp(k))


def _rate_note(rate: float, own: float, diverged_at: float | None) -> str:
    """What a rollback's action says of its rung's rate where it is not the protocol's `own` (a synchronous phase
    diverged at `diverged_at`): backed off, or, with nothing left to take back, the rate that diverged."""
    if diverged_at is None or rate == own:
        return ""
    return f" at rate {rate:.4g}, " + (f"backed off from {diverged_at:.4g}" if rate < diverged_at
                                       else "the rate that diverged")
