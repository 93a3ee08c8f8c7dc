"""The evaluator's queue of checkpoints: the most recently requested first, cancelled ones dropped.

The guard judges an asynchronous phase by its evaluations, so what it needs is the model as it is now. On a
loaded machine the evaluator falls behind training (measured on the synthetic ResNet on 2 cores: verdicts
about 35% of the workload arrived when training had reached 83%, and the rollback threw away 75% of it).
Scoring the newest checkpoint first keeps the guard current; the older ones are filled in afterwards, so
the accuracy curve is still complete when the run ends.
"""

from __future__ import annotations

import threading
from typing import IO

from syncswitch.wire import agent_pb2 as pb
from syncswitch.wire import codec


class RequestQueue:
    """Reads EvaluateRequest lines from `stream` on a thread; `next` gives the newest pending request. A request
    for more scorers (training ended) is handed to `on_scorers(n, waiting)` with the number of requests waiting,
    on the reader thread."""

    def __init__(self, stream: IO[str], on_scorers=None):
        self._pending: list[pb.EvaluateRequest] = []  # in the order requested
        self._on_scorers = on_scorers
        self._closed = False
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, args=(stream,), name="eval-requests", daemon=True)
        self._reader.start()

    def _read(self, stream: IO[str]) -> None:
        try:
            for line in stream:
                if line.strip():
                    self.put(codec.decode(line, pb.EvaluateRequest))
        finally:
            with self._changed:
                self._closed = True
                self._changed.notify_all()

    def put(self, request: pb.EvaluateRequest) -> None:
        if request.scorers:
            if self._on_scorers is not None:
                self._on_scorers(request.scorers, self.waiting)
            return
        with self._changed:
            if request.cancel:
                self._pending = [r for r in self._pending if r.path != request.path]
            else:
                self._pending.append(request)
            self._changed.notify_all()

    @property
    def waiting(self) -> int:
        """Requests not yet taken."""
        with self._changed:
            return len(self._pending)

    def next(self, timeout_s: float | None = None) -> pb.EvaluateRequest | None:
        """The most recently requested checkpoint not yet scored or cancelled; None once the input has ended
        and nothing is left (or after `timeout_s` with nothing to do)."""
        with self._changed:
            self._changed.wait_for(lambda: self._pending or self._closed, timeout=timeout_s)
            return self._pending.pop() if self._pending else None
