"""The manager's side of the evaluator queue: what is pending, and cancelling the checkpoints a rollback drops."""

from __future__ import annotations

import io
import types

from syncswitch.cluster_manager.evaluation import Evaluations
from syncswitch.wire import agent_pb2 as pb
from syncswitch.wire import codec


class _Proc:
    def __init__(self):
        self.stdin = io.StringIO()

    def poll(self):
        return None

    def requests(self):
        return [codec.decode(line, pb.EvaluateRequest) for line in self.stdin.getvalue().splitlines()]


def _evaluations():
    proc = _Proc()
    spec = types.SimpleNamespace(script="s.py", params={}, evaluation=types.SimpleNamespace(batch_size=10))
    feed = types.SimpleNamespace(follow_process=lambda source, process: None)
    evaluations = Evaluations(spec, "/tmp", feed, start_process=lambda config, log: proc)
    evaluations.start(t0=0.0)
    for i, fraction in enumerate((0.2, 0.3, 0.4, 0.5)):
        evaluations.submit(f"ckpt-{i}", fraction, time=fraction)
    return evaluations, proc


def _result(path, fraction):
    return pb.Evaluation(checkpoint=path, fraction=fraction, accuracy=0.5, loss=1.0, examples=10)


def test_cancel_after_drops_the_later_checkpoints_from_the_queue_and_from_pending():
    evaluations, proc = _evaluations()
    assert evaluations.pending == 4
    evaluations.cancel_after(0.3)
    cancels = [r.path for r in proc.requests() if r.cancel]
    assert cancels == ["ckpt-2", "ckpt-3"] and evaluations.pending == 2
    # One was already being scored when its cancel went out: its result must not count twice.
    evaluations.on_evaluation(_result("ckpt-3", 0.5))
    assert evaluations.pending == 2
    evaluations.on_evaluation(_result("ckpt-1", 0.3))
    evaluations.on_evaluation(_result("ckpt-0", 0.2))
    assert evaluations.pending == 0


def test_a_rollback_cancels_what_it_abandons_and_sets_its_results_apart():
    evaluations, proc = _evaluations()
    assert evaluations.on_evaluation(_result("ckpt-3", 0.5)) is not None  # newest first, before the verdict
    gone = evaluations.abandon_after(0.3)
    assert [r.written for r in gone] == ["ckpt-3"] and evaluations.results == []
    assert [r.path for r in proc.requests() if r.cancel] == ["ckpt-2"]
    assert evaluations.on_evaluation(_result("ckpt-2", 0.4)) is None  # scored before the cancel arrived
    assert evaluations.pending == 2


def _deferring():
    proc = _Proc()
    spec = types.SimpleNamespace(script="s.py", params={}, evaluation=types.SimpleNamespace(batch_size=10,
                                                                                            live="watched"))
    feed = types.SimpleNamespace(follow_process=lambda source, process: None)
    evaluations = Evaluations(spec, "/tmp", feed, start_process=lambda config, log: proc)
    assert evaluations.set_live("watched", nodes_beside=False)
    evaluations.start(t0=1.0)
    return evaluations, proc


def test_evaluation_live_defers_where_asked_or_where_the_nodes_share_the_evaluators_machine():
    evaluations, _ = _evaluations()
    assert [evaluations.set_live(live, beside) for live in ("all", "watched", "auto") for beside in (False, True)] \
        == [False, False, True, True, False, True]


def test_a_deferred_checkpoint_waits_unsent_until_released_and_keeps_its_own_time():
    evaluations, proc = _deferring()
    evaluations.submit("ckpt-0", 0.1, time=2.0, live=False)
    evaluations.submit("ckpt-1", 0.2, time=3.0, live=False)
    evaluations.submit("ckpt-2", 0.3, time=4.0)  # needed live: sent at once
    assert [r.path for r in proc.requests()] == ["ckpt-2"]
    assert evaluations.pending == 1 and evaluations.deferred == 2
    assert evaluations.release("last step") == 2 and evaluations.deferred == 0 and evaluations.pending == 3
    requests = proc.requests()
    assert [(r.path, r.time_s) for r in requests[1:]] == [("ckpt-0", 1.0), ("ckpt-1", 2.0)]  # times from t0
    assert evaluations.release("repair") == 0  # nothing held: no release recorded
    assert evaluations.summary()["evaluation_live"] == {"setting": "watched", "deferred": True,
                                                        "scored_after_a_pause": 2,
                                                        "releases": [{"why": "last step", "checkpoints": 2}],
                                                        "held_again": []}


def test_without_deferring_a_checkpoint_not_needed_live_is_sent_at_once():
    evaluations, proc = _evaluations()  # evaluation.live all (the default without set_live)
    evaluations.submit("ckpt-9", 0.9, time=0.9, live=False)
    assert proc.requests()[-1].path == "ckpt-9" and evaluations.deferred == 0


def test_a_rollback_drops_the_deferred_checkpoints_after_its_target():
    evaluations, proc = _deferring()
    for i, fraction in enumerate((0.1, 0.2, 0.3)):
        evaluations.submit(f"ckpt-{i}", fraction, time=2.0 + i, live=False)
    evaluations.abandon_after(0.2)
    assert evaluations.deferred == 2 and proc.requests() == []  # nothing sent, nothing to cancel
    evaluations.release()
    assert [r.path for r in proc.requests()] == ["ckpt-0", "ckpt-1"]


def test_leaving_the_watched_phase_holds_again_what_the_evaluator_has_not_scored():
    evaluations, proc = _deferring()
    for i, fraction in enumerate((0.1, 0.2, 0.3)):
        evaluations.submit(f"ckpt-{i}", fraction, time=2.0 + i, live=False)
    evaluations.release("watched phase")
    evaluations.on_evaluation(_result("ckpt-2", 0.3))  # the newest, scored before the run went back
    assert evaluations.hold_again("bsp phase") == 2
    assert [r.path for r in proc.requests() if r.cancel] == ["ckpt-0", "ckpt-1"]
    assert evaluations.pending == 0 and evaluations.deferred == 2
    # One was being scored when its cancel went out: counted once, not sent again.
    evaluations.on_evaluation(_result("ckpt-1", 0.2))
    assert evaluations.deferred == 1
    sent = len(proc.requests())
    assert evaluations.release("last step") == 1
    (again,) = proc.requests()[sent:]
    assert (again.path, again.time_s, again.cancel) == ("ckpt-0", 1.0, False)  # its own time, as first sent
    assert evaluations.summary()["evaluation_live"]["held_again"] == [{"why": "bsp phase", "checkpoints": 2}]


def test_holding_again_needs_deferring():
    evaluations, proc = _evaluations()  # evaluation.live all: everything is scored live
    assert evaluations.hold_again("bsp phase") == 0
    assert evaluations.pending == 4 and not any(r.cancel for r in proc.requests())


def test_after_the_last_step_the_evaluator_may_score_as_many_at_once_as_there_are_cores():
    evaluations, proc = _evaluations()  # 4 pending
    assert evaluations.widen(cores=2) == 2
    assert proc.requests()[-1].scorers == 2 and not proc.requests()[-1].path
    assert evaluations.widen(cores=8) == 4  # no more scorers than checkpoints waiting
    for i, fraction in enumerate((0.2, 0.3, 0.4)):
        evaluations.on_evaluation(_result(f"ckpt-{i}", fraction))
    sent = len(proc.requests())
    assert evaluations.widen(cores=8) == 1 and len(proc.requests()) == sent  # one left: one scorer does


def test_a_checkpoint_held_again_while_scored_and_sent_again_counts_once():
    evaluations, proc = _deferring()
    evaluations.submit("ckpt-0", 0.1, time=2.0, live=False)
    evaluations.release("watched phase")
    assert evaluations.hold_again("bsp phase") == 1  # the evaluator is scoring it: the cancel comes too late
    assert evaluations.release("last step") == 1
    assert evaluations.on_evaluation(_result("ckpt-0", 0.1)) is not None and evaluations.pending == 0
    assert evaluations.on_evaluation(_result("ckpt-0", 0.1)) is None  # the second scoring of the same checkpoint
    assert len(evaluations.results) == 1 and evaluations.pending == 0
