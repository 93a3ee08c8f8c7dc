"""The manager's merged event feed: one thread per agent stream and the evaluator, one queue, per-phase state."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time

from syncswitch.errors import ClusterError, DivergedError, ScriptError

EVALUATOR = "evaluator"


class EventFeed:
    """Merges node and evaluator events; `wait_until` handles everything while waiting for a condition."""

    def __init__(self, handler, stall_timeout_s: float = 180.0):
        self.queue: "queue.Queue[tuple[object, dict, float]]" = queue.Queue()
        self.handler = handler
        self.stall_timeout_s = stall_timeout_s
        self.stopping = False
        self._threads: list[threading.Thread] = []

    def follow_agent(self, client) -> None:
        def pump():
            try:
                for _, event in client.events():
                    self.queue.put((client.index, event, time.time()))
            except ClusterError as exc:
                if not self.stopping:
                    self.queue.put((client.index, {"event": "agent_lost", "message": str(exc)}, time.time()))

        thread = threading.Thread(target=pump, daemon=True, name=f"events-{client.index}")
        thread.start()
        self._threads.append(thread)

    def follow_process(self, source, proc: subprocess.Popen) -> None:
        def pump():
            for line in proc.stdout:
                try:
                    event = json.loads(line)
                except json.JSONDecodeError:
                    continue
                self.queue.put((source, event, time.time()))
            self.queue.put((source, {"event": "exit", "code": proc.wait()}, time.time()))

        thread = threading.Thread(target=pump, daemon=True, name=f"events-{source}")
        thread.start()
        self._threads.append(thread)

    def wait_until(self, condition, what: str, timeout_s: float | None = None) -> None:
        """Handle events until `condition()` holds; fail on stalls and on `timeout_s`."""
        deadline = None if timeout_s is None else time.time() + timeout_s
        while not condition():
            remaining = self.stall_timeout_s if deadline is None else min(self.stall_timeout_s, deadline - time.time())
            if remaining <= 0:
                raise ClusterError(f"timed out after {timeout_s:.0f} s waiting for {what}")
            try:
                source, event, received = self.queue.get(timeout=remaining)
            except queue.Empty:
                if deadline is not None and time.time() >= deadline:
                    raise ClusterError(f"timed out after {timeout_s:.0f} s waiting for {what}") from None
                raise ClusterError(f"no event from any node for {self.stall_timeout_s:.0f} s while waiting "
                                   f"for {what}") from None
            self.handler(source, event, received)

    def drain(self) -> None:
        while True:
            try:
                source, event, received = self.queue.get_nowait()
            except queue.Empty:
                return
            self.handler(source, event, received)


def raise_for_event(source, event: dict, stopping: bool) -> None:
    """Turn a failure event of a node or the evaluator into the matching domain error."""
    kind = event.get("event")
    who = "evaluator" if source == EVALUATOR else f"node {source}"
    if kind == "diverged":
        raise DivergedError(f"training diverged: worker {event.get('worker')} saw loss {event.get('loss')} "
                            f"at {event.get('fraction', 0) * 100:.1f}% of the workload")
    if kind == "error":
        message = event.get("message", "unknown error")
        if event.get("kind") == "ScriptError" or message.startswith("script "):
            raise ScriptError(message)
        raise ClusterError(f"{who}: {message}")
    if kind == "agent_lost" and not stopping:
        raise ClusterError(event.get("message", f"{who}: agent lost"))
    if kind == "exit" and not stopping:
        log = event.get("log")
        raise ClusterError(f"{who}: process exited unexpectedly with code {event.get('code')}"
                           + (f" (log: {log})" if log else ""))


def start_evaluator(config: dict, log_path: str) -> subprocess.Popen:
    """The evaluator as a separate, lower-priority process (it must not slow the training nodes)."""
    import os

    with open(log_path, "ab") as log:
        proc = subprocess.Popen([sys.executable, "-u", "-m", "syncswitch.cluster_manager.evaluator"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                text=True, bufsize=1, start_new_session=True,
                                env=dict(os.environ, SYNCSWITCH_NICE="5"))
    proc.stdin.write(json.dumps(config) + "\n")
    proc.stdin.flush()
    return proc
