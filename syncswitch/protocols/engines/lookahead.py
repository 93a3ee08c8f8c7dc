"""Look-ahead ASP: each gradient is computed where the parameters will be when it is applied (after DANA).

Asynchronous momentum SGD applies a gradient `d` updates after the parameters it was computed on were
read; momentum keeps moving the parameters in between, so the gradient is taken at a point the model has
already left. DANA (Hakimi et al. 2019) computes it at the estimated future position instead. Here the
estimate is the momentum's own continuation: without new gradients the parameters move by
`lr * f * v` over the next `d` updates, with f = m + m^2 + ... + m^d. The parameter servers store that
look-ahead point (phi = theta - lr * f * v, as TensorFlow's Nesterov momentum stores its one-step
look-ahead), so a worker reads it as it reads any variable: no extra transfer. The update keeps phi
consistent: v' = m * v + g; phi' = phi - lr * ((1 + f) * v' - f * v). With d = 1 this is exactly Nesterov
momentum; with f = 0 it is plain momentum ASP.

The stored point differs from the plain iterate by lr * f * v, the distance momentum covers in d updates,
so entering or leaving the phase needs no conversion: the first look-ahead gradient is taken d updates early,
the first gradient after the phase d updates late, as any stale one is (the checkpoint and the evaluator see
phi, as they see Nesterov's look-ahead).
"""

from __future__ import annotations

import tensorflow as tf

from .base import CountingOptimizer, ProtocolEngine, StalenessMeter, dense, state_variable

v1 = tf.compat.v1
ADAPT_EVERY = 32  # chief steps between two updates of the look-ahead from the measured staleness


def lookahead_factor(momentum, delay):
    """f = m + m^2 + ... + m^d (continued to fractional d): how far, in units of lr * v, momentum alone
    carries the parameters over the next d updates. The chief computes it; the servers get the coefficients."""
    m, d = float(momentum), float(delay)
    return d if m > 1.0 - 1e-6 else m * (1.0 - m ** d) / (1.0 - m)


def lookahead_update(phi, v, g, lr, momentum, f):
    """(phi', v'): one update of the stored look-ahead point and the velocity (numpy or tensors)."""
    v_new = momentum * v + g
    return phi - lr * ((1.0 + f) * v_new - f * v), v_new


def fused_coefficients(momentum: float, delay: float) -> tuple[float, float]:
    """(a, c) such that Nesterov momentum at rate lr * a followed by `var -= lr * c * v'` is one look-ahead
    update: a = f / m, c = 1 - f / m (with m = 0 there is nothing to look ahead along: plain SGD)."""
    m = float(momentum)
    if m < 1e-6:
        return 0.0, 1.0
    a = lookahead_factor(m, delay) / m
    return a, 1.0 - a


class _LookaheadMomentum(v1.train.Optimizer):
    """The shared momentum optimizer's rate, momentum and velocity slots, applied by the look-ahead rule.

    Written as two fused kernels per variable (Nesterov momentum, then a gradient-descent step along the
    new velocity), with the rate products computed once per parameter server: the rule spelled out in
    elementwise ops cost 17% of a small model's step.
    """

    def __init__(self, inner: v1.train.MomentumOptimizer, rates: dict):
        super().__init__(use_locking=False, name="lookahead")
        self._inner = inner
        self._rates = rates  # device -> (lr * a, lr * c) computed there

    def _create_slots(self, var_list):
        self._inner._create_slots(var_list)  # the same "momentum" slots every protocol uses

    def _prepare(self):
        self._inner._prepare()

    def _rates_for(self, var, grad):
        # The kernels take their rates in the variable's type: a float64 model's, cast where it is applied.
        return [tf.cast(rate, grad.dtype.base_dtype) for rate in self._rates[var.device]]

    def _resource_apply_dense(self, grad, var):
        velocity = self._inner.get_slot(var, "momentum")
        momentum = tf.cast(self._inner._momentum_tensor, grad.dtype.base_dtype)
        lr_a, lr_c = self._rates_for(var, grad)
        nesterov = tf.raw_ops.ResourceApplyMomentum(var=var.handle, accum=velocity.handle, lr=lr_a, grad=grad,
                                                    momentum=momentum, use_locking=False, use_nesterov=True)
        with tf.control_dependencies([nesterov]):
            v_new = velocity.read_value()
        return tf.raw_ops.ResourceApplyGradientDescent(var=var.handle, alpha=lr_c, delta=v_new)

    def _apply_dense(self, grad, var):
        # A reference variable (a script that asked for `use_resource=False`): the same two kernels, ref flavour.
        velocity = self._inner.get_slot(var, "momentum")
        momentum = tf.cast(self._inner._momentum_tensor, grad.dtype.base_dtype)
        lr_a, lr_c = self._rates_for(var, grad)
        nesterov = tf.raw_ops.ApplyMomentum(var=var, accum=velocity, lr=lr_a, grad=grad, momentum=momentum,
                                            use_locking=False, use_nesterov=True)
        with tf.control_dependencies([nesterov]):
            v_new = tf.identity(velocity)
        return tf.raw_ops.ApplyGradientDescent(var=var, alpha=lr_c, delta=v_new).op


class LookaheadEngine(ProtocolEngine):
    """ASP whose gradients are taken at the look-ahead point. `delay` is the expected staleness in updates;
    `adaptive` replaces it, every few chief steps, with the mean staleness this phase has measured so far
    (about n - 1 on a cluster of n concurrent workers, less where workers share cores)."""

    name = "lookahead"
    worker_gradient = True
    counts_every_step = True

    def __init__(self, optimizer, grads_and_vars, global_step, samples, per_worker_batch: int,
                 is_chief: bool = False, **_):
        self.meter = StalenessMeter(global_step, self.name)
        staleness = self.meter.at_apply([g for g, _ in grads_and_vars])
        self._is_chief = is_chief
        self._momentum = optimizer._momentum  # the shared (possibly ramped) momentum tensor
        self._coefficients_in = v1.placeholder(tf.float32, [2], name="lookahead_coefficients_in")
        lr = optimizer._learning_rate
        rates, setters = {}, []
        for _, v in grads_and_vars:
            if v.device in rates:
                continue
            # (a, c) once per parameter server: a read from another server would cost a transfer per step.
            coefficients = state_variable(f"syncswitch/lookahead/coefficients_{len(rates)}", [2], tf.float32,
                                          colocate=v)
            setters.append(coefficients.assign(self._coefficients_in))
            with tf.device(v.device):
                both = tf.cast(lr, tf.float32) * coefficients.read_value()
                rates[v.device] = (both[0], both[1])
        # The delay in force, where any worker can read it: the last worker to pause reports the phase.
        self._delay_var = state_variable("syncswitch/lookahead/delay", [], tf.float32, 1.0, colocate=global_step)
        self._delay_in = v1.placeholder(tf.float32, [], name="lookahead_delay_in")
        setters.append(self._delay_var.assign(self._delay_in))
        self._set_coefficients = tf.group(*setters)
        grads = []
        for g, v in grads_and_vars:
            with tf.device(v.device):
                grads.append((dense(g), v))
        counting = CountingOptimizer(_LookaheadMomentum(optimizer, rates), samples, per_worker_batch, self.name)
        update = counting.apply_gradients(grads, global_step, after=[staleness])
        self._finish(tf.group(update, self.meter.record(staleness), name="lookahead_train"), counting.counted)
        self.adaptive = True
        self._steps = 0

    def _set(self, session, delay: float) -> None:
        momentum = float(session.run(self._momentum)) if isinstance(self._momentum, tf.Tensor) else self._momentum
        session.run(self._set_coefficients, {self._coefficients_in: fused_coefficients(momentum, delay),
                                             self._delay_in: delay})

    def enter_chief(self, session, params: dict | None = None) -> None:
        super().enter_chief(session, params)
        p = params or {}
        self.adaptive = bool(p.get("adaptive", True))
        self._steps = 0
        self._set(session, float(p.get("delay", 1.0)))

    def after_step(self, session, state) -> float:
        if not (self._is_chief and self.adaptive):
            return 0.0
        self._steps += 1
        if self._steps % ADAPT_EVERY == 0:
            total, count = session.run([self.meter.total, self.meter.count])
            if count:
                self._set(session, float(total) / count)
        return 0.0

    def stats(self, session) -> dict:
        return {**super().stats(session), "lookahead_delay": round(float(session.run(self._delay_var)), 4)}
