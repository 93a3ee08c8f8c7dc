"""Manager restart: a new manager takes an interrupted run folder over and goes on from its last durable checkpoint."""

from __future__ import annotations

import time

from syncswitch.cluster_manager.checkpoints import DurableCheckpoint, DurableCheckpoints, checkpoint_folder
from syncswitch.cluster_manager.journal import load_run
from syncswitch.cluster_manager.record import EvaluationResult
from syncswitch.cluster_manager.recovery import Recovery
from syncswitch.cluster_manager.restart import Restart
from syncswitch.cluster_manager.stragglers import StragglerController
from syncswitch.errors import ClusterError, SyncSwitchError
from syncswitch.runfolder import RUN_FILE, metrics_reached


class Resumer:
    """Takes the folder's record, checkpoints and results over (`prepare`), then launches every node from the resume
    checkpoint in the phase it was taken in (`start`)."""

    def __init__(self, restart: Restart, recovery: Recovery, stragglers: StragglerController):
        self.restart = restart
        self.ctx = restart.ctx
        self.guard = restart.guard
        self.evaluations = restart.evaluations
        self.durable = restart.durable
        self.recovery = recovery
        self.stragglers = stragglers
        self.point: DurableCheckpoint | None = None  # the checkpoint the resumed run starts from
        self.info: dict | None = None

    def prepare(self) -> None:
        """Take over an interrupted run's record, checkpoints and results; called before the run starts."""
        ctx = self.ctx
        previous = load_run(ctx.run_dir)
        if not previous:
            raise SyncSwitchError(f"{ctx.run_dir}: no {RUN_FILE}: the run never started training; submit it again")
        store = DurableCheckpoints.load(checkpoint_folder(ctx.spec, ctx.run_dir), ctx.spec.checkpoint.keep)
        ctx.record.take_over(previous)
        if previous.get("plan"):  # without it (an older run folder) the spec's schedule is the plan
            ctx.plan.restore(previous["plan"])
        guard = previous.get("guard") or {}
        adopted = self.recovery.adopt_unreported(store, previous.get("checkpoint_name"), guard.get("pending_onset"))
        checkpoint = store.latest()
        self.durable.entries = store.entries
        fraction = checkpoint.fraction if checkpoint else 0.0
        self.guard.rollbacks = int(guard.get("rollbacks", 0))  # the fallback ladder goes on where it was
        self.guard.events = list(guard.get("events", []))
        # run.json is rewritten at state changes and evaluations; metrics.jsonl has every worker's progress.
        ctx.reached_before = max(previous.get("reached", fraction), metrics_reached(ctx.run_dir))
        self._keep_results_up_to(previous.get("evaluations", []), fraction, store)
        ctx.record.restarted_from(fraction)
        self.point = checkpoint
        self.stragglers.t0 = ctx.record.first_step_time
        self.info = {"t": time.time() - ctx.record.t_submit,
                     "checkpoint": checkpoint.path if checkpoint else None, "checkpoint_fraction": fraction,
                     "samples_lost": int(round(max(0.0, ctx.reached_before - fraction)
                                               * (ctx.record.total_samples or 0))),
                     "down_s": time.time() - previous.get("saved_at", time.time()),
                     "adopted": [c.path for c in adopted]}

    def _keep_results_up_to(self, kept: list[dict], fraction: float, store: DurableCheckpoints) -> None:
        """What was trained or scored past the checkpoint is lost with the old manager; evaluation checkpoints its
        evaluator had not scored yet are scored now."""
        ctx = self.ctx
        evaluations = [EvaluationResult.from_dict(e) for e in kept]
        self.evaluations.results = [e for e in evaluations if e.fraction <= fraction + 1e-9]
        ctx.record.abandoned_evaluations += [e for e in evaluations if e.fraction > fraction + 1e-9]
        scored = {e.written for e in self.evaluations.results}
        for entry in store.entries:
            if entry.kind == "evaluation" and entry.fraction <= fraction + 1e-9 and entry.path not in scored:
                self.durable.pinned.add(entry.path)
                self.evaluations.submit(entry.path, entry.fraction, ctx.record.t_submit + entry.time_s)

    def start(self) -> int:
        """Launch every node from the resume checkpoint, in the phase it was taken in; returns that phase."""
        ctx, checkpoint = self.ctx, self.point
        if checkpoint is not None and checkpoint.fraction >= 1.0:
            raise ClusterError(f"{ctx.run_dir}: the workload was done (final checkpoint {checkpoint.path}); "
                               "nothing to resume")
        k = self.recovery.phase_of(checkpoint)
        # The guard as the dead manager left it: without the phases before, a resumed ASP phase was not watched
        # (a chaos run's went on to collapse, 0.564 against 0.78 unfailed).
        fraction = checkpoint.fraction if checkpoint else 0.0
        starts = [0.0] + [p.until for p in ctx.plan][:k]
        self.guard.replay([(ctx.plan[j].protocol, starts[j]) for j in range(k)], self.evaluations.results,
                          [c for c in self.durable.entries if c.fraction <= fraction + 1e-9])
        self.restart.new_branch(f"model-m{len(ctx.record.resumes) + 1}.ckpt")  # taken over up to `fraction` already
        self.restart.launcher.launch_all(start_phase=k, restore_from=checkpoint.path if checkpoint else "")
        self.restart.started(k, fraction)
        ctx.record.resumes.append({**self.info, "phase": k,
                                   "training_again_s": ctx.phase_run(k).last_start_time - ctx.record.t_submit})
        ctx.outputs.append({"kind": "resume", **ctx.record.resumes[-1]})
        return k
