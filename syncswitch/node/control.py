"""The manager's commands at a pause: phase entry on the chief, saves, and the go that starts a phase."""

from __future__ import annotations

import queue
import sys

from syncswitch.node import background_save, startup
from syncswitch.wire import agent_pb2 as pb
from syncswitch.wire import codec


def warm_protocols(launch, engines) -> list[str]:
    """The built protocols warmed up before training, in build order (the same on every worker): every one a phase
    of the plan surely runs; one on standby (a guard's fallback rung, a switch target the rules may never enter) pays
    its first calls if entered."""
    planned = {p.protocol for p in launch.phases if not p.standby}
    return [protocol for protocol in engines if protocol in planned]


class PhaseControl:
    """Blocks a paused worker on the command queue until it is told to go (True) or to stop (False).

    A worker pauses at four kinds of places: after start-up (every protocol warmed up, `ready`),
    at a phase boundary (`paused`), after a non-finite loss (`diverged`, then `paused`), and
    mid-phase when the elastic policy idles it (`idled`).
    Called by the task's loop between steps, never from inside a hook.
    """

    def __init__(self, task, commands: "queue.Queue[pb.Command]", emit):
        self.task = task
        self.commands = commands
        self.emit = emit

    def at_start(self, session) -> bool:
        task, g, state = self.task, self.task.g, self.task.state
        warmed = warm_protocols(task.launch, g.engines)
        for protocol in warmed:
            state.protocol = protocol
            task.runner.warm_up(g.engines[protocol])
        state.protocol = None
        # The warm-up steps drew batches, one or two per protocol built: without this, a run that builds every
        # protocol (a switch in place) would train on a stream shifted from the one a BSP-only run reads, and
        # differ from it although it never left BSP. Re-initializing the iterator replays the same stream.
        session.run(g.input_start, feed_dict=g.input_feeds or None)
        if task.is_chief and (task.eval_points or task.durable_points or task.checkpoint_every_s):
            background_save.warm_up(session, g.saver, [g.engines[p].snapshot for p in warmed if g.engines[p].snapshot])
        samples, step = session.run([g.samples, g.global_step])
        startup.mark("warm_up")
        print(startup.line(), file=sys.stderr, flush=True)
        state.samples = int(samples)
        # Counts here include warm-up steps; the chief's `entered` reports them after the reset.
        self.emit(codec.event(ready=pb.Ready(samples=state.samples, fraction=state.fraction,
                                             total_samples=state.total, global_step=int(step))))
        return self._serve(session, idle=False)

    def at_boundary(self, session) -> bool:
        state = self.task.state
        engine = self.task.g.engines.get(state.protocol)
        measured = engine.stats(session) if engine is not None else {}
        self.task.metrics_hook.at_pause()  # before `paused`: the manager has every worker's loss when all paused
        self.emit(codec.event(paused=pb.Paused(phase=state.phase, fraction=state.fraction, samples=state.samples,
                                               phase_steps=state.phase_steps, measured=codec.struct(measured))))
        return self._serve(session, idle=False)

    def at_divergence(self, session) -> bool:
        """A non-finite loss: report it and wait at a boundary; the manager rolls back or stops the run."""
        state = self.task.state
        self.emit(codec.event(diverged=pb.Diverged(loss=state.diverged_loss, fraction=state.fraction,
                                                   worker=state.worker, phase=state.phase)))
        return self.at_boundary(session)

    def idle(self, session) -> bool:
        """Leave the synchronous group: hand over the gradient owed, then wait to join at the boundary."""
        task, state = self.task, self.task.state
        task.runner.push_only(task.g.engines[state.protocol])
        self.emit(codec.event(idled=pb.Idled(phase=state.phase, fraction=state.fraction, samples=state.samples)))
        return self._serve(session, idle=True)

    def _serve(self, session, idle: bool) -> bool:
        task, g, state = self.task, self.task.g, self.task.state
        while True:
            cmd = self.commands.get()
            name = codec.kind(cmd)
            if name == "stop":
                return False
            if name == "join":
                if idle:  # the others reached the boundary: wait there with them
                    idle = False
                    state.samples = int(session.run(g.samples))
                    self.emit(codec.event(paused=pb.Paused(phase=state.phase, fraction=state.fraction,
                                                           samples=state.samples, phase_steps=state.phase_steps)))
            elif name == "enter_phase":
                task.enter_phase(session, cmd.enter_phase)
            elif name == "save":
                task.save_on_request(session, cmd.save.reason)
            elif name == "restore":
                task.restore(session, cmd.restore)
            elif name == "go":
                go = cmd.go
                state.clear_idle_request()  # an idle request that met the boundary ends with the phase
                engine = g.engines[go.protocol]
                params = codec.from_struct(go.params)
                engine.choose_path(params)
                state.hold_boundary = engine.collective  # before the phase is named: set_boundary reads both
                state.take_moved_boundary()  # none is pending at a pause; drop a stale one
                state.protocol, state.phase, state.boundary = go.protocol, go.phase, go.until
                state.phase_steps = 0
                state.unread_steps = 0
                state.diverged_loss = None
                state.samples = int(session.run(g.samples))  # after the warm-up reset, before estimating
                task.on_phase_start()
                per_step = task.batch_by_protocol[state.protocol] * task.num_workers  # samples a step, cluster-wide
                state.stride = per_step if engine.counts_every_step else 0
                state.step_samples, state.unagreed = per_step, False
                engine.enter_worker(session, params)
                return True
            else:
                self.emit(codec.event(error=pb.TaskError(message=f"command {name!r} is not valid while paused")))
