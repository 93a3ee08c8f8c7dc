"""A deterministic fake cluster for lifecycle tests: fake agents whose tasks step in ticks, without TensorFlow.

The fake speaks the real wire messages: the manager launches, commands and reads events exactly as
it does with real agents. Progress is one shared sample counter; each node adds its batch per tick,
so a phase ends when the counter reaches the phase's boundary, as with real tasks.
"""

from __future__ import annotations

import dataclasses
import os
import queue
import subprocess
import sys
import threading
import time

from syncswitch.backends.base import Backend, ClusterInfo, NodeInfo
from syncswitch.errors import ClusterError
from syncswitch.wire import agent_pb2 as pb
from syncswitch.wire import codec, saved

LOST = "lost"  # in a node's event queue: its agent died, the stream breaks
FAKE_EVALUATOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_evaluator.py")


@dataclasses.dataclass
class Failure:
    """Make `worker` report `kind` once progress reaches `at`: "exit" (its task died), "diverged", "error"
    (the task raised), "agent" (its agent died: the event stream breaks), or "hang" (its task stops stepping and
    says nothing more, alive; the others go on). `phase`: only in that phase (at its first step, with `at` 0)."""

    worker: int
    at: float
    kind: str = "exit"
    phase: int | None = None


class _Node:
    def __init__(self, index: int):
        self.index = index
        self.events: "queue.Queue[pb.Event | None]" = queue.Queue()
        self.launches: list[pb.Launch] = []
        self.tasks_stopped = 0  # StopTask calls: a relaunch stops every old task before launching any
        self.phase = -1
        self.protocol = ""
        self.until = 0.0
        self.running = False
        self.local_steps = 0
        self.phase_steps = 0
        self.busy_s = 0.0
        self.delay_s = 0.0
        self.idle = False
        self.seq = 0
        self.commands: list[str] = []
        self.protocol_params: list[tuple[str, str, dict]] = []  # (command, protocol, params) of enter_phase and go


class FakeCluster:
    """Nodes sharing one sample counter of `total` samples; every node adds `batch` per tick of `tick_s`."""

    def __init__(self, total: int = 2000, batch: int = 10, tick_s: float = 0.002,
                 failure: Failure | list[Failure] | None = None, slow: dict[int, float] | None = None, loss=None,
                 rates: dict[str, float] | None = None):
        self.total = total
        self.batch = batch
        self.tick_s = tick_s
        self.failures = list(failure) if isinstance(failure, list) else [failure] if failure else []
        self.replaced: list[int] = []
        self.on_failure = None               # on_failure(failure) as it strikes (a test's cloud-side effect)
        self.slow = slow or {}               # worker -> share of the ticks it steps in (0.5: half speed)
        self.loss = loss or (lambda fraction, protocol: 1.0 - 0.5 * fraction)
        # protocol -> factor on the throughput its workers report (the speed rule's input); the ticks stay as they are
        self.rates = rates or {}
        self.checkpoint_name = "model.ckpt"
        self.restores: list[str] = []
        self.shared_filesystem = True
        self.clients: list[FakeClient] = []
        self.samples = 0
        self.nodes: list[_Node] = []
        self.lock = threading.RLock()
        self.saves: list[str] = []
        self.eval_points: list[float] = []
        self.periodic: set[float] = set()
        self.torn_down = False
        # From a death until the next launch nobody steps. A manager notices a death and stops the survivors in
        # milliseconds, while a real checkpoint interval lasts minutes; here an interval is 50 ms of ticks, so on a
        # loaded machine the survivors reached the next checkpoint before the manager acted, and which checkpoint
        # a recovery or a resume found depended on the scheduler.
        self.held = False
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    # -- the backend side ----------------------------------------------------------------------
    def start(self, count: int) -> list[NodeInfo]:
        self.nodes = [_Node(i) for i in range(count)]
        self._ticker = threading.Thread(target=self._tick_loop, daemon=True)
        self._ticker.start()
        return [NodeInfo(i, "127.0.0.1", f"fake:{i}", 0, 0, resource_id=f"fake-{i}") for i in range(count)]

    def stop(self) -> None:
        self._stop.set()
        for node in self.nodes:
            node.events.put(None)

    def connect(self, index: int, address: str, token: str) -> "FakeClient":
        client = FakeClient(self, index)
        self.clients.append(client)
        return client

    # -- what a node's task does -------------------------------------------------------------
    def emit(self, node: _Node, **member) -> None:
        event = codec.event(**member)
        event.seq = node.seq
        node.seq += 1
        node.events.put(event)

    @property
    def fraction(self) -> float:
        return self.samples / self.total

    def launch(self, index: int, launch: pb.Launch) -> None:
        with self.lock:
            node = self.nodes[index]
            node.launches.append(launch)
            node.running = False
            self.held = False
            self.checkpoint_name = launch.checkpoint_name or "model.ckpt"
            if launch.restore_from:
                self._restore(launch.restore_from)
            if index == 0:
                self._set_points(launch)
            self.emit(node, ready=pb.Ready(samples=self.samples, fraction=self.fraction, total_samples=self.total))

    def command(self, index: int, cmd: pb.Command) -> None:
        name = codec.kind(cmd)
        with self.lock:
            node = self.nodes[index]
            node.commands.append(name)
            if name in ("enter_phase", "go"):
                member = getattr(cmd, name)
                protocol = member.config.protocol if name == "enter_phase" else member.protocol
                node.protocol_params.append((name, protocol, codec.from_struct(member.params)))
            if name == "enter_phase":
                c = cmd.enter_phase.config
                self.emit(node, entered=pb.Entered(phase=cmd.enter_phase.phase, learning_rate=c.learning_rate,
                                                   momentum=c.momentum, momentum_now=c.momentum,
                                                   samples=self.samples, fraction=self.fraction))
            elif name == "go":
                node.phase, node.protocol, node.until = cmd.go.phase, cmd.go.protocol, cmd.go.until
                node.phase_steps, node.running, node.idle = 0, True, False
            elif name == "restore":
                self.checkpoint_name = cmd.restore.checkpoint_name
                self._restore(cmd.restore.path)
                self.emit(node, restored=pb.Restored(path=cmd.restore.path, samples=self.samples,
                                                     fraction=self.fraction))
            elif name == "save":
                path = self._path(saved.KINDS.get(cmd.save.reason, "periodic"))
                self.saves.append(path)
                self.emit(node, saved=pb.Saved(path=path, reason=cmd.save.reason, fraction=self.fraction,
                                               samples=self.samples))
            elif name == "set_boundary":
                if node.phase == cmd.set_boundary.phase:
                    node.until = cmd.set_boundary.until
            elif name == "set_delay":
                node.delay_s = cmd.set_delay.delay_s
            elif name == "idle":
                node.idle = True
                node.running = False
                self.emit(node, idled=pb.Idled(phase=node.phase, fraction=self.fraction, samples=self.samples))
            elif name == "join":
                self.emit(node, paused=pb.Paused(phase=node.phase, fraction=self.fraction, samples=self.samples,
                                                 phase_steps=node.phase_steps))
            elif name == "set_group":
                self.emit(node, group_changed=pb.GroupChanged(size=cmd.set_group.size))

    def _path(self, kind: str = "periodic") -> str:
        """A checkpoint's path in the launch's checkpoint folder, with an index, a data file and the chief's
        record (syncswitch/wire/saved.py) like a real chief's."""
        folder = self.nodes[0].launches[-1].checkpoint_dir if self.nodes[0].launches else ""
        if not folder:
            return f"/fake/{self.checkpoint_name}-{self.samples}"
        path = os.path.join(folder, f"{self.checkpoint_name}-{self.samples}")
        os.makedirs(folder, exist_ok=True)
        for suffix in (".data-00000-of-00001", ".index"):
            with open(path + suffix, "w") as fh:
                fh.write(str(self.samples))
        saved.write(path, self.samples, self.fraction, kind)
        return path

    def replace(self, index: int) -> NodeInfo:
        """A new agent for node `index`: a fresh node whose stream a new client reads."""
        with self.lock:
            self.nodes[index] = _Node(index)
            self.replaced.append(index)
        return NodeInfo(index, "127.0.0.1", f"fake:{index}:{len(self.replaced)}", 0, 0, resource_id=f"fake-{index}")

    def _restore(self, path: str) -> None:
        self.restores.append(path)
        self.samples = int(path.rsplit("-", 1)[1])
        if self.nodes[0].launches:
            self._set_points(self.nodes[0].launches[-1])

    def _set_points(self, launch: pb.Launch) -> None:
        """The chief's checkpoint points ahead: evaluation ones, and durable ones (launch.checkpoint_every)."""
        def points(every):
            return {round(k * every, 9) for k in range(1, int(1 / every) + 1)} if every else set()

        self.periodic = points(launch.checkpoint_every) - points(launch.eval_every)
        self.eval_points = sorted(p for p in points(launch.eval_every) | self.periodic if 1.0 > p > self.fraction)

    def _tick_loop(self) -> None:
        tick = 0
        while not self._stop.wait(self.tick_s):
            tick += 1
            with self.lock:
                for node in self.nodes:
                    if node.running and not self.held and self._steps(node, tick):
                        self._step(node)

    def _steps(self, node: _Node, tick: int) -> bool:
        share = self.slow.get(node.index, 1.0)
        return int(tick * share) != int((tick - 1) * share)

    def _step(self, node: _Node) -> None:
        due = [f for f in self.failures if self.fraction >= f.at and node.index == f.worker
               and f.phase in (None, node.phase)]
        if due:
            failure = due[0]
            self.failures.remove(failure)
            node.running = False
            if self.on_failure is not None:
                self.on_failure(failure)
            # A divergence is no death (the task waits at a boundary); a hang is not noticed by the others.
            self.held = failure.kind not in ("diverged", "hang")
            if failure.kind == "hang":
                return
            if failure.kind == "agent":
                node.events.put(LOST)
                return
            if failure.kind == "diverged":  # the task reports it and waits at a boundary
                self.emit(node, diverged=pb.Diverged(loss=float("nan"), fraction=self.fraction, worker=node.index,
                                                     phase=node.phase))
                self.emit(node, paused=pb.Paused(phase=node.phase, fraction=self.fraction, samples=self.samples,
                                                 phase_steps=node.phase_steps))
                return
            if failure.kind == "error":
                self.emit(node, error=pb.TaskError(message="simulated failure"))
            self.emit(node, exit=pb.TaskExit(code=-9 if failure.kind == "exit" else 3))
            return
        self.samples += self.batch
        node.local_steps += 1
        node.phase_steps += 1
        node.busy_s += self.tick_s / self.slow.get(node.index, 1.0)
        if node.phase_steps == 1:
            self.emit(node, first_step=pb.FirstStep(phase=node.phase, protocol=node.protocol, fraction=self.fraction))
        self.emit(node, metrics=pb.Metrics(worker=node.index, protocol=node.protocol, phase=node.phase,
                                           samples=self.samples, fraction=self.fraction,
                                           local_steps=node.local_steps, step_time_s=self.tick_s,
                                           examples_per_s=self.batch / self.tick_s * self.rates.get(node.protocol, 1),
                                           loss=self.loss(self.fraction, node.protocol),
                                           busy_s=node.busy_s))
        self._chief_saves()
        if self.samples >= node.until * self.total:
            node.running = False
            self.emit(node, paused=pb.Paused(phase=node.phase, fraction=self.fraction, samples=self.samples,
                                             phase_steps=node.phase_steps))


    def _chief_saves(self) -> None:
        """The running chief saves at the step, any worker's, that reaches a checkpoint point: at the point
        exactly (every step adds `batch` samples). Checked on the chief's steps alone, a save landed at the point
        or one step past it, by which node had stepped first since the last launch."""
        chief = self.nodes[0]
        crossed = [p for p in self.eval_points if p <= self.fraction]
        if not crossed or not chief.running:
            return
        self.eval_points = self.eval_points[len(crossed):]
        periodic = all(p in self.periodic for p in crossed)
        path = self._path("periodic" if periodic else "evaluation")
        if periodic:
            self.emit(chief, saved=pb.Saved(path=path, reason=pb.SAVE_REASON_PERIODIC, fraction=self.fraction,
                                            samples=self.samples))
        else:
            self.emit(chief, eval_checkpoint=pb.EvalCheckpoint(path=path, fraction=self.fraction,
                                                               samples=self.samples))


class FakeClient:
    """The AgentClient interface over a FakeCluster node."""

    def __init__(self, cluster: FakeCluster, index: int):
        self.cluster = cluster
        self.index = index

    def launch(self, script_name: str, source: bytes, launch: pb.Launch, bundle: bytes = b"") -> pb.LaunchTaskReply:
        self.shipped = (script_name, bundle)  # what the real agent would unpack
        self.cluster.launch(self.index, launch)
        return pb.LaunchTaskReply(pid=1)

    def control(self, command: pb.Command) -> None:
        self.cluster.command(self.index, command)

    def stop_task(self, grace_s: float = 2.0) -> int:
        with self.cluster.lock:
            node = self.cluster.nodes[self.index]
            node.running = False
            node.tasks_stopped += 1
        return 0

    def shutdown(self) -> None:
        self.cluster.nodes[self.index].events.put(None)

    def events(self, from_seq: int = 0):
        node = self.cluster.nodes[self.index]
        while True:
            event = node.events.get()
            if event is None:
                return
            if event is LOST:
                raise ClusterError(f"node {self.index}: agent stream lost (simulated)")
            yield event

    def close(self) -> None:
        pass


class FakeBackend(Backend):
    """Provisions a FakeCluster's nodes; records that it was torn down."""

    def __init__(self, cluster: FakeCluster):
        self.cluster = cluster

    def provision(self, request) -> ClusterInfo:
        return ClusterInfo(request.job_id, tuple(self.cluster.start(request.num_nodes)),
                           shared_filesystem=self.cluster.shared_filesystem)

    def replace_node(self, index: int) -> NodeInfo:
        return self.cluster.replace(index)

    def teardown(self) -> None:
        self.cluster.torn_down = True
        self.cluster.stop()


def start_fake_evaluator(config: pb.EvaluatorConfig, log_path: str) -> subprocess.Popen:
    """A real process that answers EvaluateRequests like the evaluator does, with accuracy = 0.5 + 0.4 * fraction."""
    with open(log_path, "ab") as log:
        proc = subprocess.Popen([sys.executable, "-u", FAKE_EVALUATOR], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=log, text=True, bufsize=1, start_new_session=True,
                                env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    proc.stdin.write(codec.encode(config) + "\n")
    proc.stdin.flush()
    return proc


def wait_for(predicate, timeout_s: float = 10.0) -> None:
    deadline = time.time() + timeout_s
    while not predicate():
        if time.time() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)
