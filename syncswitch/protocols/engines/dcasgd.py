"""DC-ASGD (Zheng et al. 2017): asynchronous updates with the delay compensated by a diagonal Hessian estimate."""

from __future__ import annotations

import tensorflow as tf

from .base import CountingOptimizer, ProtocolEngine, StalenessMeter, dense, state_variable

v1 = tf.compat.v1
EPSILON = 1e-7


def compensate(g, w_now, w_read, lam, mean_square=None, epsilon: float = EPSILON):
    """g + lambda_t * g * g * (w_now - w_read); adaptive (DC-ASGD-a) when `mean_square` is given:
    lambda_t = lambda / sqrt(mean_square + epsilon). Works on numpy arrays and tensors alike."""
    if mean_square is not None:
        lam = lam / (mean_square + epsilon) ** 0.5
    return g + lam * g * g * (w_now - w_read)


class DelayCompensatedEngine(ProtocolEngine):
    """Each variable's gradient is compensated on its parameter server, just before it is applied:
    `w_read` is the value read at the step's start (as the forward pass read it), `w_now` the value
    the other workers' updates left since. The adaptive variant keeps a mean square of the gradient
    per variable (decay `decay`); lambda, adaptive and decay are variables beside each variable, set at phase entry.
    """

    name = "dc-asgd"
    worker_gradient = True
    counts_every_step = True

    def __init__(self, optimizer, grads_and_vars, global_step, samples, per_worker_batch: int, update_log=None, **_):
        self.meter = StalenessMeter(global_step, "dc_asgd", update_log)
        staleness = self.meter.at_apply([g for g, _ in grads_and_vars])
        self._params_in = v1.placeholder(tf.float32, [3], name="dc_asgd_params_in")
        compensated, squares, setters, self.reads = [], [], [], []
        for g, v in grads_and_vars:
            g, dtype = dense(g), v.dtype.base_dtype  # a float64 model's state and terms in its own type
            with tf.device(v.device):
                # (lambda, adaptive, decay) beside each variable: a read from another parameter server
                # would add a cross-server transfer to every update of every variable.
                name = f"syncswitch/dc_asgd/{v.op.name}"
                hyper = state_variable(f"{name}/hyper", [3], tf.float32, colocate=v)
                setters.append(hyper.assign(self._params_in))
                w_read = tf.identity(v.read_value(), name="w_read")  # no inputs: read as the step starts
                ms = state_variable(f"{name}/mean_square", v.shape, dtype, colocate=v)
                squares.append(ms)
                self.reads.append(w_read)
                with tf.control_dependencies([g]):
                    w_now = v.read_value()
                lam0, adaptive, decay = tf.unstack(tf.cast(hyper.read_value(), dtype))
                ms_new = ms.assign(decay * ms + (1.0 - decay) * g * g)
                lam = tf.where(adaptive > 0.5, lam0 / tf.sqrt(ms_new + EPSILON), lam0 * tf.ones_like(ms_new))
                compensated.append((g + lam * g * g * (w_now - w_read), v))
        self._set_params = tf.group(*setters)
        self._reset_squares = tf.group(*[ms.assign(tf.zeros_like(ms)) for ms in squares])
        counting = CountingOptimizer(optimizer, samples, per_worker_batch, "dc_asgd")
        update = counting.apply_gradients(compensated, global_step, after=[staleness])
        recorded = self.meter.record(staleness, counting.step_after)
        self._finish(tf.group(update, recorded, name="dc_asgd_train"), counting.counted)

    def enter_chief(self, session, params: dict | None = None) -> None:
        super().enter_chief(session, params)
        p = params or {}
        session.run([self._set_params, self._reset_squares],
                    {self._params_in: [float(p.get("lambda", 0.04)), 1.0 if p.get("adaptive") else 0.0,
                                       float(p.get("decay", 0.95))]})
