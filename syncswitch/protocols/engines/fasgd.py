"""Staleness-aware ASP (the FASGD family's step-staleness baseline, Zhang et al. 2016): rate / staleness."""

from __future__ import annotations

import tensorflow as tf

from .base import CountingOptimizer, ProtocolEngine, StalenessMeter, dense, state_variable

v1 = tf.compat.v1


def staleness_scale(staleness, power: float = 1.0):
    """The factor an update's rate is multiplied by: 1 / max(1, staleness) ** power (numpy or tensors)."""
    if isinstance(staleness, tf.Tensor):
        return 1.0 / tf.pow(tf.maximum(tf.cast(staleness, tf.float32), 1.0), power)
    return 1.0 / max(1.0, float(staleness)) ** power


class StalenessAwareEngine(ProtocolEngine):
    """Each gradient is scaled by `staleness_scale` of its measured step-staleness before the shared
    optimizer applies it: with plain SGD that is the rate divided by the staleness; with momentum the
    stale gradient's share of the velocity shrinks the same way."""

    name = "fasgd"
    worker_gradient = True
    counts_every_step = True

    def __init__(self, optimizer, grads_and_vars, global_step, samples, per_worker_batch: int, update_log=None, **_):
        self.meter = StalenessMeter(global_step, self.name, update_log)
        staleness = self.meter.at_apply([g for g, _ in grads_and_vars])
        self.power = state_variable("syncswitch/fasgd_power", [], tf.float32, 1.0, colocate=global_step)
        self._power_in = v1.placeholder(tf.float32, [], name="fasgd_power_in")
        self._set_power = self.power.assign(self._power_in)
        with tf.device(global_step.device):
            self.scale = staleness_scale(staleness, self.power.read_value())
        scaled = []
        for g, v in grads_and_vars:
            with tf.device(v.device):
                scaled.append((dense(g) * tf.cast(self.scale, v.dtype.base_dtype), v))  # a float64 model's too
        counting = CountingOptimizer(optimizer, samples, per_worker_batch, self.name)
        update = counting.apply_gradients(scaled, global_step, after=[staleness])
        recorded = self.meter.record(staleness, counting.step_after)
        self._finish(tf.group(update, recorded, name="fasgd_train"), counting.counted)

    def enter_chief(self, session, params: dict | None = None) -> None:
        super().enter_chief(session, params)
        session.run(self._set_power, {self._power_in: float((params or {}).get("power", 1.0))})
