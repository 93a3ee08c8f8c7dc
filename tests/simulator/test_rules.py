"""The simulator's server rules against the TensorFlow engines, step by step on one arrival order: the engine in a
local session with peers' updates landing where an asynchronous cluster puts them (while the step computes, or
between two steps), the rule given the same gradients and the same peer updates. Same weights, same staleness."""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
v1 = tf.compat.v1

from syncswitch.simulator.rulebook import rule_for  # noqa: E402
from syncswitch.simulator.rules import Shared  # noqa: E402
from tests.protocols import test_bfasgd, test_engines  # noqa: E402

MOMENTUM = 0.9
# Peer updates landing while each of six steps computes: none, one, several.
LATE = [0, 2, 1, 0, 3, 1]
PARAMS = {"dc-asgd": {"lambda": 2.0, "adaptive": True, "decay": 0.9}, "fasgd": {"power": 1.0}, "asp": {}}


def _rule(protocol, params, w0, workers=4):
    rule = rule_for(protocol, Shared(w=w0.copy(), v=np.zeros_like(w0)), workers, params, test_engines.BATCH, 0)
    rule.lr, rule.momentum = test_engines.LR, MOMENTUM
    return rule


def _peer(rule, k, delta):
    """k updates by other workers: the weights move by `delta` (once, as the engine rig moves them), the step by k."""
    if k:
        rule.s.w = (rule.s.w + delta).astype(np.float32)
        rule.s.step += k


@pytest.mark.parametrize("clip_norm", [None, 0.1])
@pytest.mark.parametrize("protocol", ["asp", "fasgd", "dc-asgd"])
def test_an_asynchronous_rule_is_its_engine_step_by_step(protocol, clip_norm):
    """hyperparameters.clip_norm 0.1 (G's norm is 0.37): the worker's gradient clipped before the rule, as the
    engine clips it before FASGD's scale and DC-ASGD's compensation."""
    rig = test_engines.Rig(protocol, momentum=MOMENTUM, clip_norm=clip_norm)
    rig.enter(**PARAMS[protocol])
    rule = _rule(protocol, PARAMS[protocol], test_engines.W0)
    rule.clip_norm = clip_norm
    for k in LATE:
        w, _, step = rig.step(k=k)
        point, stamp = rule.fetch(0)  # the step reads, then the peers' updates land, then it pushes
        _peer(rule, k, test_engines.DELTA)
        rule.apply_update(rule.worker_gradient(test_engines.G), stamp, 0)
        np.testing.assert_allclose(rule.s.w, w, rtol=1e-5, atol=1e-7)
        assert rule.s.step == step
    assert rule.stats()["staleness_mean"] == pytest.approx(rig.engine.stats(rig.session)["staleness_mean"], abs=1e-4)


def test_b_fasgd_is_its_engine_step_by_step():
    """Fetch after every step (c = 0). The engine fetches in `after_step`, the rule as the worker's next step
    starts: put at one point of the arrival order (after the push, before the peers' updates that land between
    two steps), the two copies are the same. Peers' updates landing while a step computes and between two steps,
    after the fetch, are not in the copy and count."""
    between = [0, 1, 0, 2, 0, 1]
    rig = test_bfasgd._Rig(momentum=MOMENTUM)
    params = {"fetch": 0.0, "push": 0.0, "decay": 0.99, "power": 1.0}
    rig.enter(**params)
    rule = _rule("b-fasgd", params, test_bfasgd.W0)
    with rig.graph.as_default():
        gap_in = v1.placeholder(tf.int64, [])
        peers_between = rig.global_step.assign_add(gap_in)
    copy = test_bfasgd.W0
    for late, gap in zip(LATE, between):
        w, engine_copy, _, step = rig.step(test_bfasgd.G, k=late)  # compute, k peers land, push, fetch
        point, stamp = rule.fetch(0)  # the rule's fetch of the previous step's draw: before this step's peers
        np.testing.assert_allclose(point, copy, rtol=1e-5, atol=1e-7)
        rule.s.step += late  # the rig's peers move the global step only
        rule.apply_update(test_bfasgd.G, stamp, 0)
        np.testing.assert_allclose(rule.s.w, w, rtol=1e-5, atol=1e-7)
        assert rule.s.step == step
        copy = engine_copy
        rig.session.run(peers_between, {gap_in: gap})
        np.testing.assert_allclose(rule.fetch(0)[0], copy, rtol=1e-5, atol=1e-7)  # due: the fetch runs here
        rule.s.step += gap
    assert rule.stats()["staleness_mean"] == pytest.approx(rig.engine.stats(rig.session)["staleness_mean"], abs=1e-4)
    assert rule.stats()["staleness_mean"] == pytest.approx(np.mean(np.add(LATE, [0] + between[:-1])), abs=1e-4)


def test_b_fasgd_fetches_as_the_next_step_starts_so_a_peer_push_before_it_is_in_the_copy():
    """The fetch a step draws runs when the worker's next step reads, not with its push: a peer's update that lands
    in between is in the copy and not counted stale (at 2 workers a fetch atomic with the push would count every
    peer push: staleness 1.0 whatever the arrival order)."""
    w0 = np.zeros(3, np.float32)
    rule = _rule("b-fasgd", {"fetch": 0.0, "push": 0.0, "decay": 0.99, "power": 1.0}, w0)
    g = np.ones(3, np.float32)
    _, stamp = rule.fetch(0)
    rule.apply_update(g, stamp, 0)  # worker 0 pushes; its fetch is due
    _, stamp1 = rule.fetch(1)
    rule.apply_update(g, stamp1, 1)  # worker 1's push lands before worker 0's next step starts
    point, stamp = rule.fetch(0)
    np.testing.assert_array_equal(point, rule.s.w)
    assert stamp == rule.s.step == 2
    rule.apply_update(g, stamp, 0)
    assert rule.staleness[-1] == 0


def test_ssp_and_specsync_make_a_call_outside_their_window_and_the_others_none():
    from syncswitch.simulator.rulebook import RULES

    assert {name for name, rule in RULES.items() if rule.calls} == {"ssp", "specsync"}


def test_the_count_at_arrival_leaves_out_the_peers_landing_while_an_update_is_applied():
    """A worker reads at 0 and lands at 10: peers' updates landing in its last APPLY_WINDOW of the step (after
    10 - 0.07 x 10 = 9.3) are not in the count its engine read at arrival; its own earlier landing never counts."""
    from syncswitch.simulator.async_rules import APPLY_WINDOW, ArrivalCount

    assert APPLY_WINDOW == pytest.approx(0.07)
    count = ArrivalCount(4)
    count.read(0, 0.0)
    for t, worker in [(2.0, 1), (9.0, 2), (9.5, 3), (9.9, 1), (9.95, 0)]:
        count.land(worker, t)
    assert count.count(5, 0, 10.0) == 3      # 9.5 and 9.9 landed in the window; worker 0's own at 9.95 is not a peer
    assert count.count(1, 0, 10.0) == 0      # never below zero
    count.read(2, 10.0)
    assert count.count(0, 2, 10.0) == 0      # read and landing at once: no window


def test_fasgd_scales_by_the_count_at_arrival_and_records_the_landing_count():
    """Two updates of worker 0's step land in its window: its gradient is scaled as if 1 stale, its record says 3."""
    w0 = np.zeros(3, np.float32)
    rule = _rule("fasgd", {"power": 1.0}, w0)
    rule.now = 0.0
    _, stamp = rule.fetch(0)
    rule.s.step += 1
    rule.arrival.land(1, 1.0)
    rule.s.step += 2
    rule.arrival.land(2, 9.8)
    rule.arrival.land(3, 9.9)
    rule.now = 10.0
    rule.apply_update(np.ones(3, np.float32), stamp, 0)
    np.testing.assert_allclose(rule.s.w, -test_engines.LR * np.ones(3), rtol=1e-6)  # scale 1/max(1, 1): unscaled
    assert rule.stats()["staleness_mean"] == 3 and rule.stats()["arrival_staleness_mean"] == 1


def test_bsp_clips_the_groups_mean_and_local_sgd_each_workers_step():
    """BSP's update is the workers' mean, clipped (one worker at batch nB); a local SGD step is one worker's."""
    g = [test_engines.G, -3 * test_engines.G]  # mean -G (norm 0.37); worker 1's norm 1.12
    bsp = _rule("bsp", {"allreduce": False}, test_engines.W0, workers=2)
    bsp.clip_norm = 0.2
    for c in (0, 1):
        bsp.apply_update(bsp.worker_gradient(g[c]), 0, c)
    mean = -test_engines.G * 0.2 / np.linalg.norm(test_engines.G)
    np.testing.assert_allclose(bsp.s.w, test_engines.W0 - test_engines.LR * mean, rtol=1e-5)
    local = _rule("local-sgd", {"period": 1}, test_engines.W0, workers=2)
    local.clip_norm = 0.2
    for c in (0, 1):
        local.apply_update(local.worker_gradient(g[c]), 0, c)
    steps = [gc * 0.2 / np.linalg.norm(gc) for gc in g]
    np.testing.assert_allclose(local.s.w, test_engines.W0 - test_engines.LR * np.mean(steps, 0), rtol=1e-5)
