"""The manager's merged event feed: one thread per agent stream and per local process, one queue of typed Events."""

from __future__ import annotations

import queue
import subprocess
import threading
import time

from syncswitch.errors import ClusterError, DivergedError, ScriptError, SpecError
from syncswitch.wire import agent_pb2 as pb
from syncswitch.wire import codec

EVALUATOR = "evaluator"
WATCH_EVERY_S = 1.0  # how often a wait asks whether a node went silent


class EventFeed:
    """Merges node and evaluator events; `wait_until` handles everything while waiting for a condition."""

    def __init__(self, handler, stall_timeout_s: float = 180.0):
        self.queue: queue.Queue[tuple[object, pb.Event, float]] = queue.Queue()
        self.handler = handler          # handler(source, event, received)
        self.stall_timeout_s = stall_timeout_s
        # watch(now) -> the loss of a node silent too long while the others go on (an exception), or None.
        self.watch = None
        self._watched = 0.0
        self._threads: list[threading.Thread] = []

    def put(self, source, event: pb.Event) -> None:
        self.queue.put((source, event, time.time()))

    def follow_agent(self, client) -> None:
        def pump():
            try:
                for event in client.events():
                    self.put(client.index, event)
            except ClusterError as exc:
                # Even in a relaunch or teardown: the handler knows (the run's TaskState) whether it may go away now.
                self.put(client.index, codec.event(node_lost=pb.NodeLost(message=str(exc))))

        self._start(pump, f"events-{client.index}")

    def follow_process(self, source, proc: subprocess.Popen) -> None:
        """Events a local process (the evaluator) writes on stdout, then its exit."""
        def pump():
            for line in proc.stdout:
                try:
                    self.put(source, codec.decode(line, pb.Event))
                except codec.WireError:
                    continue
            self.put(source, codec.event(exit=pb.TaskExit(code=proc.wait())))

        self._start(pump, f"events-{source}")

    def _start(self, target, name: str) -> None:
        thread = threading.Thread(target=target, daemon=True, name=name)
        thread.start()
        self._threads.append(thread)

    def wait_until(self, condition, what: str, timeout_s: float | None = None) -> None:
        """Handle events until `condition()` holds; fail on stalls, on a silent node (`watch`) and on `timeout_s`."""
        deadline = None if timeout_s is None else time.time() + timeout_s
        quiet_since = time.time()
        while not condition():
            now = self._watch(time.time())
            if deadline is not None and now >= deadline:
                raise WaitTimeout(f"timed out after {timeout_s:.0f} s waiting for {what}")
            if now - quiet_since >= self.stall_timeout_s:
                raise ClusterError(f"no event from any node for {self.stall_timeout_s:.0f} s while waiting "
                                   f"for {what}")
            wait = quiet_since + self.stall_timeout_s - now
            if deadline is not None:
                wait = min(wait, deadline - now)
            if self.watch is not None:
                wait = min(wait, WATCH_EVERY_S)
            try:
                source, event, received = self.queue.get(timeout=max(0.01, wait))
            except queue.Empty:
                continue
            quiet_since = time.time()
            self.handler(source, event, received)

    def _watch(self, now: float) -> float:
        """Ask `watch` (at most once a second) whether a node went silent; it raises that node's loss."""
        if self.watch is not None and now - self._watched >= WATCH_EVERY_S:
            self._watched = now
            failure = self.watch(now)
            if failure is not None:
                raise failure
        return now


class WaitTimeout(ClusterError):
    """`wait_until`'s own deadline passed (not a stall, not a node's failure): a caller may go on without."""


def raise_for_event(source, event: pb.Event, expected: bool, hint: str = "") -> None:
    """Turn a failure event of a node or the evaluator into the matching domain error; an exit or a lost agent is
    none where `expected` (a relaunch or teardown under way). `hint` ends a divergence's message."""
    name = codec.kind(event)
    who = "evaluator" if source == EVALUATOR else f"node {source}"
    if name == "diverged":
        d = event.diverged
        raise DivergedError(f"training diverged: worker {d.worker} saw loss {d.loss} "
                            f"at {d.fraction * 100:.1f}% of the workload{hint}")
    if name == "error":
        message = event.error.message or "unknown error"
        if event.error.kind == pb.ERROR_KIND_SCRIPT or message.startswith("script "):
            raise ScriptError(message)
        if event.error.kind == pb.ERROR_KIND_SPEC:
            raise SpecError(message)
        raise ClusterError(f"{who}: {message}")
    if name == "node_lost" and not expected:
        raise ClusterError(event.node_lost.message or f"{who}: agent lost")
    if name == "exit" and not expected:
        log = event.exit.log
        raise ClusterError(f"{who}: process exited unexpectedly with code {event.exit.code}"
                           + (f" (log: {log})" if log else ""))
