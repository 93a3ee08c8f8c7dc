"""The parallel actuator that fans a call out to every node agent."""

from __future__ import annotations

import threading
from concurrent import futures

from syncswitch.wire.client import AgentClient


class Actuator:
    """Delivers one call to many agents in parallel (paper Table III: 3.1x faster than sequential)."""

    def __init__(self, clients: list[AgentClient], max_workers: int = 64):
        self.clients = clients
        self._pool = futures.ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(clients))),
                                                thread_name_prefix="actuator")

    def map(self, fn, clients: list[AgentClient] | None = None) -> list:
        """fn(client) on every client at once; the first failure is raised after all have finished."""
        targets = self.clients if clients is None else clients
        pending = [self._pool.submit(fn, c) for c in targets]
        # Sleep until the last call ends, woken once: waiting on each future in turn woke this thread (and
        # handed it the GIL) once per call still running. Done callbacks also fire for calls that close()
        # cancels, so a map racing close() still returns (futures.wait would not count those as done).
        left, lock, finished = [len(pending)], threading.Lock(), threading.Event()

        def one_done(_future) -> None:
            with lock:
                left[0] -= 1
                if left[0] == 0:
                    finished.set()

        for future in pending:
            future.add_done_callback(one_done)
        if pending:
            finished.wait()
        results, error = [], None
        for future in pending:
            try:
                results.append(future.result())
            except Exception as exc:  # noqa: BLE001 - collected, the first is re-raised
                results.append(None)
                error = error or exc
        if error is not None:
            raise error
        return results

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
