"""The simulator's server rules against the TensorFlow engines, step by step on one arrival order: the engine in a
local session with peers' updates landing where an asynchronous cluster puts them (while the step computes, or
between two steps), the rule given the same gradients and the same peer updates. Same weights, same staleness."""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
v1 = tf.compat.v1

from syncswitch.simulator.rules import Shared, rule_for  # noqa: E402
from tests.protocols import test_bfasgd, test_engines  # noqa: E402

MOMENTUM = 0.9
# Peer updates landing while each of six steps computes: none, one, several.
LATE = [0, 2, 1, 0, 3, 1]
PARAMS = {"dc-asgd": {"lambda": 2.0, "adaptive": True, "decay": 0.9}, "fasgd": {"power": 1.0}, "asp": {}}


def _rule(protocol, params, w0):
    rule = rule_for(protocol, Shared(w=w0.copy(), v=np.zeros_like(w0)), 4, params, test_engines.BATCH, 0)
    rule.lr, rule.momentum = test_engines.LR, MOMENTUM
    return rule


def _peer(rule, k, delta):
    """k updates by other workers: the weights move by `delta` (once, as the engine rig moves them), the step by k."""
    if k:
        rule.s.w = (rule.s.w + delta).astype(np.float32)
        rule.s.step += k


@pytest.mark.parametrize("protocol", ["asp", "fasgd", "dc-asgd"])
def test_an_asynchronous_rule_is_its_engine_step_by_step(protocol):
    rig = test_engines.Rig(protocol, momentum=MOMENTUM)
    rig.enter(**PARAMS[protocol])
    rule = _rule(protocol, PARAMS[protocol], test_engines.W0)
    for k in LATE:
        w, _, step = rig.step(k=k)
        point, stamp = rule.fetch(0)  # the step reads, then the peers' updates land, then it pushes
        _peer(rule, k, test_engines.DELTA)
        rule.apply_update(test_engines.G, stamp, 0)
        np.testing.assert_allclose(rule.s.w, w, rtol=1e-5, atol=1e-7)
        assert rule.s.step == step
    assert rule.stats()["staleness_mean"] == pytest.approx(rig.engine.stats(rig.session)["staleness_mean"], abs=1e-4)


def test_b_fasgd_is_its_engine_step_by_step():
    """Fetch after every step (c = 0): peers' updates landing while a step computes count from the copy's fetch;
    those landing between two steps, after the worker's fetch right after its push, are not in its copy and count
    too."""
    between = [0, 1, 0, 2, 0, 1]
    rig = test_bfasgd._Rig(momentum=MOMENTUM)
    params = {"fetch": 0.0, "push": 0.0, "decay": 0.99, "power": 1.0}
    rig.enter(**params)
    rule = _rule("b-fasgd", params, test_bfasgd.W0)
    with rig.graph.as_default():
        gap_in = v1.placeholder(tf.int64, [])
        peers_between = rig.global_step.assign_add(gap_in)
    for late, gap in zip(LATE, between):
        w, copy, _, step = rig.step(test_bfasgd.G, k=late)
        _, stamp = rule.fetch(0)
        rule.s.step += late  # the rig's peers move the global step only
        rule.apply_update(test_bfasgd.G, stamp, 0)
        np.testing.assert_allclose(rule.s.w, w, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(rule.copies[0], copy, rtol=1e-5, atol=1e-7)
        assert rule.s.step == step
        rig.session.run(peers_between, {gap_in: gap})
        rule.s.step += gap
    assert rule.stats()["staleness_mean"] == pytest.approx(rig.engine.stats(rig.session)["staleness_mean"], abs=1e-4)
    assert rule.stats()["staleness_mean"] == pytest.approx(np.mean(np.add(LATE, [0] + between[:-1])), abs=1e-4)
