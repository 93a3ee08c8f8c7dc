"""The asynchronous driver's order of events: a push lands at once, before the read its freed core starts."""

from __future__ import annotations

import types

import numpy as np

from syncswitch.simulator import drive
from syncswitch.simulator.cores import Cores
from syncswitch.simulator.rulebook import rule_for
from syncswitch.simulator.rules import Shared


class _Sim:
    """Two workers on cores of their own with fixed step times, gradients of ones."""

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

    def transfer(self, rule, worker, now):
        return 0.0  # no network

    def gradient(self, point, batch, worker=0):
        return np.ones(2, np.float32), 0.0

    def before_update(self, rule):
        rule.lr, rule.momentum = 0.1, 0.0

    def after_update(self, rule, worker, loss, step_s, wait_s):
        self.reports.append((self.now, worker))
        return None


def test_an_asynchronous_push_lands_when_it_arrives():
    sim = _Sim({0: 1.0, 1: 1.2}, until=2)
    rule = rule_for("asp", Shared(w=np.zeros(2, np.float32), v=np.zeros(2, np.float32)), 2, {}, 1, 0)
    drive.run_async(sim, rule, until_samples=2)
    assert [round(t, 6) for t, _ in sim.reports] == [1.0, 1.2]
    assert rule.staleness == [0, 1]  # worker 1 read at 0.0, worker 0's update landed at 1.0
