"""The plan's phases as they run: start one, wait for its end, switch to the next, save, and finish the run."""

from __future__ import annotations

import dataclasses
import time

from syncswitch.cluster_manager.launch import phase_config
from syncswitch.cluster_manager.lifecycle import JobState
from syncswitch.cluster_manager.plan import SwitchMode
from syncswitch.errors import ClusterError
from syncswitch.policies.speed_settings import window_fraction
from syncswitch.protocols.catalog import synchronous
from syncswitch.wire import agent_pb2 as pb
from syncswitch.wire import codec

SCORE_WAIT_S = 600.0  # the longest the end of a run waits for the evaluator's next score


class PhaseDriver:
    """Runs phase after phase through the nodes; a relaunch goes through the launcher's one relaunch path."""

    def __init__(self, ctx, nodes, launcher, guard, stragglers, evaluations, timing):
        self.ctx = ctx
        self.nodes = nodes
        self.launcher = launcher
        self.guard = guard
        self.stragglers = stragglers
        self.evaluations = evaluations
        self.timing = timing  # the switch rule: holds a switch out of BSP until it decides
        self.saved: list[pb.Saved] = []  # the checkpoints saved on request (switch, final), as reported

    def on_saved(self, saved: pb.Saved) -> None:
        if saved.reason != pb.SAVE_REASON_PERIODIC:
            self.saved.append(saved)

    def start(self, k: int) -> None:
        """The chief applies phase k's configuration, every worker goes; returns once all have stepped."""
        ctx, nodes = self.ctx, self.nodes
        self.timing.on_phase(ctx.plan, k)  # a switch out of BSP waits for the switch rule
        planned = ctx.plan[k]
        ctx.lifecycle.to(JobState.RUNNING, k)
        ctx.running_phase = k
        run = ctx.phase_run(k)
        params = codec.struct(ctx.plan.params(planned))
        nodes.send(0, enter_phase=pb.EnterPhase(phase=k, config=phase_config(planned.config), params=params))
        ctx.feed.wait_until(lambda: run.entered is not None, f"the chief to enter phase {k}", timeout_s=60)
        self.guard.on_phase(planned.protocol, run.entered.fraction, window_fraction(
            ctx.spec.cluster.workers, planned.config.per_worker_batch, ctx.record.total_samples))
        if self.timing.scores_needed(self.guard.watching, k):
            # The guard compares the phase with the best accuracy reached before it.
            self.evaluations.release("watched phase")
        elif not self.guard.watching:
            # Back to a phase nobody acts on live (a trial went back, the guard fell back): what the evaluator has
            # not scored yet waits again, instead of slowing this phase.
            self.evaluations.hold_again(f"{planned.protocol} phase")
        # On trial, the held checkpoints wait for the speed rule's verdict (handlers): scored now, beside the
        # trial, they would slow the target that BSP's measure, taken with nothing held scored, is compared with.
        nodes.broadcast(go=pb.Go(phase=k, protocol=planned.protocol, until=planned.until, params=params))
        ctx.feed.wait_until(lambda: run.started(nodes.workers), f"phase {k} to start")

    def run(self, k: int) -> None:
        """Wait for every worker to pause at phase k's end; log the phase."""
        ctx = self.ctx
        run = ctx.phase_run(k)
        ctx.feed.wait_until(lambda: run.ended(self.nodes.workers), f"phase {k} to reach its end")
        planned = ctx.plan[k]
        entry = ctx.record.log_phase(planned.protocol, dataclasses.asdict(planned.config), run)
        entry.params = ctx.plan.params(planned)
        # The protocol's own measurements, as the last worker to pause read them (counters on the PS).
        last = max(run.paused.values(), key=lambda rp: rp[0], default=None)
        if last is not None and last[1].HasField("measured"):
            entry.measured = codec.from_struct(last[1].measured)
        if entry.end_fraction >= 1.0:
            ctx.plan.end_at(k)  # a policy's phase reached the end of the workload

    def switch(self, k: int, reason: str = "schedule") -> None:
        """From phase k - 1, which every worker has paused at the end of, to phase k."""
        ctx = self.ctx
        ctx.lifecycle.to(JobState.SWITCHING, k)
        previous, upcoming = ctx.plan[k - 1], ctx.plan[k]
        before = ctx.phase_run(k - 1)
        decision, action = before.first_pause_time, None
        if before.policy_switch is not None:
            decision, action = before.policy_switch  # a straggler policy decided before any worker paused
        mode = ctx.plan.mode
        if mode is SwitchMode.RELAUNCH:
            # The paper's mechanism: durable checkpoint, relaunch every task in parallel, restore.
            self.save("switch")
            self.launcher.relaunch(k)
        elif self.guard.enabled and not synchronous(upcoming.protocol):
            self.save("switch")  # the guard's rollback target at the switch
        self.start(k)
        resumed = ctx.phase_run(k).last_start_time
        ctx.record.switches.append({
            "from": previous.protocol, "to": upcoming.protocol, "at_fraction": before.end_fraction,
            "mode": mode, "overhead_s": resumed - decision,
            "reason": f"{self.stragglers.policy.name} policy" if action else reason})
        self.timing.on_switch(resumed - decision)
        if action is not None:
            action.overhead_s = resumed - decision
        # The group is whole again; once no BSP is owed, ASP is immune and detection stops.
        self.stragglers.phase_changed(bsp_share_done=not ctx.plan.owes_bsp(k))

    def save(self, reason: str) -> pb.Saved:
        """A checkpoint the chief writes on request, once it is reported."""
        count, wanted = len(self.saved), codec.enum_value(pb.SaveReason.DESCRIPTOR, reason)
        self.nodes.send(0, save=pb.Save(reason=wanted))
        self.ctx.feed.wait_until(lambda: len(self.saved) > count and self.saved[-1].reason == wanted,
                                 f"the {reason} checkpoint", timeout_s=120)
        return self.saved[-1]

    def _wait_for_scores(self) -> None:
        """Until every submitted checkpoint is scored or the guard condemns the last phase. Gives up after
        SCORE_WAIT_S without a score: the checkpoints held back while training ran (evaluation.live) are all scored
        now, which in all can take longer than that on a long run."""
        evaluations, guard = self.evaluations, self.guard
        while evaluations.pending > 0 and guard.verdict is None:
            left = evaluations.pending
            self.ctx.feed.wait_until(lambda: evaluations.pending < left or guard.verdict is not None,
                                     "the last evaluations", timeout_s=SCORE_WAIT_S)

    def finish(self) -> bool:
        """The final checkpoint and its evaluation; False when the guard condemned the last phase meanwhile."""
        ctx, guard, evaluations = self.ctx, self.guard, self.evaluations
        reached = ctx.record.phase_log[-1].end_fraction
        if reached < 1.0:  # a phase ended early and nothing followed it: never report that as completed
            raise ClusterError(f"the last phase ended at {reached * 100:.1f}% of the workload")
        ctx.lifecycle.to(JobState.FINISHING)
        ctx.record.t_end = ctx.phase_run(len(ctx.plan) - 1).end_time
        self.stragglers.finish(time.time())
        final = self.save("final")
        # The checkpoints deferred while training ran (evaluation.live); the final is scored first, and the
        # nodes' cores are free now: as many scorers as cores.
        evaluations.release("last step")
        evaluations.submit(final.path, final.fraction, ctx.record.t_end)
        evaluations.widen()
        self._wait_for_scores()
        if guard.verdict is not None:
            return False
        evaluations.close_input()
        final = [e for e in evaluations.results if e.fraction >= 1.0]
        short = final and guard.shortfall(final[-1].fraction, final[-1].accuracy)  # None if unrepaired
        if short:
            ctx.note("guard", time.time(), **short)
            ctx.bar.message(f"guard: the repaired run ends at accuracy {short['values']['accuracy']:.4g}, below "
                            f"{short['values']['floor']:.4g}, what it had kept up with before the degradation")
        return True
