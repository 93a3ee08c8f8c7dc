"""How each event from the nodes and the evaluator moves a job's state: one handler per event kind."""

from __future__ import annotations

import time

from syncswitch.cluster_manager import events as ev
from syncswitch.cluster_manager.lifecycle import JobState
from syncswitch.cluster_manager.recovery import SAVE_KINDS
from syncswitch.registry import PROTOCOLS
from syncswitch.wire import agent_pb2 as pb
from syncswitch.wire import codec


class JobEvents:
    """The event half of JobRun: `handle` dispatches to `_on_<kind>`; kinds without one are failures."""

    def handle(self, source, event: pb.Event, received: float) -> None:
        name = codec.kind(event)
        if source == ev.EVALUATOR:
            self._on_evaluator_event(name, event)
            return
        if self.recovering and name != "ready":
            return  # the lost branch's last words: every task is being replaced
        handler = getattr(self, f"_on_{name}", None)
        if handler is None:
            ev.raise_for_event(source, event, self.feed.stopping)
            return
        handler(source, getattr(event, name), received)
        self.last_heard[source] = received  # after: a death is timed against what came before it
        if name != "metrics":
            self.outputs.record({"kind": name, "source": source, "t": received - self.record.t_submit,
                                 **codec.event_record(event)})

    def _on_evaluator_event(self, name: str, event: pb.Event) -> None:
        if name == "evaluation":
            record = self.evaluations.on_evaluation(event.evaluation)
            self.durable.unpin(self.evaluations.written(event.evaluation.checkpoint))
            self.outputs.record({"kind": "evaluation", "abandoned": record is None, **codec.event_record(event)})
            if record is None:
                return  # it scored a checkpoint of a branch the guard rolled back
            self.outputs.scalar("test/accuracy", record["accuracy"], int(record["fraction"] * 1e6),
                                self.record.t_submit + record["time_s"])
            self.bar.evaluated(record["fraction"], record["accuracy"])
            self.save_run()
            verdict = self.guard.on_evaluation(record["written"], record["fraction"], record["accuracy"],
                                               record["loss"])
            if verdict is not None:
                self._abandon(verdict, time.time())
        elif name in ("evaluator_ready", "evaluator_done"):
            return
        elif name == "exit" and self.evaluations.input_closed:
            return  # it ended after its last checkpoint
        else:  # any other exit fails the run: one that went on without its evaluator "completed" with no accuracy
            ev.raise_for_event(ev.EVALUATOR, event, self.feed.stopping)

    def _on_ready(self, source: int, ready: pb.Ready, received: float) -> None:
        self.ready[source] = ready
        self.record.total_samples = ready.total_samples

    def _on_entered(self, source: int, entered: pb.Entered, received: float) -> None:
        self.phase_run(entered.phase).entered = entered

    def _on_first_step(self, source: int, first: pb.FirstStep, received: float) -> None:
        self.phase_run(first.phase).first_steps[source] = received
        if self.record.first_step_time is None:
            self.record.first_step_time = received
            self.stragglers.t0 = received  # straggler times count from the first step, like evaluations

    def _on_paused(self, source: int, paused: pb.Paused, received: float) -> None:
        k = paused.phase
        run = self.phase_run(k)
        run.paused[source] = (received, paused)
        idle = self.stragglers.idle
        if idle and not run.joined and len(run.paused) >= self.workers - len(idle):
            # Every active worker is at the boundary: the idled ones join them there.
            run.joined = True
            for worker in idle - set(run.paused):
                self.send(worker, join=pb.Join())
        if PROTOCOLS.get(self.plan[k].protocol).blocks and not run.released:
            # Workers still waiting inside a step (BSP's token, SSP's clocks) wait for peers now paused: free them.
            run.released = True
            self.send(0, release=pb.Release())

    def _on_idled(self, source: int, idled: pb.Idled, received: float) -> None:
        self.responder.on_idled(source, received)

    def _on_group_changed(self, source: int, group: pb.GroupChanged, received: float) -> None:
        pass  # recorded in metrics.jsonl

    def _on_saved(self, source: int, saved: pb.Saved, received: float) -> None:
        if saved.reason != pb.SAVE_REASON_PERIODIC:
            self.saved.append(saved)
        self.guard.on_checkpoint(saved.path, saved.fraction, saved.samples)
        self._durable(saved.path, saved.fraction, saved.samples, SAVE_KINDS.get(saved.reason, "periodic"), received)

    def _on_eval_checkpoint(self, source: int, checkpoint: pb.EvalCheckpoint, received: float) -> None:
        self.guard.on_checkpoint(checkpoint.path, checkpoint.fraction, checkpoint.samples)
        self.durable.pinned.add(checkpoint.path)  # rotation waits for its evaluation
        self._durable(checkpoint.path, checkpoint.fraction, checkpoint.samples, "evaluation", received)
        self.evaluations.submit(checkpoint.path, checkpoint.fraction, received)

    def _on_restored(self, source: int, restored: pb.Restored, received: float) -> None:
        self.phase_run(self.lifecycle.phase - 1).restored = restored

    def _on_diverged(self, source: int, diverged: pb.Diverged, received: float) -> None:
        if self.lifecycle.state is JobState.RUNNING:
            verdict = self.guard.on_divergence(diverged.fraction, diverged.loss)
            if verdict is not None:
                self._abandon(verdict, received)
                return
        if self.guard.verdict is None:  # nothing to roll back to: the run ends diverged
            ev.raise_for_event(source, codec.event(diverged=diverged), self.feed.stopping)

    def _on_metrics(self, source: int, metrics: pb.Metrics, received: float) -> None:
        self.latest[source] = metrics
        self.outputs.record({"kind": "metrics", "t": received - self.record.t_submit,
                             **codec.event_record(codec.event(metrics=metrics))})
        step = int(metrics.fraction * 1e6)
        for key in ("loss", "examples_per_s", "step_time_s"):
            self.outputs.scalar(f"worker{source}/{key}", getattr(metrics, key), step, received)
        fraction = max(m.fraction for m in self.latest.values())
        self.bar.update(fraction, metrics.protocol, sum(m.examples_per_s for m in self.latest.values()), metrics.loss)
        running = self.lifecycle.phase if self.lifecycle.state is JobState.RUNNING else None
        self.responder.on_metrics(source, metrics, received, fraction, running)
        cut = self.timing.on_loss(self.plan, running, metrics.fraction, metrics.loss, fraction)
        if cut is not None:  # the switch rule ends BSP here
            self.broadcast(set_boundary=pb.SetBoundary(phase=running, until=cut))
        if running is not None:
            verdict = self.guard.on_loss(metrics.fraction, metrics.loss)
            if verdict is not None:
                self._abandon(verdict, received)
