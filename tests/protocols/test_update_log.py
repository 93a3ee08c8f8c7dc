"""The opt-in per-update staleness record (syncswitch/protocols/engines/update_log.py): rows written by the meter
in one local TF session, with peers landing before and after the gradient's arrival; and a real 2-worker ASP run
whose rows must be its own staleness record, update for update."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
tf = pytest.importorskip("tensorflow")
v1 = tf.compat.v1

from syncswitch import spec as specmod  # noqa: E402
from syncswitch.cluster_manager import submission  # noqa: E402
from syncswitch.node.updates import ancestors  # noqa: E402
from syncswitch.protocols.engines import CountingOptimizer, StalenessMeter  # noqa: E402
from syncswitch.protocols.engines.update_log import CAPACITY, LogPlace, columns  # noqa: E402

from tests.conftest import DIGITS_JOB  # noqa: E402


class Rig:
    """One worker (`task` of 2) whose step has `before` peer updates land between its read and its gradient's
    arrival and `waiting` more between the arrival and its own update."""

    def __init__(self, task: int = 1, sum_given: bool = False):
        self.graph = tf.Graph()
        with self.graph.as_default():
            step = v1.train.get_or_create_global_step()
            samples = v1.get_variable("samples", [], tf.int64, v1.zeros_initializer(), trainable=False)
            w = v1.get_variable("w", initializer=np.zeros(3, np.float32), use_resource=True)
            self.before, self.waiting = v1.placeholder(tf.int64, []), v1.placeholder(tf.int64, [])
            self.meter = StalenessMeter(step, "t", LogPlace(workers=2, task=task))
            with tf.control_dependencies([self.meter.step_at_read]):
                early = step.assign_add(self.before)
            with tf.control_dependencies([early]):
                grad = tf.ones([3])
            arrival = self.meter.at_apply([grad])
            with tf.control_dependencies([arrival]):
                late = step.assign_add(self.waiting)
            with tf.control_dependencies([late]):
                grad = tf.identity(grad)
            counting = CountingOptimizer(v1.train.GradientDescentOptimizer(0.1), samples, 1, "t")
            update = counting.apply_gradients([(grad, w)], step, after=[arrival])
            self.train = tf.group(update, self.meter.record(arrival, counting.step_after, sum_given=sum_given))
            init = v1.global_variables_initializer()
        self.session = v1.Session(graph=self.graph)
        self.session.run(init)
        self.session.run(self.meter.reset_op)

    def step(self, before: int, waiting: int) -> None:
        self.session.run(self.train, {self.before: before, self.waiting: waiting})


def test_each_update_keeps_its_read_arrival_and_landing_step():
    rig = Rig(task=1)
    for before, waiting in ((2, 0), (0, 3), (1, 1)):
        rig.step(before, waiting)
    stats = rig.meter.stats(rig.session)
    # Step 1 reads 0, arrives at 2, lands after 2 (counts itself 3rd); step 2 reads 3, arrives at 3, lands after 6;
    # step 3 reads 7, arrives at 8, lands after 9.
    assert stats["update_log"] == {"read": [0, 3, 7], "arrival": [2, 3, 8], "landed": [2, 6, 9],
                                   "worker": [1, 1, 1]}
    assert stats["update_log_dropped"] == 0
    log = stats["update_log"]
    counted = [landed - read for read, landed in zip(log["read"], log["landed"])]
    assert counted == [2, 3, 2] and stats["staleness_mean"] == pytest.approx(7 / 3) and stats["updates"] == 3


def test_the_row_and_the_sum_read_the_count_once():
    """The global step an update counted itself at is read once, for the row and the meter's sum alike: each use of a
    resource variable's lazy assign_add read made a read of its own, and a peer landing between two of them put the
    row and the sum one apart (a real 2-worker ASP run, 1 run in 4)."""
    graph = tf.Graph()
    with graph.as_default():
        step = v1.train.get_or_create_global_step()
        samples = v1.get_variable("samples", [], tf.int64, v1.zeros_initializer(), trainable=False)
        w = v1.get_variable("w", initializer=np.zeros(3, np.float32), use_resource=True)
        meter = StalenessMeter(step, "t", LogPlace(workers=2, task=0))
        arrival = meter.at_apply([tf.ones([3])])
        counting = CountingOptimizer(v1.train.GradientDescentOptimizer(0.1), samples, 1, "t")
        counting.apply_gradients([(tf.ones([3]), w)], step, after=[arrival])
        recorded = meter.record(arrival, counting.step_after)
    counts = [op for op in graph.get_operations() if op.type == "AssignAddVariableOp" and op.inputs[0] is step.handle]
    reads = [op for op in ancestors([recorded])  # what the row and the sum are computed from
             if op.type == "ReadVariableOp" and set(op.control_inputs) & set(counts)]
    assert len(counts) == 1 and len(reads) == 1, [op.name for op in reads]


def test_a_rule_counting_at_arrival_keeps_its_mean_and_the_rows_their_landing():
    """specsync decides on the count at its gradient's arrival and its meter's mean is that count; the rows still
    say how many peers' updates landed after it (the cond's round trip), for the simulator's fit."""
    rig = Rig(task=1, sum_given=True)
    for before, waiting in ((2, 0), (0, 3), (1, 1)):
        rig.step(before, waiting)
    stats = rig.meter.stats(rig.session)
    assert stats["update_log"]["landed"] == [2, 6, 9] and stats["update_log"]["arrival"] == [2, 3, 8]
    assert stats["staleness_mean"] == pytest.approx((2 + 0 + 1) / 3)  # at arrival: 2, 0, 1


def test_a_phase_entry_empties_the_log():
    rig = Rig()
    rig.step(1, 1)
    rig.session.run(rig.meter.reset_op)
    rig.step(0, 2)
    log = rig.meter.stats(rig.session)["update_log"]
    assert log["read"] == [3] and log["landed"] == [5]


def test_updates_past_the_capacity_are_counted_not_kept():
    rig = Rig(task=0)
    rig.step(0, 0)
    with rig.graph.as_default():
        rig.session.run(rig.meter.log.filled.assign([CAPACITY, 0]))
    rig.step(4, 0)
    stats = rig.meter.stats(rig.session)
    assert stats["update_log_dropped"] == 1 and len(stats["update_log"]["read"]) == CAPACITY
    assert stats["update_log"]["read"][-1] == 0  # the first row kept, not overwritten; the rest never written


def test_columns_merge_the_workers_in_the_order_the_updates_counted():
    rows = np.zeros((2, CAPACITY + 1, 3), np.int64)
    rows[0, :2] = [[0, 0, 1], [2, 3, 3]]
    rows[1, :2] = [[0, 1, 0], [1, 2, 2]]
    out = columns(rows, np.array([2, 2]))
    assert out["update_log"] == {"read": [0, 0, 1, 2], "arrival": [1, 0, 2, 3], "landed": [0, 1, 2, 3],
                                 "worker": [1, 0, 1, 0]}
    assert columns(rows, np.array([1, 0]))["update_log"]["worker"] == [0]


def test_the_meter_keeps_no_rows_unless_asked():
    graph = tf.Graph()
    with graph.as_default():
        meter = StalenessMeter(v1.train.get_or_create_global_step(), "t")
    assert meter.log is None


@pytest.mark.cluster
def test_a_real_asp_run_records_every_update(write_spec, tmp_path, no_leftovers, monkeypatch):
    """2 real workers, ASP, DC-ASGD then specsync (the log starts over at each entry): each phase's rows are its
    updates, both workers', and their counted staleness is the phase's mean to the last update (specsync's: the
    count at the arrival, which its rule decides on)."""
    monkeypatch.setenv("SYNCSWITCH_UPDATE_LOG", "1")
    job = specmod.load(write_spec(DIGITS_JOB), [
        "workload.epochs=1", "policy.switch_rule=false",
        "policy.schedule=[{protocol: asp, until: 0.4}, {protocol: dc-asgd, until: 0.7}, {protocol: specsync}]"])
    summary = submission.submit(job, output_dir=str(tmp_path / "run"), progress=False)
    assert summary["status"] == "completed", summary["message"]
    for phase in summary["schedule"]:
        measured = phase["measured"]
        log = measured["update_log"]
        assert measured["update_log_dropped"] == 0
        assert len(log["read"]) == measured["updates"] > 0  # specsync's dropped steps are not updates
        assert measured["updates"] == phase["steps"] - measured.get("aborted_steps", 0)
        assert set(log["worker"]) == {0, 1}
        read, arrival, landed = (np.asarray(log[k]) for k in ("read", "arrival", "landed"))
        assert np.all(read <= arrival) and np.all(arrival <= landed)
        assert np.all(np.diff(landed) >= 0)
        mean = arrival - read if phase["protocol"] == "specsync" else np.maximum(landed - read, 0)
        assert mean.mean() == pytest.approx(measured["staleness_mean"], abs=1e-12)
