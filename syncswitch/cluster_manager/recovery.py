"""Node recovery: a lost task, agent or host is noticed from its event stream, replaced, and every node
restarts from the last durable checkpoint, in the phase that checkpoint was taken in."""

from __future__ import annotations

import logging
import os
import queue
import time

from syncswitch.cluster_manager import events as ev
from syncswitch.cluster_manager.checkpoints import DurableCheckpoint, DurableCheckpoints, complete
from syncswitch.cluster_manager.lifecycle import JobState, RunStatus, TaskState
from syncswitch.cluster_manager.nodes import Nodes
from syncswitch.cluster_manager.restart import Restart
from syncswitch.errors import ClusterError
from syncswitch.wire import agent_pb2 as pb
from syncswitch.wire import codec, saved

log = logging.getLogger(__name__)
SETTLE_S = 1.0  # after the first sign of a death, how long the others' reports are weighed
SAVE_KINDS = saved.KINDS


class NodeFailure(ClusterError):
    """A node's task or agent died while the job ran: recoverable until recovery.max_restarts."""

    def __init__(self, node: int, what: str, detected: float, last_heard: float | None):
        super().__init__(f"node {node}: {what}")
        self.node, self.what, self.detected, self.last_heard = node, what, detected, last_heard
        self.message = f"node {node}: {what}"
        self.others: list[str] = []  # what the other nodes reported meanwhile
        self.agent_lost = what.startswith("agent")


def _rank(f: NodeFailure) -> int:
    """How surely a report names the node that died: 0 killed (a signal, or the whole agent), 1 exited, 2 error."""
    if f.agent_lost or " code -" in f.what:
        return 0
    return 1 if f.what.startswith("task exited") else 2


class Recovery:
    """Node recovery: keeps the durable checkpoints as they are reported, notices a node's death from its events,
    and restarts every node from the last durable checkpoint. Owns when each node was last heard from."""

    def __init__(self, restart: Restart, nodes: Nodes):
        self.restart = restart
        self.ctx = restart.ctx
        self.guard = restart.guard
        self.durable = restart.durable
        self.nodes = nodes
        self.last_heard: dict = {}  # source -> when its last event arrived

    def heard(self, source, received: float) -> None:
        self.last_heard[source] = received

    # -- durable checkpoints -------------------------------------------------------------------
    def keep_durable(self, path: str, fraction: float, samples: int, kind: str, received: float) -> None:
        # The phase that last ran wrote it: a switch's checkpoint ends the phase before the next one.
        self.durable.add(DurableCheckpoint(path, fraction, int(samples), kind, self.ctx.running_phase,
                                           self.ctx.since_submit(received)))
        if self.durable.deleted:
            gone, self.durable.deleted = set(self.durable.deleted), []
            # A rotated checkpoint can be no rollback's target any more.
            self.guard.checkpoints = [c for c in self.guard.checkpoints if c.path not in gone]

    def adopt_unreported(self, store: DurableCheckpoints, name: str | None,
                         pending_onset: float | None) -> list[DurableCheckpoint]:
        """The running branch's complete checkpoints the manager has not heard of (yet), added to `store`.

        The chief writes a record beside each checkpoint before it reports it (syncswitch/wire/saved.py): a
        manager killed between the two used to resume a whole interval further back (2144 samples lost against
        a 2000-sample interval in a chaos run). The branch's name keeps the abandoned branches' files out; a
        verdict being acted on keeps out what was saved after its onset."""
        if not name:
            return []
        newest = store.entries[-1].fraction if store.entries else 0.0
        known = {c.path for c in store.entries}
        adopted = []
        for entry in saved.read_all(os.path.join(os.path.abspath(store.folder), name)):
            fraction = entry["fraction"]
            if entry["path"] in known or fraction <= newest or not complete(entry["path"]):
                continue
            if pending_onset is not None and fraction > pending_onset:
                continue
            time_s = os.path.getmtime(saved.record_path(entry["path"])) - (self.ctx.record.t_submit or 0.0)
            adopted.append(DurableCheckpoint(entry["path"], fraction, entry["samples"], entry["kind"],
                                             self.phase_at(fraction), time_s))
        store.adopt(adopted)
        return adopted

    def phase_at(self, fraction: float) -> int:
        """The plan phase that was running when progress reached `fraction` (the one it ends, at a boundary)."""
        for k, phase in enumerate(self.ctx.plan):
            if fraction <= phase.until + 1e-9:
                return k
        return len(self.ctx.plan) - 1

    def phase_of(self, checkpoint: DurableCheckpoint | None) -> int:
        """The plan phase to continue in: the checkpoint's, or the next one when it was taken at its end."""
        if checkpoint is None or checkpoint.phase is None:
            return 0
        k = checkpoint.phase
        if checkpoint.fraction >= self.ctx.plan[k].until - 1e-9 and k + 1 < len(self.ctx.plan):
            k += 1
        return k

    # -- failures --------------------------------------------------------------------------------
    def _failed(self, source: int, what: str, received: float, expected_in_relaunch: bool = True) -> None:
        """A node's death, unless expected (teardown, relaunch) or before training began (a launch failure)."""
        ctx = self.ctx
        if ctx.tasks is TaskState.REPLACING or (expected_in_relaunch and ctx.tasks.exits_expected):
            return
        if ctx.record.first_step_time is None or ctx.lifecycle.state in (JobState.TEARING_DOWN, JobState.DONE):
            return
        raise NodeFailure(source, what, received, self.last_heard.get(source))

    def on_exit(self, source: int, exit_: pb.TaskExit, received: float) -> None:
        self._failed(source, f"task exited with code {exit_.code}", received)
        ev.raise_for_event(source, codec.event(exit=exit_), self.ctx.tasks.exits_expected)

    def on_node_lost(self, source: int, lost: pb.NodeLost, received: float) -> None:
        # A task's exit is expected in a relaunch, an agent's never: only teardown closes the streams.
        self._failed(source, f"agent lost ({lost.message})", received, expected_in_relaunch=False)
        ending = self.ctx.lifecycle.state in (JobState.TEARING_DOWN, JobState.DONE)
        ev.raise_for_event(source, codec.event(node_lost=lost), ending or self.ctx.tasks.agents_may_go)

    def on_error(self, source: int, error: pb.TaskError, received: float) -> None:
        if error.kind == pb.ERROR_KIND_CLUSTER or error.kind == pb.ERROR_KIND_UNSPECIFIED:
            # A task that lost a peer (its parameter server died) fails with a runtime error.
            self._failed(source, f"task failed: {error.message}", received)
        if self.ctx.tasks is not TaskState.REPLACING:
            ev.raise_for_event(source, codec.event(error=error), self.ctx.tasks.exits_expected)

    def silent(self, now: float, idle=frozenset()) -> NodeFailure | None:
        """A node heard from by nothing for recovery.silence_s while the running phase goes on: its task or agent
        hangs (a step whose request to a parameter server never came back), so it is lost like a dead one:
        replaced, and every node restarts from the last durable checkpoint. The others must show that the run
        can go on: one heard from within that time, or waiting at the phase's end. When none does, there is none
        to blame (None): the feed's stall fails the run. Workers a straggler policy idled wait by design."""
        ctx = self.ctx
        if ctx.lifecycle.state is not JobState.RUNNING or ctx.tasks is not TaskState.LIVE:
            return None
        run = ctx.phase_runs.get(ctx.running_phase)
        if run is None or not run.first_steps:
            return None  # a phase no worker started yet is timed by its own waits
        # A worker that never takes its first step while another trains the phase (an in-place switch whose task
        # hung) is as lost as one silent in it: quiet since the first worker started.
        since = run.last_start_time if run.started(self.nodes.workers) else run.start_time
        limit = ctx.spec.recovery.silence_s
        quiet = {node: now - max(self.last_heard.get(node, 0.0), since)
                 for node in range(self.nodes.workers) if node not in run.paused and node not in idle}
        lost = [node for node, seconds in quiet.items() if seconds >= limit]
        going_on = [node for node in range(self.nodes.workers) if node in run.paused or quiet.get(node, limit) < limit]
        if not lost or not going_on:
            return None
        node = max(lost, key=quiet.get)
        waiting = sorted(n for n in going_on if n in run.paused)
        others = f"node(s) {', '.join(map(str, waiting))} waiting at the phase's end" if waiting else \
            "the others training"
        failure = NodeFailure(node, f"silent for {quiet[node]:.0f} s (recovery.silence_s {limit:g}: no metrics, no "
                                    f"report) while {others}", now, self.last_heard.get(node))
        failure.agent_lost = True  # its agent may hang with it: the node is replaced, not only its task
        return failure

    # -- the restart -----------------------------------------------------------------------------
    def settle(self, failure: NodeFailure, settle_s: float = SETTLE_S) -> NodeFailure:
        """The node that died first: a survivor that lost a peer's parameter server can report its own error
        before the dead node's exit arrives. Signals for `settle_s` are weighed: a process killed by a signal or
        a lost agent names the node; an error only when nothing else came."""
        feed = self.ctx.feed
        candidates = [failure]
        deadline = time.time() + settle_s
        while time.time() < deadline and _rank(candidates[-1]) > 0:
            try:
                source, event, received = feed.queue.get(timeout=max(0.01, deadline - time.time()))
            except queue.Empty:
                break
            if source == ev.EVALUATOR:
                feed.handler(source, event, received)
                continue
            name = codec.kind(event)
            if name == "exit":
                candidates.append(NodeFailure(source, f"task exited with code {event.exit.code}", received,
                                              self.last_heard.get(source)))
            elif name == "node_lost":
                candidates.append(NodeFailure(source, f"agent lost ({event.node_lost.message})", received,
                                              self.last_heard.get(source)))

        chosen = min(candidates, key=_rank)  # the first of the best rank
        # The node's own last words name the cause an exit code cannot (a script's error in its input pipeline).
        said = next((c for c in candidates if c.node == chosen.node and _rank(c) == 2), None)
        if said is not None and chosen.what.startswith("task exited"):
            cause = said.what.removeprefix("task failed: ")
            chosen = NodeFailure(chosen.node, f"{chosen.what} after {cause}", chosen.detected, chosen.last_heard)
        chosen.detected = failure.detected
        chosen.others = [c.message for c in candidates if c is not chosen and c is not said]
        return chosen

    def _reached(self) -> float:
        """How far training got: metrics come every half second and not during a pause, so the last checkpoint and
        the pauses count too."""
        ctx = self.ctx
        return max([ctx.reached()] + [p.fraction for r in ctx.phase_runs.values() for _, p in r.paused.values()]
                   + [c.fraction for c in self.durable.entries])

    def _repair_under_way(self):
        """(verdict, phase) of a guard repair under way (rolling back, relaunching for it, or the switch of a
        fall-back), which has already fallen back in the plan: the recovery finishes it in its phase."""
        for _, past, phase in reversed(self.ctx.lifecycle.history):
            if past is JobState.RUNNING:
                break
            if past is JobState.ROLLING_BACK or (past is JobState.SWITCHING and self.guard.falling_back):
                return self.guard.verdict, phase
        return None, None

    def _rewind(self, fraction: float, k: int) -> None:
        """Forget what the lost branch did past `fraction`; the new branch starts in phase k."""
        ctx = self.ctx
        self.guard.forget_after(fraction)
        ctx.record.restarted_from(fraction)
        ctx.phase_runs = {i: r for i, r in ctx.phase_runs.items() if i < k}
        ctx.latest.clear()
        self.restart.new_branch(f"model-f{len(ctx.record.failures) + 1}.ckpt", forget_after=fraction)

    def recover(self, failure: NodeFailure) -> int:
        """Replace what died, restore every node from the last durable checkpoint; returns the phase running."""
        ctx = self.ctx
        failure = self.settle(failure)
        # A save whose report was still on its way (the chief saved at the boundary the dead worker was reaching)
        # is on disk with the chief's record: adopted, it saves a whole interval (2048 samples in a chaos run).
        verdict = self.guard.verdict
        adopted = self.adopt_unreported(self.durable, ctx.checkpoint_name, verdict.onset if verdict else None)
        for c in adopted:
            self.guard.on_checkpoint(c.path, c.fraction, c.samples)
        checkpoint = self.durable.latest()
        reached, state = self._reached(), ctx.lifecycle.state.value
        rollback, rollback_phase = self._repair_under_way()
        limit = ctx.spec.recovery.max_restarts
        if len(ctx.record.failures) >= limit:
            where = f"the last checkpoint {checkpoint.path} ({checkpoint.fraction * 100:.1f}%) is intact" \
                if checkpoint else "no checkpoint was written"
            raise ClusterError(f"{failure}; recovery.max_restarts={limit} reached; {where}")
        ctx.bar.message(f"recovery: {failure} after {reached * 100:.1f}%; restarting every node from "
                        + (f"{checkpoint.fraction * 100:.1f}%" if checkpoint else "the start"))
        ctx.lifecycle.to(JobState.RECOVERING, ctx.lifecycle.phase)
        fraction = checkpoint.fraction if checkpoint else 0.0
        k = rollback_phase if rollback is not None else self.phase_of(checkpoint)
        launcher = self.restart.launcher
        with launcher.relaunching(TaskState.REPLACING):
            # A task killed by a signal may be the first sign of a lost host: an agent that outlived its host's
            # supervisor (a Ray actor gone with its raylet) ends its task before its own stream breaks.
            reason = self.nodes.backend.lost_reason(failure.node) if _rank(failure) == 0 else None
            if reason:
                failure.what = f"{failure.what}: {reason}"
                failure.agent_lost = True
            if failure.agent_lost:
                self.nodes.replace(failure.node)
            self._rewind(fraction, k)
            launcher.launch_all(start_phase=k, restore_from=checkpoint.path if checkpoint else "")
        self.restart.started(k, fraction)
        entry = self._log_failure(failure, state, reached, checkpoint, k, adopted)
        if rollback is not None and self.guard.verdict is rollback:
            done = self.guard.log_repair(rollback, f"rollback to {fraction * 100:.1f}%, continue with "
                                                   f"{ctx.plan[k].protocol} (finished by the recovery)",
                                         checkpoint=entry["checkpoint"], checkpoint_fraction=fraction,
                                         mode=ctx.plan.mode)
            ctx.note("guard", time.time(), **done)
        ctx.bar.message(f"recovery: training again {entry['recovered_after_s']:.1f} s after the failure")
        return k

    def _log_failure(self, failure: NodeFailure, state: str, reached: float, checkpoint, k: int, adopted) -> dict:
        ctx = self.ctx
        fraction = checkpoint.fraction if checkpoint else 0.0
        entry = {"t": ctx.since_submit(failure.detected), "node": failure.node, "what": failure.what,
                 "state": state,
                 "detected_after_s": None if failure.last_heard is None else failure.detected - failure.last_heard,
                 "recovered_after_s": ctx.phase_run(k).last_start_time - failure.detected,
                 "samples_lost": round(max(0.0, reached - fraction) * (ctx.record.total_samples or 0)),
                 "fraction_reached": reached, "checkpoint": checkpoint.path if checkpoint else None,
                 "checkpoint_fraction": fraction, "resumed_phase": k, "agent_replaced": failure.agent_lost,
                 "adopted": [c.path for c in adopted],
                 "also_reported": failure.others}
        ctx.record.failures.append(entry)
        ctx.outputs.append({"kind": "failure", **entry})
        return entry

    def summary(self) -> dict:
        """summary.json's `failures`, `goodput` and the settings they ran under."""
        record, spec = self.ctx.record, self.ctx.spec
        total = record.total_samples or 0
        lost = sum(f["samples_lost"] for f in record.failures)
        latest = self.durable.latest()
        if record.status == RunStatus.COMPLETED:
            useful = total
        else:  # what a resume would keep: the last durable checkpoint
            useful = latest.samples if latest else 0
        start = record.first_step_time
        end = record.t_end or (time.time() if start else None)
        wall = (end - start) if start and end else None
        return {
            "checkpoint": {"every": spec.checkpoint.every, "every_s": spec.checkpoint.every_s,
                           "keep": spec.checkpoint.keep, "latest": latest.path if latest else None},
            "recovery": {"max_restarts": spec.recovery.max_restarts,
                         "on_worker_loss": spec.recovery.on_worker_loss},
            "failures": record.failures,
            "resumes": record.resumes,
            "t_submit": record.t_submit,  # failures' `t` count from here (epoch seconds)
            "goodput": {"useful_samples": useful, "lost_samples": lost, "trained_samples": useful + lost,
                        "wall_s": wall, "useful_samples_per_s": useful / wall if wall else None},
        }
