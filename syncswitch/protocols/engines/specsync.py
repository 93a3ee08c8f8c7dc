"""SpecSync (Zhang et al. 2018): a worker that missed too many fresh updates drops its gradient and recomputes."""

from __future__ import annotations

import contextlib
import math

import numpy as np
import tensorflow as tf

from syncswitch.protocols.speculation import Tuning, tune

from .base import CountingOptimizer, ProtocolEngine, StalenessMeter, state_variable

v1 = tf.compat.v1
LOG_SIZE = 256  # pushes the parameter servers remember for the tuning: several epochs of TUNE_EVERY chief steps
TUNE_EVERY = 16  # chief steps per tuning epoch (about TUNE_EVERY * n pushes)


def should_abort(fresh_updates: int, abort_rate: float, workers: int) -> bool:
    """SpecSync's re-sync rule: more than abort_rate * m pushes by others in the speculation period."""
    return fresh_updates > abort_rate * workers


def pushes_in_window(log, read_s: float, abort_time_s: float, worker: int) -> int:
    """Pushes by workers other than `worker` in (read_s, read_s + abort_time_s]; `log` rows are
    (read, push, worker) as the engine records them (numpy reference of the in-graph count)."""
    log = np.asarray(log, np.float64)
    return int(np.sum((log[:, 2] != worker) & (log[:, 1] > read_s) & (log[:, 1] <= read_s + abort_time_s)))


@contextlib.contextmanager
def _graph_control_flow():
    """Build tf.cond as Switch/Merge ops: TF 2's functional If would run both branches' parameter-server ops
    through one multi-device function; the v1 form partitions across tasks like any other op."""
    from tensorflow.python.ops import control_flow_util

    old = control_flow_util.ENABLE_CONTROL_FLOW_V2
    control_flow_util.ENABLE_CONTROL_FLOW_V2 = False
    try:
        yield
    finally:
        control_flow_util.ENABLE_CONTROL_FLOW_V2 = old


class SpeculativeEngine(ProtocolEngine):
    """ASP whose update is skipped when more than `abort_rate` * n updates by other workers landed in the
    speculation period: the first `abort_time` seconds after this step's read, or (abort_time 0) everything
    up to the gradient's arrival. The next step then computes on the fresh parameters (a new batch: the input
    pipeline has moved on, so the dropped batch's samples are simply not counted). SpecSync checks ABORT_TIME
    into the step and restarts it; a TensorFlow step cannot be cut short, so here the check is at the
    gradient's arrival: the rule is the paper's, but an abort saves no compute, only the stale update.

    `adaptive`: the paper's Algorithm 1 (syncswitch/protocols/speculation.py) sets both every tuning epoch
    from the pushes of the last one, which the parameter servers log with their own clock (read and push
    time, worker) so that every worker's times are comparable.
    """

    name = "specsync"
    worker_gradient = True

    def __init__(self, optimizer, grads_and_vars, global_step, samples, per_worker_batch: int,
                 num_workers: int, is_chief: bool = False, task_index: int = 0, update_log=None, **_):
        self.num_workers, self._is_chief = num_workers, is_chief
        # The mean is the count the rule decides on (at the gradient's arrival); the rows, where kept, also say
        # how many peers' updates landed after it, before this one's own (the cond's round trip).
        self.meter = StalenessMeter(global_step, self.name, update_log)
        grads = [g for g, _ in grads_and_vars]
        fresh = self.meter.at_apply(grads)
        state = {"colocate": global_step}
        self.threshold = state_variable("syncswitch/specsync_threshold", [], tf.float32, 0.5 * num_workers, **state)
        self.abort_time = state_variable("syncswitch/specsync_abort_time", [], tf.float64, **state)
        self.aborts = state_variable("syncswitch/specsync_aborts", [], tf.int64, **state)
        self.log = state_variable("syncswitch/specsync_log", [LOG_SIZE, 3], tf.float64, **state)
        # The tuning's results live on the parameter servers: whichever worker pauses last reports them.
        self.tunes = state_variable("syncswitch/specsync_tunes", [], tf.int64, **state)
        self._threshold_in = v1.placeholder(tf.float32, [], name="specsync_threshold_in")
        self._abort_time_in = v1.placeholder(tf.float64, [], name="specsync_abort_time_in")
        self._tunes_in = v1.placeholder(tf.int64, [], name="specsync_tunes_in")
        self._set = tf.group(self.threshold.assign(self._threshold_in), self.abort_time.assign(self._abort_time_in),
                             self.tunes.assign(self._tunes_in))
        self._reset = tf.group(self.aborts.initializer, self.log.initializer)
        counting = CountingOptimizer(optimizer, samples, per_worker_batch, self.name)
        # Slots are made outside the cond: a variable cannot be created inside one.
        optimizer._create_slots([v for _, v in grads_and_vars])  # the v1 optimizer's own hook
        with tf.device(global_step.device):
            # Read and push times on the parameter server's clock, the one every worker's log entry shares.
            with tf.control_dependencies([self.meter.step_at_read]):
                read_s = tf.timestamp()
            with tf.control_dependencies(grads):
                log = self.log.read_value()
                period = self.abort_time.read_value()
                windowed = tf.reduce_sum(tf.cast(
                    tf.not_equal(log[:, 2], float(task_index)) & (log[:, 1] > read_s) & (log[:, 1] <= read_s + period),
                    tf.int64))
                counted = tf.where(period > 0, windowed, fresh)
                abort = tf.cast(counted, tf.float32) > self.threshold.read_value()

        def apply():
            update = counting.apply_gradients(grads_and_vars, global_step)
            with tf.device(global_step.device), tf.control_dependencies([update]):
                # Concurrent pushes may read one step value and share a slot: the log is a sample, not a ledger.
                slot = tf.math.floormod(global_step.read_value(), LOG_SIZE)
                entry = tf.stack([read_s, tf.timestamp(), tf.constant(float(task_index), tf.float64)])
                logged = v1.scatter_update(self.log, slot[None], entry[None])
            recorded = self.meter.record(fresh, counting.step_after, sum_given=True)
            with tf.control_dependencies([update, recorded, logged]):
                return tf.identity(counting.counted)

        def drop():
            with tf.device(global_step.device), tf.control_dependencies([self.aborts.assign_add(1)]):
                return samples.read_value()

        with _graph_control_flow():
            samples_after = v1.cond(abort, drop, apply)
        self._finish(samples_after.op, samples_after)
        self.adaptive = False
        self._tunes = 0
        self._steps = 0
        self._epoch_from = 0.0

    def _apply(self, session, abort_rate: float, abort_time_s: float) -> None:
        # A tuned period of 0 means no re-sync pays: an infinite threshold, not "any fresh update aborts".
        tuned_off = self._tunes and abort_time_s <= 0
        threshold = math.inf if tuned_off else abort_rate * self.num_workers
        session.run(self._set, {self._threshold_in: threshold, self._abort_time_in: abort_time_s,
                                self._tunes_in: self._tunes})

    def enter_chief(self, session, params: dict | None = None) -> None:
        super().enter_chief(session, params)
        p = params or {}
        self.adaptive = bool(p.get("adaptive", False))
        self._tunes, self._steps, self._epoch_from = 0, 0, 0.0
        session.run(self._reset)
        self._apply(session, float(p.get("abort_rate", 0.5)), float(p.get("abort_time", 0.0)))

    def enter_worker(self, session, params: dict | None = None) -> None:
        self.adaptive = bool((params or {}).get("adaptive", False))

    def after_step(self, session, state) -> float:
        if not (self._is_chief and self.adaptive):
            return 0.0
        self._steps += 1
        if self._steps % TUNE_EVERY == 0:
            self.retune(session)
        return 0.0

    def retune(self, session) -> Tuning | None:
        """One tuning epoch: Algorithm 1 on the pushes logged since the last one."""
        log = session.run(self.log)
        epoch = log[log[:, 1] > self._epoch_from]
        result = tune(epoch[:, 2], epoch[:, 0], epoch[:, 1], self.num_workers) if len(epoch) else None
        if result is None:
            return None  # too few pushes yet: keep the epoch open
        self._epoch_from = float(epoch[:, 1].max())
        self._tunes += 1
        self._apply(session, result.abort_rate, result.abort_time_s)
        return result

    def stats(self, session) -> dict:
        out = super().stats(session)
        aborts, threshold, period, tunes = session.run([self.aborts, self.threshold, self.abort_time, self.tunes])
        out["aborted_steps"] = int(aborts)
        if self.adaptive:
            # The values in force at the phase's end; a rate of None: the tuning found no re-sync worth it.
            out["tunes"] = int(tunes)
            out["abort_time_s"] = round(float(period), 6)
            out["abort_rate"] = round(float(threshold) / self.num_workers, 4) if math.isfinite(threshold) else None
        return out
