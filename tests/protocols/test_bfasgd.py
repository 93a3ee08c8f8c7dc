"""B-FASGD's engine against numpy: the paper's transmit rule, staleness counted from the last fetch, drops."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
tf = pytest.importorskip("tensorflow")
v1 = tf.compat.v1

from syncswitch.protocols.engines import build_engines  # noqa: E402
from syncswitch.protocols.engines.bfasgd import transmit_probability  # noqa: E402

W0 = np.array([1.0, -2.0, 0.5], np.float32)
G = np.array([0.3, -0.2, 0.1], np.float32)
LR = 0.1
BATCH = 8


class _Rig:
    """One worker: shared weights `w`, its copy, loss = g . copy with g fed, so the gradient is whatever is fed."""

    def __init__(self, momentum: float = 0.0):
        from syncswitch.node.replica import Replica
        from syncswitch.protocols.engines.base import localize

        self.graph = tf.Graph()
        with self.graph.as_default():
            tf.random.set_seed(0)
            self.global_step = v1.train.get_or_create_global_step()
            self.samples = v1.get_variable("samples", [], tf.int64, v1.zeros_initializer(), trainable=False)
            self.w = v1.get_variable("w", initializer=W0)
            self.g_in = v1.placeholder(tf.float32, [3])
            # `k` peer updates land while the step computes: after it started, before its gradient exists.
            self.k_in = v1.placeholder_with_default(tf.constant(0, tf.int64), [])
            peer = self.global_step.assign_add(self.k_in)
            with tf.control_dependencies([peer]):
                g = self.g_late = tf.identity(self.g_in)
            self.copy = v1.get_variable("copy", initializer=np.zeros(3, np.float32))
            localize(self.graph, [self.copy])
            replica = Replica(tf.reduce_sum(self.copy * g), [(self.w, self.copy)], [self.copy], device="")
            optimizer = v1.train.MomentumOptimizer(LR, momentum)
            self.engine = build_engines(["b-fasgd"], optimizer, [(tf.zeros([3]), self.w)], self.global_step,
                                        self.samples, {"b-fasgd": BATCH}, 1, True, replica=replica)["b-fasgd"]
            init = [v1.global_variables_initializer(), v1.local_variables_initializer()]
        self.session = v1.Session(graph=self.graph)
        self.session.run(init)

    def enter(self, **params):
        self.engine.enter_chief(self.session, params)
        self.engine.enter_worker(self.session, params)

    def step(self, g=G, k=0):
        self.session.run([self.engine.train_op, self.engine.samples_after], {self.g_in: g, self.k_in: k})
        self.engine.after_step(self.session, None)
        return self.session.run([self.w, self.copy, self.samples, self.global_step])


def test_transmit_probability_is_the_papers_equation_9():
    assert transmit_probability(0.0, 0.0) == 1.0  # c = 0: always
    assert transmit_probability(1.0, 1.0) == pytest.approx(0.5)
    assert transmit_probability(3.0, 1.0) == pytest.approx(0.25)
    assert transmit_probability(1.0, 0.0) < 1e-7  # no gradient noise: (almost) never
    v = np.linspace(0.0, 1.0, 11)
    assert np.all(np.diff(transmit_probability(2.0, v)) > 0)  # noisier gradients are sent more often


def test_fetching_after_every_step_is_plain_sgd_on_the_shared_model():
    rig = _Rig()
    rig.enter(fetch=0.0, push=0.0)
    for k in range(1, 4):
        w, copy, samples, step = rig.step()
        np.testing.assert_allclose(w, W0 - k * LR * G, rtol=1e-6)
        np.testing.assert_allclose(copy, w)  # fetched after the step
        assert samples == k * BATCH and step == k
    stats = rig.engine.stats(rig.session)
    assert stats["fetch_fraction"] == 1.0 and stats["push_fraction"] == 1.0 and stats["staleness_mean"] == 0.0


def test_without_fetches_the_staleness_grows_from_the_last_fetch_and_scales_the_rate():
    rig = _Rig()
    rig.enter(fetch=1e6, push=0.0, power=1.0)  # a constant gradient has no noise: p(fetch) is ~0
    expected = W0.copy()
    for k in range(1, 5):
        w, copy, _, _ = rig.step()
        staleness = k - 1  # the updates since the fetch at the phase's entry (this worker's own)
        expected = expected - LR * G / max(1, staleness)
        np.testing.assert_allclose(w, expected, rtol=1e-6)
        np.testing.assert_allclose(copy, W0)  # never refreshed
    stats = rig.engine.stats(rig.session)
    assert stats["fetches"] == 0 and stats["staleness_mean"] == pytest.approx(np.mean([0, 1, 2, 3]))


def test_updates_landing_while_the_step_computes_count_in_its_staleness():
    """The global step is read once the gradient exists: the peers' updates made meanwhile count, in the record
    and in the rate's scale (read at the step's start they would not)."""
    from syncswitch.node.updates import ancestors

    rig = _Rig()
    assert rig.engine.staleness.op in ancestors([rig.engine.train_op])
    assert rig.g_late.op in ancestors([rig.engine.staleness])  # the gradient's input: read after it
    rig.enter(fetch=0.0, push=0.0, power=1.0)
    w, copy, _, step = rig.step(k=3)  # fetched at the entry (step 0); 3 peer updates while computing
    np.testing.assert_allclose(w, W0 - LR * G / 3, rtol=1e-6)
    assert step == 4
    stats = rig.engine.stats(rig.session)
    assert stats["staleness_mean"] == 3.0


def test_fetch_rate_follows_gradient_noise():
    """Noisy gradients at c = 1: about one fetch in two (v is in units of its maximum); none without noise."""
    rig = _Rig()
    rig.enter(fetch=1.0, push=0.0, decay=0.9)
    rng = np.random.default_rng(0)
    for _ in range(300):
        rig.step(G + rng.normal(0.0, 1.0, 3).astype(np.float32))
    noisy = rig.engine.stats(rig.session)["fetch_fraction"]
    assert 0.3 < noisy < 0.6
    rig.enter(fetch=1.0, push=0.0)
    for _ in range(50):
        rig.step()
    assert rig.engine.stats(rig.session)["fetches"] == 0


def test_a_dropped_push_counts_the_samples_and_leaves_the_shared_model():
    rig = _Rig()
    rig.enter(fetch=0.0, push=1e6)  # the first gradient goes (no draw yet); without noise no later one does
    w1, _, _, _ = rig.step()
    np.testing.assert_allclose(w1, W0 - LR * G, rtol=1e-6)
    for k in range(2, 5):
        w, _, samples, step = rig.step()
        np.testing.assert_allclose(w, w1)
        assert samples == k * BATCH and step == 1
    stats = rig.engine.stats(rig.session)
    assert stats["pushes"] == 1 and stats["push_fraction"] == 0.25


def test_parameters_left_out_take_the_catalogs_defaults():
    from syncswitch.protocols import catalog

    rig = _Rig()
    rig.enter()
    defaults = {p.name: p.default for p in catalog.get("b-fasgd").params}
    engine = rig.engine
    got = rig.session.run({"fetch": engine._c["fetch"], "push": engine._c["push"], "decay": engine._decay,
                           "power": engine._power})
    assert got == pytest.approx(defaults)
