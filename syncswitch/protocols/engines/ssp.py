"""SSP: stale synchronous parallel; asynchronous updates, but no worker runs more than `staleness` steps ahead."""

from __future__ import annotations

import time

import tensorflow as tf

from .base import CountingOptimizer, ProtocolEngine, StalenessMeter, state_variable

v1 = tf.compat.v1


def must_wait(clocks, worker: int, staleness: int) -> bool:
    """SSP's rule (Ho et al. 2013): worker `worker` waits while its clock is more than `staleness` ahead of the
    slowest."""
    return int(clocks[worker]) - int(min(clocks)) > staleness


class StaleSyncEngine(ProtocolEngine):
    """Per-worker clocks live on the parameter servers beside the global step; each step applies this worker's
    gradient and ticks its clock; a worker then ahead of the slowest by more than s polls the clocks until it
    is not. s = 0 is BSP's lockstep with ASP's per-worker updates.

    The wait is a short poll from Python rather than a blocking op, so a phase boundary (the global
    sample count reaching it) or the chief's release frees a waiting worker without a token queue.
    """

    name = "ssp"
    worker_gradient = True
    poll_s = 0.002

    def __init__(self, optimizer, grads_and_vars, global_step, samples, per_worker_batch: int,
                 num_workers: int, task_index: int, update_log=None, **_):
        self.worker = task_index
        self.staleness = 3
        self.meter = StalenessMeter(global_step, self.name, update_log)
        staleness = self.meter.at_apply([g for g, _ in grads_and_vars])
        counting = CountingOptimizer(optimizer, samples, per_worker_batch, self.name)
        update = counting.apply_gradients(grads_and_vars, global_step, after=[staleness])
        self.clocks = state_variable("syncswitch/ssp_clocks", [num_workers], tf.int64, colocate=global_step)
        self.released = state_variable("syncswitch/ssp_released", [], tf.int32, colocate=global_step)
        with tf.device(global_step.device):
            with tf.control_dependencies([update]):
                tick = self.clocks.scatter_add(tf.IndexedSlices(tf.ones([1], tf.int64), tf.constant([task_index])))
            self._poll = [self.clocks.read_value(), self.released.read_value(), samples.read_value()]
            self._reset = tf.group(self.clocks.assign(tf.zeros([num_workers], tf.int64)), self.released.assign(0))
            self._release = self.released.assign(1)
        recorded = self.meter.record(staleness, counting.step_after)
        self._finish(tf.group(update, tick, recorded, name="ssp_train"), counting.counted)
        self._poll_fn = None

    def enter_chief(self, session, params: dict | None = None) -> None:
        super().enter_chief(session, params)
        session.run(self._reset)  # every worker is paused: all start level

    def enter_worker(self, session, params: dict | None = None) -> None:
        self.staleness = int((params or {}).get("staleness", self.staleness))

    def before_warm_up(self, session) -> None:
        pass  # the chief's phase entry resets the clocks the warm-up ticked

    def release(self, session) -> None:
        session.run(self._release)

    def after_step(self, session, state) -> float:
        if self._poll_fn is None:
            self._poll_fn = session.make_callable(self._poll)
        clocks, released, samples = self._poll_fn()
        if released or not must_wait(clocks, self.worker, self.staleness):
            return 0.0
        t0 = time.perf_counter()
        while must_wait(clocks, self.worker, self.staleness) and not released:
            if samples >= state.boundary * state.total:
                break  # the phase ended while this worker waited: the boundary pause follows
            time.sleep(self.poll_s)
            clocks, released, samples = self._poll_fn()
        return time.perf_counter() - t0
