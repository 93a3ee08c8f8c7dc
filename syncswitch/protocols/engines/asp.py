"""ASP: every worker applies its own gradient to the parameter servers as soon as it has it."""

from __future__ import annotations

import tensorflow as tf

from .base import CountingOptimizer, ProtocolEngine, StalenessMeter


class AsyncEngine(ProtocolEngine):
    """Plain asynchronous updates; the staleness of each is measured for the record."""

    name = "asp"
    worker_gradient = True
    counts_every_step = True

    def __init__(self, optimizer, grads_and_vars, global_step, samples, per_worker_batch: int, update_log=None, **_):
        self.meter = StalenessMeter(global_step, self.name, update_log)
        staleness = self.meter.at_apply([g for g, _ in grads_and_vars])
        counting = CountingOptimizer(optimizer, samples, per_worker_batch, self.name)
        update = counting.apply_gradients(grads_and_vars, global_step, after=[staleness])
        recorded = self.meter.record(staleness, counting.step_after)
        self._finish(tf.group(update, recorded, name="asp_train"), counting.counted)
