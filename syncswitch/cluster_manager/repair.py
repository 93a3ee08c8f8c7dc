"""The guard's repairs of a degraded phase: roll every node back to a healthy checkpoint, or fall back from here."""

from __future__ import annotations

import time

from syncswitch.cluster_manager import events as ev
from syncswitch.cluster_manager.lifecycle import JobState
from syncswitch.wire import agent_pb2 as pb

EVAL_WAIT_S = 15.0  # how long a rollback waits for the evaluation of a later candidate checkpoint


class JobRepair:
    """Mixin of JobRun: acts on the guard's verdict once every worker has paused in the condemned phase k - 1."""

    def _repair(self, k: int) -> None:
        """Continue the rest of the workload on the fallback ladder's next rung, from where the guard says."""
        # Without a healthy checkpoint (a verdict that could fall back, whose phase then ran to the end before it
        # paused) the fall-back still runs: a phase with no workload left, which ends the run as the verdict found it.
        if self.guard.rolls_back(reached=self.phase_run(k - 1).end_fraction):
            # A rollback goes to a checkpoint at or before the onset: the evaluator's time goes to those next.
            self.evaluations.cancel_after(self.guard.verdict.onset)
            self._rollback(k)
        else:
            self._fall_back_here(k)

    def _fall_back_here(self, k: int) -> None:
        """Switch to the next rung from the current weights: nothing is thrown away, the rung's protocol repairs the
        lag (a switch like any other: in place, or by relaunch from a checkpoint of these weights)."""
        verdict = self.guard.verdict
        reached = self.phase_run(k - 1).end_fraction
        protocol = self.guard.plan_fall_back()
        self.plan.fall_back(k, protocol, at=reached)
        self.save_run()
        self._switch(k, reason="guard")
        resumed = self.phase_run(k).last_start_time
        entry = self.guard.record(verdict, f"fall back at {reached * 100:.1f}%, continue with {protocol}",
                                  checkpoint=None, checkpoint_fraction=None, continued_at=reached, samples_lost=0,
                                  overhead_s=resumed - self.guard.decided_at, mode=self.plan.mode)
        self.outputs.record({"kind": "guard", "t": time.time() - self.record.t_submit, **entry})
        self.outputs.scalar("guard/fall_backs", float(self.guard.rollbacks), int(verdict.fraction * 1e6), resumed)

    def _rollback(self, k: int) -> None:
        """Restore every node from the last good checkpoint and run the rest of the workload on the next rung."""
        verdict = self.guard.verdict
        if self.guard.unproven(verdict):
            # An asynchronous checkpoint before the onset whose evaluation is still on its way would be a later,
            # cheaper target: the evaluator is seconds behind, the workload since the last proven one is more.
            try:
                self.feed.wait_until(lambda: not self.guard.unproven(verdict),
                                     "the evaluation of the rollback's candidate checkpoints", timeout_s=EVAL_WAIT_S)
            except ev.WaitTimeout:
                pass  # no answer in time: roll back to the last proven checkpoint
        checkpoint, protocol = self.guard.plan_rollback(verdict)
        self.lifecycle.to(JobState.ROLLING_BACK, k)
        abandoned = self.phase_run(k - 1)
        self.plan.fall_back(k, protocol)
        self.checkpoint_name = f"model-r{self.guard.rollbacks}.ckpt"
        self.save_run()  # before the new branch saves anything: a resume adopts only the running branch's saves
        self.record.abandoned_evaluations += self.evaluations.abandon_after(checkpoint.fraction)
        self.bar.rolled_back()
        self.durable.drop_after(checkpoint.fraction)
        mode = self.plan.mode
        if mode == "in-place":
            self.send(0, restore=pb.Restore(path=checkpoint.path, checkpoint_name=self.checkpoint_name))
            self.feed.wait_until(lambda: abandoned.restored is not None, "the rollback's restore", timeout_s=120)
        else:
            self.feed.stopping = True  # the old tasks' exits are expected
            self._launch_all(start_phase=k, restore_from=checkpoint.path)
            self.feed.stopping = False
            self.responder.reapply()
        self.phase_run(k).start_fraction = checkpoint.fraction
        self._start_phase(k)
        resumed = self.phase_run(k).last_start_time
        lost = abandoned.end_fraction - checkpoint.fraction
        entry = self.guard.record(verdict, f"rollback to {checkpoint.fraction * 100:.1f}%, continue with {protocol}",
                                  checkpoint=checkpoint.path, checkpoint_fraction=checkpoint.fraction,
                                  samples_lost=int(round(lost * (self.record.total_samples or 0))),
                                  overhead_s=resumed - self.guard.decided_at, mode=mode)
        self.record.phase_log[-1]["rolled_back_to"] = checkpoint.fraction
        self.outputs.record({"kind": "guard", "t": time.time() - self.record.t_submit, **entry})
        self.outputs.scalar("guard/rollbacks", float(self.guard.rollbacks), int(verdict.fraction * 1e6), resumed)
        self.stragglers.phase_changed(bsp_share_done=not self.plan.owes_bsp(k))
