"""A node's training task process: PS + worker servers and the training loop, driven over stdin/stdout.

The agent starts this process ahead of time (TensorFlow takes seconds to import), then writes one
JSON launch request on stdin; further stdin lines are commands, stdout lines are events.
"""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
import time
import traceback

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # tf.keras -> Keras 2, which builds v1 graphs
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

_EVENTS = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # user prints must not corrupt the event stream
_EMIT_LOCK = threading.Lock()


def emit(event: dict) -> None:
    event.setdefault("time", time.time())
    line = json.dumps(event, default=float)
    with _EMIT_LOCK:
        _EVENTS.write(line + "\n")
        _EVENTS.flush()


class Task:
    """One node's training: session creation, the step loop, and the manager's commands."""

    def __init__(self, launch: dict, commands: "queue.Queue[dict]"):
        import tensorflow as tf

        from syncswitch.hooks import graph as graphmod
        from syncswitch.hooks import script as scriptmod
        from syncswitch.hooks.session_hooks import TrainState

        self.tf = tf
        self.launch = launch
        self.commands = commands
        self.index = launch["task_index"]
        self.is_chief = self.index == 0
        intra, inter = launch.get("intra_threads", 1), launch.get("inter_threads", 2)
        self.cluster, self.ps_server, self.worker_server = graphmod.start_servers(
            launch["ps_hosts"], launch["worker_hosts"], self.index, intra, inter)
        module = scriptmod.load_script(launch["script_path"])
        workload = launch["workload"]
        ramps = any(p["config"].get("momentum_ramp_epochs") for p in launch["phases"])
        per_epoch = None
        if ramps or not workload.get("samples"):  # a samples workload asks the script only if it must
            per_epoch = scriptmod.num_train_examples(module, launch["script_path"], launch["params"])
        if workload.get("samples"):
            total = int(workload["samples"])
        else:
            if per_epoch is None:
                raise scriptmod.ScriptError(
                    f"script {launch['script_path']}: workload.epochs needs the script to define "
                    "num_examples(split, params); or give workload.samples")
            total = int(round(workload["epochs"] * per_epoch))
        launch["total_samples"] = total
        # Ramps are given in epochs; a script that cannot say its epoch size has its workload as one.
        self.samples_per_epoch = per_epoch or total
        self.g = graphmod.build(launch, module, self.cluster)
        self.state = TrainState(total, self.index)
        self.config = graphmod.session_config(launch["num_workers"], self.index, intra, inter)
        self._pending_config = None
        self._config_lock = threading.Lock()
        every = launch.get("eval_every") or 0
        self.eval_points = [round(k * every, 9) for k in range(1, int(1 / every) + 1)] if every else []
        self.eval_points = [p for p in self.eval_points if p < 1.0]
        self.checkpoint_dir = launch["checkpoint_dir"]
        self.batch_by_protocol = {p["protocol"]: p["config"]["per_worker_batch"] for p in launch["phases"]}
        if self.is_chief:
            self.state.marks = self.eval_points  # evaluation checkpoints land on exact counts
        self.delay_s = 0.0
        self.idle_requested = False
        self.reset_done = False
        self.restored_from = None

    # -- commands the hook asks about ------------------------------------------------------
    def pending_config(self):
        with self._config_lock:
            config, self._pending_config = self._pending_config, None
        return config

    def set_pending_config(self, config: dict) -> None:
        with self._config_lock:
            self._pending_config = config

    def apply_config(self, session, config: dict) -> None:
        g = self.g
        ramp = float(config.get("momentum_ramp_epochs") or 0.0) * self.samples_per_epoch
        session.run([g.set_lr, g.set_momentum, g.set_ramp],
                    {g.lr_in: config["learning_rate"], g.momentum_in: config["momentum"], g.ramp_in: ramp})

    def on_step(self, session) -> None:
        if self.delay_s:
            time.sleep(self.delay_s)
        if not self.is_chief:
            return
        fraction = self.state.fraction
        due = [p for p in self.eval_points if p <= fraction]
        if due:
            self.eval_points = [p for p in self.eval_points if p > fraction]
            self.state.marks = self.eval_points
            t0 = time.perf_counter()
            path = self.save(session)
            # Checkpointing for the evaluator is syncswitch's own cost, not the chief being slow:
            # keep it out of the busy time the straggler detector compares.
            self.state.last_wait_s += time.perf_counter() - t0
            emit({"event": "checkpoint", "path": path, "fraction": fraction, "samples": self.state.samples})

    def save(self, session) -> str:
        step = session.run(self.g.global_step)
        return self.g.saver.save(session, os.path.join(self.checkpoint_dir, "model.ckpt"), global_step=step,
                                 write_meta_graph=False)

    def variable_digests(self, session) -> dict:
        """SHA-256 of every checkpointed variable's value: lets tests prove a restore is exact."""
        import hashlib

        variables = self.g.graph.get_collection(self.tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)
        values = session.run(variables)
        return {v.op.name: hashlib.sha256(repr((a.dtype.str, a.shape)).encode() + a.tobytes()).hexdigest()
                for v, a in zip(variables, values)}

    def reset_after_warm_up(self, session) -> None:
        """Undo the warm-up steps (every worker has reported ready): restore or re-initialize."""
        self.reset_done = True
        if self.restored_from:
            self.g.saver.restore(session, self.restored_from)
        else:
            session.run(self.g.scaffold.init_op)

    def pause(self, session, initial: bool = False, idle: bool = False) -> bool:
        """Block at a phase boundary handling commands; True to resume, False to stop.

        `idle`: the elastic policy took this worker out of the synchronous group; it waits here
        until told to `resume`, or to `join` the others at the phase boundary.
        """
        g, state = self.g, self.state
        if initial:
            for protocol, engine in g.engines.items():
                state.protocol = protocol
                self.runner.warm_up(engine)
            state.protocol = None
        if idle:
            self.runner.push_only(g.engines[state.protocol])
            emit({"event": "idle", "phase": state.phase, "fraction": state.fraction, "samples": state.samples})
        elif initial:
            samples, step = session.run([g.samples, g.global_step])
            state.samples = int(samples)
            # Counts here include warm-up steps; the chief's `entered` reports them after the reset.
            emit({"event": "ready", "samples": state.samples, "fraction": state.fraction,
                  "total_samples": state.total, "global_step": int(step)})
        else:
            emit({"event": "paused", "phase": state.phase, "fraction": state.fraction, "samples": state.samples,
                  "phase_steps": state.phase_steps})
        while True:
            cmd = self.commands.get()
            kind = cmd["cmd"]
            if kind == "stop":
                return False
            if kind == "resume":
                if idle:
                    emit({"event": "resumed", "phase": state.phase})
                    return True
                continue  # it reached the boundary before the command: nothing to resume
            if kind == "join":
                if idle:
                    idle = False
                    state.samples = int(session.run(g.samples))
                    emit({"event": "paused", "phase": state.phase, "fraction": state.fraction,
                          "samples": state.samples, "phase_steps": state.phase_steps})
                continue
            if kind == "enter_phase":
                entered = {"event": "entered", "phase": cmd["phase"]}
                if not self.reset_done:
                    self.reset_after_warm_up(session)
                    if self.launch.get("report_variables"):
                        entered["variables"] = self.variable_digests(session)
                self.apply_config(session, cmd["config"])
                g.engines[cmd["protocol"]].enter_chief(session)
                lr, momentum, now, samples = session.run([g.learning_rate, g.momentum, g.momentum_now,
                                                          g.samples])
                emit(dict(entered, learning_rate=float(lr), momentum=float(momentum),
                          momentum_now=float(now), samples=int(samples),
                          fraction=int(samples) / state.total))
            elif kind == "save":
                path = self.save(session)
                samples = int(session.run(g.samples))
                saved = {"event": "saved", "path": path, "reason": cmd.get("reason", ""),
                         "fraction": samples / state.total, "samples": samples}
                if self.launch.get("report_variables"):
                    saved["variables"] = self.variable_digests(session)
                emit(saved)
            elif kind == "go":
                self.idle_requested = False  # an idle request that met the boundary ends with the phase
                state.protocol = cmd["protocol"]
                state.phase = cmd["phase"]
                state.boundary = cmd["until"]
                state.phase_steps = 0
                state.unread_steps = 0
                state.samples = int(session.run(g.samples))  # after the warm-up reset, before estimating
                state.stride = (self.batch_by_protocol[state.protocol] * self.launch["num_workers"]
                                if state.protocol == "asp" else 0)
                g.engines[state.protocol].enter_worker(session)
                return True
            else:
                emit({"event": "error", "message": f"command {kind!r} is not valid while paused"})

    # -- the loop -------------------------------------------------------------------------
    def run(self) -> int:
        from syncswitch.hooks.session_hooks import ControlHook, HookList, MetricsHook
        from syncswitch.hooks.step_loop import StepRunner

        v1 = self.tf.compat.v1
        g = self.g
        metrics = MetricsHook(self.state, g.engines, g.loss, emit, window=self.launch.get("window", 20),
                              interval_s=self.launch.get("metrics_interval_s", 0.5),
                              batch_by_protocol=self.batch_by_protocol)
        control = ControlHook(self.state, self)
        hooks = HookList([metrics, control])
        with g.graph.as_default():
            hooks.begin()
            creator = _session_creator(self.is_chief, g.scaffold, self.worker_server.target, self.config,
                                       self.checkpoint_dir)
            if self.is_chief:
                # The session creator restores this checkpoint; the warm-up reset restores it again.
                self.restored_from = v1.train.latest_checkpoint(self.checkpoint_dir)
            session = creator.create_session()
            hooks.after_create_session(session, None)
            self._raw_session = session
            runner = self.runner = StepRunner(session, hooks, self.state)
            if not self.pause(session, initial=True):
                return 0
            while runner.step(g.engines[self.state.protocol]):
                pass
        if self.state.diverged_loss is not None:
            emit({"event": "diverged", "loss": self.state.diverged_loss, "fraction": self.state.fraction,
                  "worker": self.index})
            return 3
        return 0


def _session_creator(is_chief, scaffold, master, config, checkpoint_dir):
    """Session creators whose session managers poll readiness every 0.1 s instead of 30 s."""
    import tensorflow as tf

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


def _read_commands(task_holder: dict, commands: "queue.Queue[dict]") -> None:
    """Reader thread: commands that must not wait for a step boundary run here."""
    for line in sys.stdin:
        try:
            cmd = json.loads(line)
        except json.JSONDecodeError:
            emit({"event": "error", "message": f"unreadable command {line[:80]!r}"})
            continue
        task = task_holder.get("task")
        kind = cmd.get("cmd")
        if kind == "release" and task is not None:
            # A worker blocked inside a BSP step cannot see commands: free it from here.
            session = getattr(task, "_raw_session", None)
            engine = task.g.engines.get("bsp")
            if session is not None and engine is not None:
                engine.release(session)
        elif kind == "set_config" and task is not None:
            task.set_pending_config(cmd["config"])
        elif kind == "set_delay" and task is not None:
            task.delay_s = float(cmd.get("delay_s", 0.0))
        elif kind == "set_group" and task is not None:
            # Elastic policy: the chief aggregates fewer gradients from now on, mid-phase.
            task.g.engines["bsp"].set_group(task._raw_session, cmd["size"])
            emit({"event": "group", "size": cmd["size"]})
        elif kind == "idle" and task is not None:
            task.idle_requested = True
        elif kind == "set_boundary" and task is not None:
            # A policy ends the running phase early: pause once progress reaches `until`.
            if task.state.phase == cmd["phase"]:
                task.state.boundary = float(cmd["until"])
        else:
            commands.put(cmd)
    commands.put({"cmd": "stop"})  # agent went away


def main() -> None:
    os.nice(int(os.environ.get("SYNCSWITCH_NICE", "0")))
    import tensorflow as tf  # noqa: F401 - warm the import before the launch request arrives

    tf.compat.v1.disable_eager_execution()
    emit({"event": "warm", "pid": os.getpid()})
    line = sys.stdin.readline()
    if not line:
        os._exit(0)
    launch = json.loads(line)
    try:
        os.setpriority(os.PRIO_PROCESS, 0, 0)  # a niced spare now trains: back to normal priority
    except OSError:
        pass  # lowering niceness needs privileges; it then trains at the spare's priority
    commands: "queue.Queue[dict]" = queue.Queue()
    holder: dict = {}
    threading.Thread(target=_read_commands, args=(holder, commands), daemon=True).start()
    code = 1
    try:
        from syncswitch.errors import SyncSwitchError

        task = Task(launch, commands)
        holder["task"] = task
        code = task.run()
    except SyncSwitchError as exc:
        emit({"event": "error", "message": str(exc), "kind": type(exc).__name__})
        code = exc.exit_code
    except Exception as exc:  # noqa: BLE001 - anything else is reported in one line, traceback to the log
        traceback.print_exc()
        emit({"event": "error", "message": f"{type(exc).__name__}: {exc}".splitlines()[0][:500]})
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
