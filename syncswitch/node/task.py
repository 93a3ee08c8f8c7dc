"""A node's training task process: PS + worker servers and the training loop, driven over stdin/stdout.

The agent starts this process ahead of time (TensorFlow takes seconds to import), then writes the
Launch message on stdin; further stdin lines are Commands, stdout lines are Events (syncswitch/wire).
"""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
import traceback

from syncswitch.node import startup  # first: its clock starts with the process
from syncswitch.node.startup import mark
from syncswitch.node import batch_check
from syncswitch.node.background_save import BackgroundWrites

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # tf.keras -> Keras 2, which builds v1 graphs
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from syncswitch.wire import agent_pb2 as pb  # after the environment TF reads at import
from syncswitch.wire import codec
from syncswitch.wire import saved as saved_record

_EVENTS = None  # the event stream: the process's stdout as it started (startup.take_stdout, in main)
_EMIT_LOCK = threading.Lock()
AGENT_GONE_EXIT = 1  # no one reads it: the agent that would report it is gone


def emit(event: pb.Event) -> None:
    line = codec.encode(event)
    with _EMIT_LOCK:
        _EVENTS.write(line + "\n")
        _EVENTS.flush()


def total_samples(launch: pb.Launch, per_epoch: int | None) -> int:
    if launch.workload.WhichOneof("size") == "samples":
        return int(launch.workload.samples)
    return int(round(launch.workload.epochs * per_epoch))


class Task:
    """One node's training: session creation, the step loop, and what the manager's commands do."""

    def __init__(self, launch: pb.Launch, commands: "queue.Queue[pb.Command]"):
        import tensorflow as tf

        from syncswitch.node import graph as graphmod
        from syncswitch.node import script as scriptmod
        from syncswitch.node import threads as threadsmod
        from syncswitch.node.state import TrainState

        self.tf = tf
        self.launch = launch
        self.commands = commands
        self.index = launch.task_index
        self.num_workers = launch.num_workers
        self.is_chief = self.index == 0
        self.params = json.loads(launch.params_json or "{}")
        intra, inter = launch.intra_threads or 1, launch.inter_threads or 2
        spin = threadsmod.spinning_allowed(list(launch.worker_hosts), self.index, intra + inter)
        self.cluster, self.ps_server, self.worker_server = graphmod.start_servers(
            list(launch.ps_hosts), list(launch.worker_hosts), self.index, intra, inter, spin)
        mark("servers")
        # The script runs in its folder, as `python train.py` would there: relative paths to its data files hold.
        # Paths the launch gives relative to the node's work dir are pinned first.
        launch.checkpoint_dir = os.path.abspath(launch.checkpoint_dir or "checkpoints")
        if launch.restore_from:
            launch.restore_from = os.path.abspath(launch.restore_from)
        os.chdir(os.path.dirname(os.path.abspath(launch.script_path)))
        module = scriptmod.load_script(launch.script_path)
        ramps = any(p.config.momentum_ramp_epochs or p.config.lr_warmup_epochs for p in launch.phases)
        by_samples = launch.workload.WhichOneof("size") == "samples"
        per_epoch = None
        if ramps or not by_samples:  # a samples workload asks the script only if it must
            per_epoch = scriptmod.num_train_examples(module, launch.script_path, self.params)
        if not by_samples and per_epoch is None:
            raise scriptmod.ScriptError(
                f"script {launch.script_path}: workload.epochs needs the script to define "
                "num_examples(split, params); or give workload.samples")
        mark("script")
        total = total_samples(launch, per_epoch)
        # Ramps are given in epochs; a script that cannot say its epoch size has its workload as one.
        self.samples_per_epoch = per_epoch or total
        self.g = graphmod.build(launch, total, module, self.params, self.cluster, per_epoch)
        mark("graph")
        self.state = TrainState(total, self.index)
        self.config = graphmod.session_config(self.num_workers, self.index, intra, inter, spin)
        from syncswitch.node.hooks.evaluation import checkpoint_points

        self.eval_points, self.durable_points = checkpoint_points(launch) if self.is_chief else ([], [])
        self.checkpoint_every_s = launch.checkpoint_every_s if self.is_chief else 0.0
        self.checkpoint_dir = launch.checkpoint_dir
        self.batch_by_protocol = {p.protocol: p.config.per_worker_batch for p in launch.phases}
        self.checkpoint_name = launch.checkpoint_name or "model.ckpt"
        self.reset_done = False
        self.restored_from = None
        self.runner = None
        self.session = None
        self.eval_hook = None
        self.writes = BackgroundWrites()

    # -- what commands do -------------------------------------------------------------------
    def apply_config(self, session, config: pb.PhaseConfig) -> None:
        s = self.g.settings
        per_epoch = self.samples_per_epoch
        session.run([s.set_lr, s.set_momentum, s.set_ramp],
                    {s.lr_in: config.learning_rate, s.momentum_in: config.momentum,
                     s.ramp_in: float(config.momentum_ramp_epochs) * per_epoch,
                     s.warmup_in: float(config.lr_warmup_epochs) * per_epoch})

    def enter_phase(self, session, cmd: pb.EnterPhase) -> None:
        """Chief, every worker paused: apply the phase's configuration and its protocol's entry."""
        g = self.g
        entered = pb.Entered(phase=cmd.phase)
        if not self.reset_done:
            self.reset_after_warm_up(session)
            if self.launch.report_variables:
                entered.variables.update(self.variable_digests(session))
        self.apply_config(session, cmd.config)
        g.engines[cmd.config.protocol].enter_chief(session, codec.from_struct(cmd.params))
        s = g.settings
        lr, momentum, now, samples = session.run([s.learning_rate, s.momentum, s.momentum_now, g.samples])
        entered.learning_rate, entered.momentum, entered.momentum_now = float(lr), float(momentum), float(now)
        entered.samples, entered.fraction = int(samples), int(samples) / self.state.total
        emit(codec.event(entered=entered))

    def save(self, session, kind: str, samples: int | None = None) -> tuple[str, int]:
        """Save a checkpoint and its record (syncswitch/wire/saved.py); (path, samples it holds)."""
        self.writes.wait()
        engine = self.g.engines.get(self.state.protocol)
        if engine is not None:
            engine.publish(session)  # workers stepping on replicas: the servers get the phase's model first
        step, counted = session.run([self.g.global_step, self.g.samples])
        samples = int(counted) if samples is None else samples
        path = self.g.saver.save(session, os.path.join(self.checkpoint_dir, self.checkpoint_name), global_step=step,
                                 write_meta_graph=False)
        saved_record.write(path, samples, samples / self.state.total, kind)
        return path, samples

    def checkpoint(self, session, kind: str, samples: int, then) -> None:
        """The hooks' checkpoint at this step: `then(path)` once it is on disk. Where the phase's workers step on
        replicas, the chief copies its replica now and the file is written beside training (background_save.py);
        otherwise it is saved before this returns."""
        engine = self.g.engines.get(self.state.protocol)
        snapshot = engine.snapshot if engine is not None else None
        if snapshot is None:
            path, _ = self.save(session, kind, samples)
            then(path)
            return
        self.writes.wait()  # the previous copy is still being written from the snapshot variables
        _, step = session.run([snapshot.take, snapshot.global_step])
        prefix, total = os.path.join(self.checkpoint_dir, self.checkpoint_name), self.state.total

        def write():
            path = snapshot.saver.save(session, prefix, global_step=int(step), write_meta_graph=False)
            saved_record.write(path, samples, samples / total, kind)
            then(path)

        self.writes.start(write)

    def save_on_request(self, session, reason: int) -> None:
        path, samples = self.save(session, saved_record.KINDS.get(reason, "periodic"))
        saved = pb.Saved(path=path, reason=reason, fraction=samples / self.state.total, samples=samples)
        if self.launch.report_variables:
            saved.variables.update(self.variable_digests(session))
        emit(codec.event(saved=saved))

    def restore(self, session, cmd: pb.Restore) -> None:
        """Chief, every worker paused: roll every variable back to the checkpoint at `cmd.path`."""
        g = self.g
        self.writes.wait()
        g.saver.restore(session, cmd.path)
        if cmd.checkpoint_name:
            self.checkpoint_name = cmd.checkpoint_name
        samples, step = session.run([g.samples, g.global_step])
        emit(codec.event(restored=pb.Restored(path=cmd.path, samples=int(samples),
                                              fraction=int(samples) / self.state.total, global_step=int(step))))

    def on_phase_start(self) -> None:
        if self.eval_hook is not None:
            self.eval_hook.skip_to(self.state.fraction)

    def variable_digests(self, session) -> dict:
        """SHA-256 of every checkpointed variable's value: lets tests prove a restore is exact."""
        import hashlib

        from syncswitch.node.graph import checkpointed

        variables = checkpointed(self.g.graph)
        values = session.run(variables)
        return {v.op.name: hashlib.sha256(repr((a.dtype.str, a.shape)).encode() + a.tobytes()).hexdigest()
                for v, a in zip(variables, values)}

    def reset_after_warm_up(self, session) -> None:
        """Undo the warm-up steps' updates (every worker has reported ready): restore or re-initialize the
        variables. The batches they drew each worker gave back itself (`PhaseControl.at_start`)."""
        self.reset_done = True
        if self.restored_from:
            self.g.saver.restore(session, self.restored_from)
        else:
            session.run(self.g.scaffold.init_op)

    # -- commands that must not wait for a step boundary (the reader thread) ----------------
    def on_immediate(self, cmd: pb.Command) -> bool:
        """Handle `cmd` at once if it is one of those; False to queue it for the loop."""
        name = codec.kind(cmd)
        state, session = self.state, self.session
        if name == "release":
            # A worker blocked inside a step (BSP, SSP) cannot see commands: free it from here.
            engine = self.g.engines.get(state.protocol)
            if session is not None and engine is not None:
                engine.release(session)
        elif name == "set_delay":
            state.delay_s = float(cmd.set_delay.delay_s)
        elif name == "set_group":
            # Elastic policy: the chief aggregates fewer gradients from now on, mid-phase.
            self.g.engines["bsp"].set_group(session, cmd.set_group.size)
            emit(codec.event(group_changed=pb.GroupChanged(size=cmd.set_group.size)))
        elif name == "idle":
            state.request_idle()
        elif name == "set_boundary":
            # A policy ends the running phase early: pause once progress reaches `until`.
            if state.phase == cmd.set_boundary.phase:
                state.move_boundary(float(cmd.set_boundary.until))
        else:
            return False
        return True

    # -- the loop -------------------------------------------------------------------------
    def run(self) -> int:
        from syncswitch.node.control import PhaseControl
        from syncswitch.node.hooks import (BoundaryHook, DelayHook, DivergenceHook, EvalCheckpointHook, HookList,
                                           MetricsHook)
        from syncswitch.node.state import PauseRequest
        from syncswitch.node.step_loop import StepRunner

        v1 = self.tf.compat.v1
        g, state, launch = self.g, self.state, self.launch
        # Metrics first: a phase's first step is announced even when it diverged.
        hooks = [MetricsHook(state, g.loss, emit, window=launch.window or 20, losses=g.losses,
                             interval_s=launch.metrics_interval_s or 0.5, batch_by_protocol=self.batch_by_protocol),
                 DivergenceHook(state, g.loss, g.losses), DelayHook(state)]
        self.metrics_hook = hooks[0]  # reports at each pause too (PhaseControl.at_boundary)
        if self.eval_points or self.durable_points or self.checkpoint_every_s:
            self.eval_hook = EvalCheckpointHook(state, self.eval_points, self.checkpoint, emit, self.durable_points,
                                                self.checkpoint_every_s)
            hooks.append(self.eval_hook)
        hooks.append(BoundaryHook(state))
        hooks = HookList(hooks)
        control = PhaseControl(self, self.commands, emit)
        with g.graph.as_default():
            hooks.begin()
            creator = _session_creator(self.is_chief, g.scaffold, self.worker_server.target, self.config,
                                       self.checkpoint_dir)
            if self.is_chief:
                # The session creator restores the latest checkpoint; the warm-up reset restores this one.
                self.restored_from = launch.restore_from or v1.train.latest_checkpoint(self.checkpoint_dir)
            session = creator.create_session()
            mark("session")
            hooks.after_create_session(session, None)
            self.session = session
            self.runner = StepRunner(session, hooks, state, launch.step_timeout_s)
            pauses = {PauseRequest.BOUNDARY: control.at_boundary, PauseRequest.IDLE: control.idle,
                      PauseRequest.DIVERGED: control.at_divergence}
            if not control.at_start(session):
                return 0
            while True:
                self.runner.step(g.engines[state.protocol])
                request, state.pause_request = state.pause_request, None
                if request is None:
                    continue
                self.writes.wait()  # a pause reports, restores, saves or ends: checkpoints taken are on disk
                if not pauses[request](session):
                    return 0


def _session_creator(is_chief, scaffold, master, config, checkpoint_dir):
    """Session creators whose session managers poll readiness every 0.1 s instead of 30 s."""
    import tensorflow as tf  # warm the import before the launch request arrives

    v1 = tf.compat.v1
    base = v1.train.ChiefSessionCreator if is_chief else v1.train.WorkerSessionCreator

    class FastCreator(base):
        def _get_session_manager(self):
            if self._session_manager is None:
                self._session_manager = v1.train.SessionManager(
                    local_init_op=self._scaffold.local_init_op,
                    local_init_feed_dict=self._scaffold.local_init_feed_dict,
                    ready_op=self._scaffold.ready_op,
                    ready_for_local_init_op=self._scaffold.ready_for_local_init_op,
                    graph=v1.get_default_graph(), recovery_wait_secs=0.1)
            return self._session_manager

    if is_chief:
        return FastCreator(scaffold=scaffold, master=master, config=config, checkpoint_dir=checkpoint_dir)
    return FastCreator(scaffold=scaffold, master=master, config=config)


def _read_commands(holder: dict, commands: "queue.Queue[pb.Command]") -> None:
    """Reader thread: commands that must not wait for a step boundary run here, the rest are queued."""
    for line in sys.stdin:
        try:
            cmd = codec.decode(line, pb.Command)
        except codec.WireError as exc:
            emit(codec.event(error=pb.TaskError(message=str(exc))))
            continue
        task = holder.get("task")
        if task is None or not task.on_immediate(cmd):
            commands.put(cmd)
    # The agent is gone: only its death closes this pipe (it stops a task with a Stop, then waits for it, before
    # it ends). A node whose agent died is lost, as if its machine were: end now, as every process of a lost
    # machine does, not at the next step boundary; a task left training would keep the run going on a node the
    # manager can no longer reach (a Ray node removed with its raylet and agent).
    sys.stderr.write("syncswitch task: the node's agent is gone (its pipe closed): exiting at once\n")
    sys.stderr.flush()
    os._exit(AGENT_GONE_EXIT)


def _report(error) -> int:
    """`error` (a SyncSwitchError) as the task's one-line error event, of its kind; returns its exit code."""
    from syncswitch.errors import ScriptError, SpecError

    kind = pb.ERROR_KIND_SCRIPT if isinstance(error, ScriptError) else \
        pb.ERROR_KIND_SPEC if isinstance(error, SpecError) else pb.ERROR_KIND_CLUSTER
    emit(codec.event(error=pb.TaskError(message=str(error), kind=kind)))
    return error.exit_code


def main() -> None:
    global _EVENTS
    _EVENTS = startup.take_stdout()
    os.nice(int(os.environ.get("SYNCSWITCH_NICE", "0")))
    import tensorflow as tf

    tf.compat.v1.disable_eager_execution()
    mark("tf_import")
    emit(codec.event(warm=pb.Warm(pid=os.getpid())))
    line = sys.stdin.readline()
    if not line:
        os._exit(0)
    mark("launch_wait")  # a pre-warmed task waits here for the manager's launch
    launch = codec.decode(line, pb.Launch)
    try:
        os.setpriority(os.PRIO_PROCESS, 0, 0)  # a niced spare now trains: back to normal priority
    except OSError:
        pass  # lowering niceness needs privileges; it then trains at the spare's priority
    commands: "queue.Queue[pb.Command]" = queue.Queue()
    holder: dict = {}
    threading.Thread(target=_read_commands, args=(holder, commands), daemon=True).start()
    code = 1
    try:
        from syncswitch.errors import ScriptError, SyncSwitchError, one_line

        task = Task(launch, commands)
        holder["task"] = task
        code = task.run()
    except SyncSwitchError as exc:
        code = _report(exc)
    except tf.errors.OutOfRangeError as exc:
        if "End of sequence" in str(exc):
            # The training set is repeated (graph.build), so it ends only when this worker's shard is empty.
            n = launch.num_workers
            error = ScriptError(f"script {launch.script_path}: input_fn('train', ...) gave worker "
                                f"{launch.task_index} no batch: each of the {n} workers reads one batch in {n}, so "
                                f"the training set needs at least {n} batches")
            code = _report(error)
        else:  # not the input pipeline (a closed queue, e.g. BSP's tokens): say what it was, traceback to the log
            traceback.print_exc()
            emit(codec.event(error=pb.TaskError(message=one_line(exc))))
            code = 1
    except Exception as exc:  # noqa: BLE001 - anything else is reported in one line, traceback to the log
        traceback.print_exc()
        error = batch_check.from_error(exc, launch.script_path)  # a batch of another size than batch_size
        if error is not None:
            code = _report(error)
        else:
            emit(codec.event(error=pb.TaskError(message=one_line(exc))))
            code = 1
    finally:
        try:
            sys.stderr.flush()
            _EVENTS.flush()
        except OSError:
            pass  # the agent already closed our pipe
        # Explicit exit: a SyncReplicasOptimizer chief can hang in session teardown.
        os._exit(code)


if __name__ == "__main__":
    main()
