"""Bandwidth-aware staleness-aware ASP (B-FASGD, seed paper 002): pushes and fetches happen with a probability.

Each worker computes its gradient on its own copy of the model (syncswitch/node/replica.py) and applies it to
the shared model as `fasgd` does: the rate divided by the update's staleness, here counted from the last
fetch. After each step the worker fetches the shared model into its copy, and before each step decides to
push its gradient, each with the paper's probability (its equation 9)

    p = 1 / (1 + c / (v + eps))

where v is the mean over the model's parameters of the moving standard deviation of their gradients: noisy
gradients are worth sending, quiet ones less. c = 0 always transmits (`fetch: 0` is `fasgd` on a copy). One
change from the paper: v is measured in units of the largest v this phase has seen, so `c` does not depend
on the scale of a model's gradients (the paper's v is absolute, its c tuned per model), and it is each
worker's estimate from its own gradients rather than the server's from all of them.
The paper (an MNIST MLP in a simulator) could cut fetches tenfold at little cost and found that dropping
pushes quickly diverged. Here fewer fetches cost accuracy at once (measured on the quickstart, 4 workers:
`fetch: 1` fetched 43% of steps, its copies 5-7 updates stale, 0.38 against ASP's 0.63), so the defaults
transmit nearly always: `fetch: 0.05` (94% of steps) and `push: 0`, every gradient sent.
"""

from __future__ import annotations

import tensorflow as tf

from syncswitch.protocols import catalog

from . import fused
from .base import CountingOptimizer, ProtocolEngine, StalenessMeter, dense, worker_variable
from .clipping import clipped
from .fasgd import staleness_scale

v1 = tf.compat.v1
EPSILON = 1e-8
RESOLUTION = 1e-5  # relative: a variance smaller than this share of the mean square is float rounding


def transmit_probability(c, v):
    """The paper's equation 9: 1 / (1 + c / (v + eps)) (numpy or tensors); c = 0 gives 1."""
    return 1.0 / (1.0 + c / (v + EPSILON))


class BandwidthAwareEngine(ProtocolEngine):
    """Gradients of the worker's copy, applied staleness-scaled to the shared model; the copy refreshed from it
    only when the fetch draw says so. Each step is one of two calls: pushing or dropping the gradient."""

    name = "b-fasgd"
    needs_replica = True
    counts_every_step = True

    def __init__(self, optimizer, grads_and_vars, global_step, samples, per_worker_batch: int, replica=None,
                 clip_norm=None, **_):
        if replica is None:
            raise ValueError("b-fasgd needs the worker's model replica")
        self.loss = replica.loss
        device = replica.device
        self.meter = StalenessMeter(global_step, self.name)
        with tf.device(device), v1.variable_scope("syncswitch_b_fasgd"):
            self._c = {key: worker_variable(f"c_{key}", (), tf.float32, 0.0) for key in ("fetch", "push")}
            self._decay = worker_variable("decay", (), tf.float32, 0.99)
            self._power = worker_variable("power", (), tf.float32, 1.0)
            self._t = worker_variable("steps", (), tf.float32, 0.0)
            self._v_max = worker_variable("v_max", (), tf.float32, 0.0)
            self._step_at_fetch = worker_variable("step_at_fetch", (), tf.int64, 0)
            self._fetch_next = worker_variable("fetch_next", (), tf.bool, False)
            self._push_next = worker_variable("push_next", (), tf.bool, True)
            copies = list(replica.trainable)
            trained = {c.ref() for c in copies}
            grads = clipped([(dense(g), c) for g, c in zip(tf.gradients(self.loss, copies), copies) if g is not None],
                            clip_norm)
            moments, decide = self._build_draws(grads)
            # Non-trainable state the model's update ops keep (batch-norm averages) moves on the copy: its move
            # since the last push goes to the shared variable whole, as each worker's update lands under ASP.
            kept = [(s, c, worker_variable(f"anchor_{k}", c.shape, c.dtype.base_dtype))
                    for k, (s, c) in enumerate(replica.pairs) if c.ref() not in trained]
        self._build_push(optimizer, grads, replica, kept, decide, global_step, samples, per_worker_batch)
        # A fetch: the shared model into the copy (and the kept state's anchors), and the global step it was at.
        groups = fused.by_server([(s, c) for s, c in replica.pairs if c.ref() in trained] + kept, self.name)
        with tf.device(global_step.device):
            at = tf.identity(global_step.read_value())
        with tf.device(device):
            self._fetch = tf.group(*fused.pull(groups, device), self._step_at_fetch.assign(at), name="b_fasgd_fetch")
        self._reset = tf.group(self._t.assign(0.0), self._v_max.assign(0.0), self._fetch_next.assign(False),
                               self._push_next.assign(True),
                               *[x.assign(tf.zeros_like(x)) for pair in moments for x in pair])
        self._params_in = {key: v1.placeholder(tf.float32, [], name=f"b_fasgd_{key}_in")
                           for key in ("fetch", "push", "decay", "power")}
        targets = {**self._c, "decay": self._decay, "power": self._power}
        self._set_params = tf.group(*[targets[key].assign(p) for key, p in self._params_in.items()])
        self._draws = [self._fetch_next.read_value(), self._push_next.read_value()]
        self._draw_fn = self._fetch_fn = None
        self._pushing = True
        self._counts = {"steps": 0, "fetches": 0, "pushes": 0}

    def _build_draws(self, grads):
        """(the gradients' moment variables, the op drawing the next step's fetch and push), on the worker."""
        moments = [(worker_variable(f"mean_{k}", c.shape, tf.float32),
                    worker_variable(f"square_{k}", c.shape, tf.float32)) for k, (_, c) in enumerate(grads)]
        # The moving mean and mean square of each gradient (bias-corrected, as Adam's), their standard
        # deviation averaged over every parameter: the paper's v. Then this worker's draws for the next step.
        t = self._t.assign_add(1.0)
        correction = 1.0 - tf.pow(self._decay, t)
        stds, count = [], 0
        for (g, _), (mean, square) in zip(grads, moments):
            g32 = tf.cast(g, tf.float32)
            m = mean.assign(self._decay * mean + (1.0 - self._decay) * g32)
            s = square.assign(self._decay * square + (1.0 - self._decay) * tf.square(g32))
            square_hat = s / correction
            variance = square_hat - tf.square(m / correction)
            # Below float32's resolution of the mean square it is rounding, not noise: a constant gradient
            # left ~1e-9 here, which the normalization by the maximum below would read as full noise.
            variance = tf.where(variance > RESOLUTION * square_hat, variance, tf.zeros_like(variance))
            stds.append(tf.reduce_sum(tf.sqrt(variance)))
            count += int(g.shape.num_elements())
        v = tf.add_n(stds) / float(max(count, 1))
        v_max = self._v_max.assign(tf.maximum(self._v_max, v))
        self.v = tf.math.divide_no_nan(v, v_max)
        decide = tf.group(
            self._fetch_next.assign(tf.random.uniform([]) < transmit_probability(self._c["fetch"], self.v)),
            self._push_next.assign(tf.random.uniform([]) < transmit_probability(self._c["push"], self.v)))
        return moments, decide

    def _build_push(self, optimizer, grads, replica, kept, decide, global_step, samples, per_worker_batch) -> None:
        """The two step calls: the push (the gradient staleness-scaled onto the shared model, the kept state's
        move added) and the drop (the samples counted, nothing sent)."""
        shared_of = {copy.ref(): shared for shared, copy in replica.pairs}
        # The global step is read once the gradients exist (as StalenessMeter.at_apply reads it): without the
        # dependency the server reads it as the step starts, and the updates that land while this worker computes
        # go uncounted, in the record and in the scale (quickstart, 2 workers, fetch 0: 0.34 read at the start,
        # 0.64 read after the gradients).
        with tf.device(global_step.device), tf.control_dependencies([g for g, _ in grads]):
            staleness = tf.maximum(global_step.read_value() - self._step_at_fetch.read_value(), 0)
            scale = staleness_scale(staleness, self._power.read_value())
        self.staleness = staleness
        scaled = []
        for g, copy in grads:
            shared = shared_of[copy.ref()]
            with tf.device(shared.device):
                scaled.append((g * tf.cast(scale, g.dtype), shared))
        counting = CountingOptimizer(optimizer, samples, per_worker_batch, self.name)
        update = counting.apply_gradients(scaled, global_step, after=[staleness])
        kept_groups = fused.by_server(kept, self.name)
        moved = fused.push_add(kept_groups, replica.device, lambda item: item[1].read_value() - item[2].read_value())
        with tf.control_dependencies(moved), tf.device(replica.device):
            rebased = [anchor.assign(copy.read_value(), read_value=False) for _, copy, anchor in kept]
        self._push = (tf.group(update, self.meter.record(staleness), decide, *rebased, name="b_fasgd_push"),
                      counting.counted)
        with tf.control_dependencies([decide]), v1.colocate_with(samples):
            dropped = samples.assign_add(tf.constant(per_worker_batch, tf.int64))
        self._drop = (tf.group(decide, dropped, name="b_fasgd_drop"), dropped)

    # The step is the push or the drop, as this worker's last draw said (two session callables).
    @property
    def train_op(self):
        return (self._push if self._pushing else self._drop)[0]

    @property
    def samples_after(self):
        return (self._push if self._pushing else self._drop)[1]

    def enter_worker(self, session, params: dict | None = None) -> None:
        params = params or {}
        defaults = {p.name: p.default for p in catalog.get(self.name).params}
        session.run(self._set_params, {p: float(params.get(key, defaults[key])) for key, p in self._params_in.items()})
        session.run([self._reset, self._fetch])  # the phase starts from the shared model
        self._pushing = True
        self._counts = {"steps": 0, "fetches": 0, "pushes": 0}

    def before_warm_up(self, session) -> None:
        # The fetch's first call registers its graph partitions: paid before training, not in the first step.
        session.run(self._fetch)

    def after_step(self, session, state) -> float:
        """Count the step; fetch now if this step drew a fetch; push or drop the next step's gradient as drawn."""
        self._counts["steps"] += 1
        self._counts["pushes"] += int(self._pushing)
        if self._draw_fn is None:
            self._draw_fn = session.make_callable(self._draws)
            self._fetch_fn = session.make_callable(self._fetch)
        fetch, push = self._draw_fn()
        if fetch:
            self._fetch_fn()
            self._counts["fetches"] += 1
        self._pushing = bool(push)
        return 0.0

    def stats(self, session) -> dict:
        steps = self._counts["steps"]
        return {**super().stats(session), **self._counts,
                "fetch_fraction": round(self._counts["fetches"] / steps, 4) if steps else None,
                "push_fraction": round(self._counts["pushes"] / steps, 4) if steps else None}
