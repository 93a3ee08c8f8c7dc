"""Copies of a node's checkpoints for a manager that shares no filesystem with it, in the order they were written."""

from __future__ import annotations

import collections
import threading

from syncswitch.wire.client import AgentClient


class CheckpointShipper:
    """Copies a node's checkpoints into a local folder on a background thread, strictly in submission order.

    For clusters whose nodes share no filesystem with the manager: the event handler must not block on
    a copy, and the evaluator must see checkpoints in the order they were written. The thread exists only
    while work is queued.
    """

    def __init__(self, client: AgentClient, dest_dir: str, on_error):
        self.client = client
        self.dest_dir = dest_dir
        self.on_error = on_error        # called with a message when a copy fails
        self._items: collections.deque = collections.deque()
        self._lock = threading.Lock()
        self._busy = False

    def ship(self, prefix: str, deliver) -> None:
        """Copy the checkpoint at `prefix`, then call deliver(local_prefix)."""
        def run():
            try:
                local = self.client.fetch_checkpoint(prefix, self.dest_dir)
            except Exception as exc:  # noqa: BLE001 - reported to the manager's event loop
                self.on_error(f"cannot copy checkpoint {prefix} from node {self.client.index}: {exc}")
                return
            deliver(local)
        self._enqueue(run)

    def then(self, fn) -> None:
        """Call fn() once everything shipped so far has been delivered."""
        self._enqueue(fn)

    def _enqueue(self, fn) -> None:
        with self._lock:
            self._items.append(fn)
            if not self._busy:
                self._busy = True
                threading.Thread(target=self._drain, daemon=True, name="checkpoint-shipper").start()

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._items:
                    self._busy = False
                    return
                fn = self._items.popleft()
            try:
                fn()
            except Exception as exc:  # noqa: BLE001 - one failed step must not stall the ones queued after it
                self.on_error(f"checkpoint shipping: {type(exc).__name__}: {exc}")
