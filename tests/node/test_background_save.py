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


def test_the_warm_up_saves_and_copies_once_and_leaves_no_file(monkeypatch):
    import os
    import tempfile

    import tensorflow as tf

    from syncswitch.node import background_save
    from syncswitch.protocols.engines.replica_training import Snapshot

    v1 = tf.compat.v1
    made = []
    real_mkdtemp = tempfile.mkdtemp
    monkeypatch.setattr(background_save.tempfile, "mkdtemp",
                        lambda **kw: made.append(real_mkdtemp(**kw)) or made[-1])
    saved = []
    graph = tf.Graph()
    with graph.as_default():
        weights = v1.get_variable("w", initializer=tf.constant([1.0, 2.0]))
        copy = v1.get_variable("copy", initializer=tf.zeros([2]))
        step = v1.train.get_or_create_global_step()
        saver = v1.train.Saver([weights, step])
        snapshot = Snapshot(copy.assign(weights).op, step.read_value(), v1.train.Saver({"w": copy}))
        init = v1.global_variables_initializer()
    with v1.Session(graph=graph) as session:
        session.run(init)
        for each in (saver, snapshot.saver):  # what each save wrote, seen before the folder goes
            monkeypatch.setattr(each, "save", lambda *a, _save=each.save, **kw: saved.append(
                (_save(*a, **kw), sorted(os.listdir(os.path.dirname(a[1]))))) or saved[-1][0])
        background_save.warm_up(session, saver, [snapshot])
        assert list(session.run(copy)) == [1.0, 2.0]  # the snapshot's copy ran
    assert len(saved) == 2 and all(any(f.endswith(".index") for f in files) for _, files in saved)
    assert len(made) == 1 and not os.path.exists(made[0])  # written into a folder of its own, then removed


def test_every_write_runs_on_the_one_writer_thread_and_handing_it_over_starts_no_thread(monkeypatch):
    from syncswitch.node import background_save

    writes, ran_on = BackgroundWrites(), []

    def no_thread(*args, **kwargs):
        raise AssertionError("a thread started per write: the training thread waits for it to be scheduled")

    monkeypatch.setattr(background_save.threading, "Thread", no_thread)
    for _ in range(3):
        writes.start(lambda: ran_on.append(threading.current_thread()))
    writes.wait()
    assert len(ran_on) == 3 and len({id(t) for t in ran_on}) == 1
    assert ran_on[0] is not threading.current_thread() and ran_on[0].name == "checkpoint-write"
