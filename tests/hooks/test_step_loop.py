"""The step runner's handling of a request gRPC delivered twice: retry where harmless, fall back otherwise."""

import pytest
import tensorflow as tf

from syncswitch.hooks.step_loop import _retry_duplicate


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
