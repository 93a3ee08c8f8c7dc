"""The evaluator's queue: the newest checkpoint first, cancelled ones dropped, the rest filled in after."""

from __future__ import annotations

import io
import os
import time

from syncswitch.node.eval_queue import RequestQueue
from syncswitch.wire import agent_pb2 as pb
from syncswitch.wire import codec


def _line(path, fraction=0.0, cancel=False):
    return codec.encode(pb.EvaluateRequest(path=path, fraction=fraction, cancel=cancel)) + "\n"


def test_newest_first_then_the_older_ones_and_cancels_get_no_turn():
    stream = io.StringIO(_line("a", 0.1) + _line("b", 0.2) + _line("c", 0.3) + _line("b", cancel=True))
    queue = RequestQueue(stream)
    assert [queue.next().path for _ in range(2)] == ["c", "a"]
    assert queue.next() is None  # the input ended and nothing is left


def test_a_request_that_arrives_while_one_is_scored_goes_next():
    read, write = os.pipe()
    with os.fdopen(read, "r") as rfile, os.fdopen(write, "w", buffering=1) as wfile:
        queue = RequestQueue(rfile)
        wfile.write(_line("old-1") + _line("old-2"))
        assert queue.next(timeout_s=5).path == "old-2"
        wfile.write(_line("new"))  # written while "old-2" was being scored
        deadline = time.time() + 5
        while not any(r.path == "new" for r in list(queue._pending)) and time.time() < deadline:
            time.sleep(0.01)  # the reader thread takes it in
        assert queue.next(timeout_s=5).path == "new"
        assert queue.next(timeout_s=5).path == "old-1"
        assert queue.next(timeout_s=0.05) is None  # nothing to do yet, input still open


def test_a_request_for_more_scorers_is_handed_over_and_queues_nothing():
    asked = []
    stream = io.StringIO(_line("a", 0.1) + codec.encode(pb.EvaluateRequest(scorers=2)) + "\n" + _line("b", 0.2))
    queue = RequestQueue(stream, on_scorers=lambda n, waiting: asked.append((n, waiting)))
    queue._reader.join(timeout=5)  # every line read before any is taken
    assert [queue.next().path for _ in range(2)] == ["b", "a"] and queue.next() is None
    assert asked == [(2, 1)]  # with the one request waiting then
