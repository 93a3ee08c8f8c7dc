"""The step runner's handling of a request gRPC delivered twice: retry where harmless, fall back otherwise."""

import pytest
import tensorflow as tf

from syncswitch.node.step_loop import _retry_duplicate


def _flaky(failures, message="The same RunGraph (Worker) request was received twice."):
    calls = []

    def fn():
        calls.append(1)
        if len(calls) <= failures:
            raise tf.errors.AbortedError(None, None, message)
        return "ran"

    return fn, calls


def test_a_duplicated_request_is_retried():
    fn, calls = _flaky(1)
    assert _retry_duplicate(fn) == "ran" and len(calls) == 2


def test_the_wait_falls_back_instead_of_taking_a_second_token():
    fn, calls = _flaky(1)
    assert _retry_duplicate(fn, fallback=lambda: "read") == "read" and len(calls) == 1


def test_other_aborts_and_repeated_duplicates_still_fail():
    fn, _ = _flaky(1, message="worker restarted")
    with pytest.raises(tf.errors.AbortedError):
        _retry_duplicate(fn)
    fn, calls = _flaky(5)
    with pytest.raises(tf.errors.AbortedError):
        _retry_duplicate(fn, attempts=3)
    assert len(calls) == 3


def test_asp_reads_the_global_count_periodically_and_always_near_a_boundary():
    from syncswitch.node.state import TrainState

    state = TrainState(total_samples=100_000, worker=0)
    state.boundary, state.stride = 0.5, 128
    assert not state.needs_exact_samples()  # far from the boundary, just read
    state.unread_steps = TrainState.READ_EVERY - 1
    assert state.needs_exact_samples()  # periodic read
    state.unread_steps = 0
    state.samples = 50_000 - 2 * TrainState.READ_EVERY * 128  # within reach of the boundary
    assert state.needs_exact_samples()
    state.samples, state.marks = 10_000, [0.11]  # an evaluation point within reach
    assert state.needs_exact_samples()
    state.stride = 0  # BSP, or not configured: every step
    state.marks = []
    assert state.needs_exact_samples()


def test_a_moved_boundary_waits_for_the_next_step_in_a_collective_phase():
    from syncswitch.node.state import TrainState

    state = TrainState(total_samples=1000, worker=1)
    state.boundary, state.samples = 1.0, 400
    state.move_boundary(0.3)  # no collective: at once, as the reader thread always did
    assert state.at_boundary()
    state.boundary, state.hold_boundary = 1.0, True
    state.move_boundary(0.3)  # between a collective step and the boundary check: not yet
    assert not state.at_boundary()
    state.take_moved_boundary()  # the loop, before its next step (where the group agrees on it)
    assert state.at_boundary() and state.boundary == 0.3
    state.boundary = 1.0
    state.take_moved_boundary()  # taken once
    assert state.boundary == 1.0


def test_a_steps_deadline_is_the_floor_or_twenty_times_the_protocols_slowest_recent_step():
    from syncswitch.node.step_loop import RECENT_STEPS, StepDeadline

    bsp, asp = object(), object()
    deadline = StepDeadline(30.0)
    assert deadline.seconds(bsp) == 30.0  # nothing measured yet: the floor
    for _ in range(10):
        deadline.took(0.05)
    deadline.took(2.5)  # a straggler's step
    assert deadline.seconds(bsp) == pytest.approx(50.0)
    assert deadline.options(bsp).timeout_in_ms == 50_000
    given = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    merged = deadline.options(bsp, given)
    assert merged.timeout_in_ms == 50_000 and merged.trace_level == given.trace_level and given.timeout_in_ms == 0
    for _ in range(RECENT_STEPS):
        deadline.took(0.05)
    assert deadline.seconds(bsp) == 30.0  # the slow step has left the recent ones
    deadline.took(5.0)
    assert deadline.seconds(asp) == 30.0  # another protocol: its own steps
    assert StepDeadline(0.0).options(bsp) is None and StepDeadline(0.0).options(bsp, given) is given
