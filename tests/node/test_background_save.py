"""Checkpoint writes beside training: in the order taken, one at a time, a failure raised at the next wait."""

import threading
import time

import pytest

from syncswitch.node.background_save import BackgroundWrites


def test_writes_run_one_at_a_time_in_order_and_wait_finishes_them():
    writes, done, running = BackgroundWrites(), [], []

    def write(k):
        def fn():
            running.append(k)
            assert len(running) - len(done) == 1, "two writes at once"
            time.sleep(0.05)
            done.append(k)
        return fn

    for k in range(3):
        writes.start(write(k))
        assert writes.busy or done[-1:] == [k]
    writes.wait()
    assert done == [0, 1, 2]
    assert not writes.busy


def test_a_failed_write_is_raised_at_the_next_wait_once():
    writes = BackgroundWrites()

    def fail():
        raise OSError("disk full")

    writes.start(fail)
    with pytest.raises(OSError, match="disk full"):
        writes.wait()
    writes.wait()  # reported once


def test_start_waits_for_the_write_in_flight_and_raises_its_failure():
    writes, release = BackgroundWrites(), threading.Event()

    def fail_later():
        release.wait(5)
        raise ValueError("bad path")

    writes.start(fail_later)
    release.set()
    with pytest.raises(ValueError, match="bad path"):
        writes.start(lambda: None)
