"""The asynchronous driver's order of events: when a push is decided and when it lands."""

from __future__ import annotations

import types

import numpy as np

from syncswitch.simulator import drive
from syncswitch.simulator.cores import Cores
from syncswitch.simulator.rulebook import rule_for
from syncswitch.simulator.rules import Shared


class _Sim:
    """Two workers on cores of their own with fixed step times, a call of half a step, gradients of ones."""

    def __init__(self, steps: dict[int, float], until: int):
        self.workers, self.until, self.now = len(steps), until, 0.0
        self._steps = steps
        self.arrivals = types.SimpleNamespace(call=0.5)
        self.reports: list[tuple[float, int]] = []

    def cores(self):
        return Cores(None, 1.0)

    def step_time(self, worker):
        return self._steps[worker]

    def batch(self, worker):
        return worker

    def gradient(self, point, batch):
        return np.ones(2, np.float32), 0.0

    def before_update(self, rule):
        rule.lr, rule.momentum = 0.1, 0.0

    def after_update(self, rule, worker, loss, step_s, wait_s):
        self.reports.append((self.now, worker))
        return None


def test_specsync_decides_at_arrival_and_lands_when_its_call_ends():
    """Worker 0 pushes at 1.0 and waits half a step (to 1.5) for the decision's call; worker 1's push arrives at
    1.2, while worker 0's update is still in its call: counted 0 fresh, and it lands (at 1.8) on top of worker 0's,
    as the engine's cond applies an update after the peers' that landed since its count."""
    sim = _Sim({0: 1.0, 1: 1.2}, until=2)
    rule = rule_for("specsync", Shared(w=np.zeros(2, np.float32), v=np.zeros(2, np.float32)), 2,
                    {"abort_rate": 0.5, "abort_time": 0.0, "adaptive": False}, 1, 0)
    assert drive.run_async(sim, rule, until_samples=2) is None
    assert [round(push, 6) for _, push, _ in rule.log] == [1.5, 1.8]  # each when its call ended
    assert [w for _, _, w in rule.log] == [0, 1]
    assert rule.staleness == [0, 0]  # the count each was decided on: no update had landed at either arrival
    assert rule.s.step == 2 and rule.s.samples == 2
    np.testing.assert_allclose(rule.s.w, [-0.2, -0.2])  # both applied
    assert [round(t, 6) for t, _ in sim.reports] == [1.5, 1.8]


def test_a_rule_that_lands_at_once_applies_at_the_push():
    sim = _Sim({0: 1.0, 1: 1.2}, until=2)
    rule = rule_for("asp", Shared(w=np.zeros(2, np.float32), v=np.zeros(2, np.float32)), 2, {}, 1, 0)
    drive.run_async(sim, rule, until_samples=2)
    assert [round(t, 6) for t, _ in sim.reports] == [1.0, 1.2]
    assert rule.staleness == [0, 1]  # worker 1 read at 0.0, worker 0's update landed at 1.0
