"""The run's evaluator: a separate low-priority process that scores checkpoints, the most recently written first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

from syncswitch.cluster_manager.checkpoint_copies import CheckpointShipper
from syncswitch.cluster_manager.events import EVALUATOR
from syncswitch.cluster_manager.record import EvaluationResult
from syncswitch.wire import agent_pb2 as pb
from syncswitch.wire import codec
from syncswitch.wire.forkclient import ForkedProcess

EVALUATOR_MODULE = "syncswitch.node.evaluator"


def start_evaluator_process(config: pb.EvaluatorConfig, log_path: str, module: str = EVALUATOR_MODULE,
                            fork_server: str | None = None):
    """The evaluator as a separate process; it lowers its priority once imported (it must not slow training).
    Forked from `fork_server` where the backend runs one on this machine: it then starts with TensorFlow imported."""
    env = dict(os.environ, SYNCSWITCH_NICE="5", SYNCSWITCH_IDLE="1")
    with open(log_path, "ab") as log:
        if fork_server and module == EVALUATOR_MODULE:
            proc = ForkedProcess(fork_server, "evaluator", cwd=os.getcwd(), env=env, stderr_fd=log.fileno())
        else:
            proc = subprocess.Popen([sys.executable, "-u", "-m", module], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=log, text=True, bufsize=1,
                                    start_new_session=True, env=env)
    proc.stdin.write(codec.encode(config) + "\n")
    proc.stdin.flush()
    return proc


def usable_cores() -> int:
    """The cores this process may run on (the evaluator's machine is the manager's)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class Evaluations:
    """Hands checkpoints to the evaluator and collects its results.

    The process starts with the nodes' tasks and imports TensorFlow beside them (`open`): started at the
    first step instead, its import took the CPU from the first synchronous phase (the quickstart's BSP
    throughput was 0.65x a bare loop's on 4 workers) and its first result came only after the switch,
    which left the guard blind. Checkpoints written before training starts (`start`) wait. Without a shared
    filesystem each checkpoint is first copied from the chief, on the shipper's thread. The evaluator scores
    the newest first (syncswitch/node/eval_queue.py), so results can arrive out of order.

    Deferring (`evaluation.live`): a checkpoint submitted as not needed live waits here, unsent, until `release`
    (the guard starts watching and needs the scores before, training paused for a repair, the last step ran).
    Its evaluation keeps the time of its checkpoint, so the accuracy curve and time to accuracy are the same;
    only when the score is known moves. Measured on the synthetic ResNet (4 workers on 2 cores): scoring beside
    training slowed every worker's step by 20-30 ms, although the evaluator runs in the idle scheduling class.
    """

    def __init__(self, spec, run_dir: str, feed, start_process=start_evaluator_process):
        self.spec = spec
        self.run_dir = run_dir
        self.feed = feed
        self.start_process = start_process
        self.proc: subprocess.Popen | None = None
        self.results: list[EvaluationResult] = []
        self._outstanding: dict[str, float] = {}  # checkpoints (as the task reported them) still to be scored
        self._abandoned: set[str] = set()       # checkpoints of branches a rollback gave up
        self._submitted: dict[str, float] = {}  # path -> fraction, of the running branch
        self._copies: dict[str, str] = {}       # local copy -> the chief's path (no shared filesystem)
        self.t0: float | None = None          # evaluation times count from the first training step
        self._early: list[tuple[str, float, float]] = []
        self._sent: dict[str, str] = {}         # the chief's path -> the local copy the evaluator was sent
        self._write_lock = threading.Lock()     # requests come from the shipper's thread, cancels from the job's
        self._shipper: CheckpointShipper | None = None
        self.input_closed = False  # after it, the process's exit is expected
        self.defer = False  # checkpoints not needed live wait for `release` (evaluation.live)
        self._deferred: list[tuple[str, float, float]] = []  # (path, fraction, time), in the order written
        self.deferred_total = 0  # checkpoints that waited for a release, over the run
        self.releases: list[dict] = []  # when the held checkpoints went to the evaluator, and why
        self.held_again: list[dict] = []  # when sent ones not yet scored were held back again, and why
        self._times: dict[str, float] = {}  # path -> the wall time of its checkpoint, of those sent

    def set_live(self, live: str, nodes_beside: bool) -> bool:
        """Apply `evaluation.live` for a cluster whose nodes do (`nodes_beside`) or do not share the evaluator's
        machine; True where checkpoints not needed live are now deferred."""
        self.defer = live == "watched" or (live == "auto" and nodes_beside)
        return self.defer

    def open(self, fork_server: str | None = None) -> None:
        """Start the process: it imports TensorFlow while the nodes do (or is forked from `fork_server` with it
        imported), so it is ready for the first checkpoint."""
        if self.proc is not None:
            return
        spec = self.spec
        config = pb.EvaluatorConfig(script_path=spec.script, params_json=json.dumps(spec.params),
                                    batch_size=spec.evaluation.batch_size, threads=1)
        where = {"fork_server": fork_server} if fork_server else {}
        self.proc = self.start_process(config, os.path.join(self.run_dir, "evaluator.log"), **where)
        self.feed.follow_process(EVALUATOR, self.proc)

    def start(self, t0: float, chief=None) -> None:
        """Training began at `t0`; `chief` (a node client) when checkpoints must be fetched from the chief."""
        self.open()
        self.t0 = t0
        if chief is not None:
            self._shipper = CheckpointShipper(chief, os.path.join(self.run_dir, "checkpoints"),
                                              on_error=self._shipping_failed)
        early, self._early = self._early, []
        for item in early:
            self.submit(*item)

    def submit(self, path: str, fraction: float, time: float, live: bool = True) -> None:
        """Score the checkpoint at `path`, written at `fraction` of the workload at wall time `time`; one not
        needed `live` waits for `release` where deferring is on."""
        if not live and self.defer:
            self._deferred.append((path, fraction, time))
            self.deferred_total += 1
            return
        if self.t0 is None:
            self._early.append((path, fraction, time))
            return
        if self.proc.poll() is not None:
            return  # it has exited; its exit event reaches the feed
        request = pb.EvaluateRequest(path=path, fraction=min(fraction, 1.0), time_s=time - self.t0)
        self._outstanding[path] = fraction
        self._submitted[path] = fraction
        self._times[path] = time
        if path in self._sent:  # copied before, then held back again: the copy is still here
            request.path = self._sent[path]
            self._write(request)
            return
        if self._shipper is None:
            self._write(request)
            return

        def deliver(local_path: str) -> None:
            self._copies[local_path] = path
            self._sent[path] = local_path
            if path in self._outstanding:  # not cancelled while it was being copied
                request.path = local_path
                self._write(request)

        self._shipper.ship(path, deliver)

    def _write(self, request: pb.EvaluateRequest) -> None:
        try:
            with self._write_lock:
                self.proc.stdin.write(codec.encode(request) + "\n")
                self.proc.stdin.flush()
        except (OSError, ValueError):
            pass  # the evaluator has exited; its exit event reaches the feed

    def _shipping_failed(self, message: str) -> None:
        self.feed.put(EVALUATOR, codec.event(error=pb.TaskError(message=message)))

    def release(self, why: str = "") -> int:
        """Send every deferred checkpoint to the evaluator (the newest is scored first); returns how many. `why`
        (the moment: a watched phase starts, a kept trial, a repair, the end) goes into summary.json."""
        deferred, self._deferred = self._deferred, []
        for path, fraction, time in deferred:
            self.submit(path, fraction, time)
        if deferred and why:
            self.releases.append({"why": why, "checkpoints": len(deferred)})
        return len(deferred)

    def hold_again(self, why: str) -> int:
        """The run left the watched phase (a fall-back to a phase nobody acts on live): the checkpoints sent and
        not yet scored are cancelled at the evaluator and held again until the next release, each with its own
        time; returns how many. Scored beside the phase that follows, they would only slow it."""
        if not self.defer:
            return 0
        held = [(path, fraction, self._times[path]) for path, fraction in self._outstanding.items()]
        for path, _, _ in held:
            del self._outstanding[path]
            if self._shipper is None or path in self._sent:
                self._write(pb.EvaluateRequest(path=self._sent.get(path, path), cancel=True))
        # In the order written, after any still held: a release sends them oldest first, the evaluator takes the
        # newest first.
        self._deferred = sorted(self._deferred + held, key=lambda d: d[1])
        if held:
            self.held_again.append({"why": why, "checkpoints": len(held)})
        return len(held)

    def widen(self, cores: int | None = None) -> int:
        """Training has ended: the evaluator may score as many checkpoints at once as this machine has `cores`
        (default: those this process may use), at most as many as are pending; returns that number."""
        cores = cores or usable_cores()
        scorers = min(cores, self.pending)
        if self.proc is None or scorers <= 1 or self.proc.poll() is not None:
            return scorers
        request = pb.EvaluateRequest(scorers=scorers)
        if self._shipper is not None:  # after the checkpoints still being copied: the evaluator widens for those
            self._shipper.then(lambda: self._write(request))
        else:
            self._write(request)
        return scorers

    @property
    def pending(self) -> int:
        """Checkpoints submitted and neither scored nor cancelled (deferred ones not counted)."""
        return len(self._outstanding)

    @property
    def deferred(self) -> int:
        """Checkpoints waiting for a release."""
        return len(self._deferred)

    def cancel_after(self, fraction: float) -> None:
        """Drop the queued checkpoints written after `fraction` (the guard condemned them: a rollback goes to
        one at or before it), so the evaluator scores the rollback's candidates next, not the dead branch."""
        self._deferred = [d for d in self._deferred if d[1] <= fraction]
        for path, at in list(self._outstanding.items()):
            if at > fraction:
                del self._outstanding[path]
                if self._shipper is None or path in self._sent:
                    self._write(pb.EvaluateRequest(path=self._sent.get(path, path), cancel=True))

    def on_evaluation(self, evaluation: pb.Evaluation) -> EvaluationResult | None:
        """The result as a record, or None for a checkpoint of an abandoned branch."""
        written = self._copies.get(evaluation.checkpoint, evaluation.checkpoint)
        self._outstanding.pop(written, None)  # scored while its cancel was on the way: already not pending
        if any(r.written == written for r in self.results):
            return None  # held back again while being scored, sent again, scored twice: the first counts
        # Scored while being held back again: not to be scored twice.
        self._deferred = [d for d in self._deferred if d[0] != written]
        if written in self._abandoned:
            return None
        result = EvaluationResult.from_event(evaluation, written)
        self.results.append(result)
        return result

    def written(self, checkpoint: str) -> str:
        """The path the task reported for the checkpoint the evaluator read at `checkpoint`."""
        return self._copies.get(checkpoint, checkpoint)

    def abandon_after(self, fraction: float) -> list[EvaluationResult]:
        """A rollback to `fraction`: later checkpoints, scored or not, leave the run's results."""
        self.cancel_after(fraction)
        self._abandoned |= {p for p, f in self._submitted.items() if f > fraction}
        self._submitted = {p: f for p, f in self._submitted.items() if f <= fraction}
        gone = [r for r in self.results if r.written in self._abandoned]
        self.results = [r for r in self.results if r.written not in self._abandoned]
        return gone

    def summary(self) -> dict:
        """summary.json's record of when the checkpoints were scored."""
        return {"evaluation_live": {"setting": self.spec.evaluation.live, "deferred": self.defer,
                                    "scored_after_a_pause": self.deferred_total, "releases": self.releases,
                                    "held_again": self.held_again}}

    def close_input(self) -> None:
        """No more checkpoints: the process ends after the last one (after those still being copied)."""
        self.input_closed = True
        if self.proc is None:
            return
        if self._shipper is not None:
            self._shipper.then(self.proc.stdin.close)
        else:
            self.proc.stdin.close()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
