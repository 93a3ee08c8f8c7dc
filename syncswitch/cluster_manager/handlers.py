"""How each event from the nodes and the evaluator moves a job's state: one handler per event kind."""

from __future__ import annotations

import time

from syncswitch.cluster_manager import events as ev
from syncswitch.cluster_manager.lifecycle import JobState, TaskState
from syncswitch.cluster_manager.recovery import SAVE_KINDS
from syncswitch.protocols import PROTOCOLS
from syncswitch.wire import agent_pb2 as pb
from syncswitch.wire import codec


class EventRouter:
    """`handle` dispatches a node's event to `_on_<kind>` (kinds without one are failures) and the evaluator's to
    `_on_evaluator_event`; each handler hands the event to the collaborator that owns what it changes."""

    def __init__(self, ctx, nodes, launcher, phases, repairs, recovery, guard, evaluations, durable, stragglers,
                 responder, journal, timing):
        self.ctx = ctx
        self.nodes = nodes
        self.launcher = launcher
        self.phases = phases
        self.repairs = repairs
        self.recovery = recovery
        self.guard = guard
        self.evaluations = evaluations
        self.durable = durable
        self.stragglers = stragglers
        self.responder = responder
        self.journal = journal
        self.timing = timing
        # A lost node's events go to recovery.
        self._on_exit, self._on_node_lost, self._on_error = recovery.on_exit, recovery.on_node_lost, recovery.on_error

    def handle(self, source, event: pb.Event, received: float) -> None:
        ctx = self.ctx
        name = codec.kind(event)
        if source == ev.EVALUATOR:
            self._on_evaluator_event(name, event)
            return
        if ctx.tasks is TaskState.REPLACING and name != "ready":
            return  # the lost branch's last words: every task is being replaced
        handler = getattr(self, f"_on_{name}", None)
        if handler is None:
            ev.raise_for_event(source, event, ctx.tasks.exits_expected)
            return
        handler(source, getattr(event, name), received)
        self.recovery.heard(source, received)  # after: a death is timed against what came before it
        if name != "metrics":
            ctx.note(name, received, source=source, **codec.event_record(event))

    def _on_evaluator_event(self, name: str, event: pb.Event) -> None:
        ctx = self.ctx
        if name == "evaluation":
            result = self.evaluations.on_evaluation(event.evaluation)
            self.durable.unpin(self.evaluations.written(event.evaluation.checkpoint))
            ctx.outputs.append({"kind": "evaluation", "abandoned": result is None, **codec.event_record(event)})
            if result is None:
                return  # it scored a checkpoint of a branch the guard rolled back
            ctx.scalar("test/accuracy", result.accuracy, result.fraction, ctx.record.t_submit + result.time_s)
            ctx.bar.evaluated(result.fraction, result.accuracy)
            self.journal.save()
            verdict = self.guard.on_evaluation(result.written, result.fraction, result.accuracy, result.loss)
            if verdict is not None:
                self.repairs.abandon(verdict, time.time())
        elif name in ("evaluator_ready", "evaluator_done"):
            return
        elif name == "exit" and self.evaluations.input_closed:
            return  # it ended after its last checkpoint
        else:  # any other exit fails the run: one that went on without its evaluator "completed" with no accuracy
            ev.raise_for_event(ev.EVALUATOR, event, ctx.tasks is TaskState.ENDING)

    def _on_ready(self, source: int, ready: pb.Ready, received: float) -> None:
        self.launcher.on_ready(source, ready)

    def _on_entered(self, source: int, entered: pb.Entered, received: float) -> None:
        self.ctx.phase_run(entered.phase).entered = entered

    def _on_first_step(self, source: int, first: pb.FirstStep, received: float) -> None:
        record = self.ctx.record
        self.ctx.phase_run(first.phase).first_steps[source] = received
        if record.first_step_time is None:
            record.first_step_time = received
            self.stragglers.t0 = received  # straggler times count from the first step, like evaluations

    def _on_paused(self, source: int, paused: pb.Paused, received: float) -> None:
        k = paused.phase
        run = self.ctx.phase_run(k)
        run.paused[source] = (received, paused)
        idle = self.stragglers.idle
        if idle and not run.joined and len(run.paused) >= self.nodes.workers - len(idle):
            # Every active worker is at the boundary: the idled ones join them there.
            run.joined = True
            for worker in idle - set(run.paused):
                self.nodes.send(worker, join=pb.Join())
        if PROTOCOLS.get(self.ctx.plan[k].protocol).blocks and not run.released:
            # Workers still waiting inside a step (BSP's token, SSP's clocks) wait for peers now paused: free them.
            run.released = True
            self.nodes.send(0, release=pb.Release())

    def _on_idled(self, source: int, idled: pb.Idled, received: float) -> None:
        self.responder.on_idled(source, received)

    def _on_group_changed(self, source: int, group: pb.GroupChanged, received: float) -> None:
        pass  # recorded in metrics.jsonl

    def _on_saved(self, source: int, saved: pb.Saved, received: float) -> None:
        self.phases.on_saved(saved)
        self.guard.on_checkpoint(saved.path, saved.fraction, saved.samples)
        self.recovery.keep_durable(saved.path, saved.fraction, saved.samples, SAVE_KINDS.get(saved.reason, "periodic"),
                                   received)

    def _on_eval_checkpoint(self, source: int, checkpoint: pb.EvalCheckpoint, received: float) -> None:
        self.guard.on_checkpoint(checkpoint.path, checkpoint.fraction, checkpoint.samples)
        self.durable.pinned.add(checkpoint.path)  # rotation waits for its evaluation
        self.recovery.keep_durable(checkpoint.path, checkpoint.fraction, checkpoint.samples, "evaluation", received)
        # Scored at once where the guard may act on it; else, with evaluation.live deferring, once training pauses.
        live = self.timing.scores_needed(self.guard.watching, self.ctx.running_phase)
        self.evaluations.submit(checkpoint.path, checkpoint.fraction, received, live=live)

    def _on_restored(self, source: int, restored: pb.Restored, received: float) -> None:
        self.ctx.phase_run(self.ctx.lifecycle.phase - 1).restored = restored

    def _on_diverged(self, source: int, diverged: pb.Diverged, received: float) -> None:
        if self.ctx.lifecycle.state is JobState.RUNNING:
            verdict = self.guard.on_divergence(diverged.fraction, diverged.loss)
            if verdict is not None:
                self.repairs.abandon(verdict, received)
                return
        if self.guard.verdict is None:  # nothing to roll back to: the run ends diverged
            ev.raise_for_event(source, codec.event(diverged=diverged), self.ctx.tasks.exits_expected, self._rate_hint())

    def _rate_hint(self) -> str:
        """What to change. Where the running phase's rate is a multiple of the user's (the paper's linear scaling
        under BSP): the user's rate worked on one worker, the multiple is syncswitch's. Where no clip is set: a
        blow-up at a rate that trains most steps (a Transformer's) is what clipping the gradients' norm holds. Where
        the all-reduce sends float16: a large gradient overflows there."""
        plan = self.ctx.plan
        hp = plan.spec.hyperparameters
        config, rate = plan[min(self.ctx.running_phase, len(plan) - 1)].config, hp.learning_rate
        hints = []
        if config.learning_rate > rate:
            scaled = config.learning_rate
            hints.append(f"{config.protocol} ran at rate {scaled:.4g}, {scaled / rate:.3g} x hyperparameters."
                         f"learning_rate (policy.configuration {plan.spec.policy.configuration}): a lower "
                         "learning_rate, or policy.configuration fixed (your rate under every protocol), may train")
        if hp.clip_norm is None:
            hints.append("hyperparameters.clip_norm (the gradients clipped to a global norm) may hold the rate")
        if hp.compression == "fp16":  # a gradient past 65504 is infinite in float16: the step is, too
            hints.append("hyperparameters.compression fp16 overflows past 65504; bf16 keeps float32's range")
        return "".join(f"; {hint}" for hint in hints)

    def _on_metrics(self, source: int, metrics: pb.Metrics, received: float) -> None:
        ctx = self.ctx
        ctx.latest[source] = metrics
        ctx.note("metrics", received, **codec.event_record(codec.event(metrics=metrics)))
        for key in ("loss", "examples_per_s", "step_time_s"):
            ctx.scalar(f"worker{source}/{key}", getattr(metrics, key), metrics.fraction, received)
        fraction = ctx.reached()
        ctx.bar.update(fraction, metrics.protocol, sum(m.examples_per_s for m in ctx.latest.values()), metrics.loss)
        running = ctx.lifecycle.phase if ctx.lifecycle.state is JobState.RUNNING else None
        self.responder.on_metrics(source, metrics, received, fraction, running)
        on_trial = self.timing.on_trial(running)
        slower = self.timing.on_rate(source, metrics.protocol, metrics.phase, metrics.examples_per_s, fraction)
        if on_trial and not slower and self.timing.scores_needed(self.guard.watching, running):
            self.evaluations.release("trial kept")  # the target is kept: the guard's reference, held through the trial
        cut = self.timing.on_loss(ctx.plan, running, metrics.fraction, metrics.loss, fraction)
        if cut is not None:  # the switch rule ends BSP here
            self.nodes.broadcast(set_boundary=pb.SetBoundary(phase=running, until=cut))
        if running is not None:
            # A trial that found the switch target slower than BSP goes back by the guard's fall-back.
            verdict = slower and self.guard.on_slower(slower)
            if slower and verdict is None:
                self.timing.not_acted("no fall-back: the guard is off, busy, or has no rung left")
            verdict = verdict or self.guard.on_loss(metrics.fraction, metrics.loss)
            if verdict is not None:
                self.repairs.abandon(verdict, received)
