"""The two ways workers take turns: asynchronous arrivals (an event queue) and synchronous rounds.

Both call the same hooks of the simulation: `batch(worker)`, `gradient(point, batch)`, `before_update()` (the
rate at the current sample count) and `after_update(worker, loss, step_s, wait_s)`, which records the worker's
report, evaluates at the evaluation points and returns a guard verdict or None. A driver returns when the phase's
sample budget is spent or a verdict came in.
"""

from __future__ import annotations

import heapq


def run_async(sim, rule, until_samples: int):
    """Each worker reads, computes for its step time and pushes; the earliest push is applied next."""
    start = sim.now
    queue, reads = [], {}
    for c in range(sim.workers):
        reads[c] = rule.fetch(c)
        heapq.heappush(queue, (start + sim.step_time(c), c, start))
    parked: list[int] = []
    while queue and rule.s.samples < until_samples:
        t, c, began = heapq.heappop(queue)
        sim.now = rule.now = t
        point, stamp = reads[c]
        g, loss = sim.gradient(point, sim.batch(c))
        sim.before_update(rule)
        rule.apply_update(g, stamp, c)
        verdict = sim.after_update(rule, c, loss, t - began, 0.0)
        if verdict is not None:
            return verdict
        if rule.blocked(c):
            parked.append(c)
        else:
            reads[c] = rule.fetch(c)
            heapq.heappush(queue, (t + sim.step_time(c), c, t))
        for w in [w for w in parked if not rule.blocked(w)]:  # the slowest moved on: SSP's waiters go
            parked.remove(w)
            reads[w] = rule.fetch(w)
            heapq.heappush(queue, (t + sim.step_time(w), w, t))
    return None


def run_rounds(sim, rule, until_samples: int):
    """Every worker reads at the round's start and takes `round_steps` steps; under BSP the first m to finish are
    aggregated (the rest dropped, their gradients never computed), under local SGD all average at the end."""
    while rule.s.samples < until_samples:
        start = sim.now
        finish = {}
        for c in range(sim.workers):
            finish[c] = sum(sim.step_time(c) for _ in range(rule.round_steps))
        order = sorted(range(sim.workers), key=lambda c: (finish[c], c))
        if rule.name == "bsp":
            order = order[:rule.needed]
        end = start + finish[order[-1]]
        sim.before_update(rule)  # one rate for the round: every worker read at its start
        for c in order:
            busy = finish[c] / rule.round_steps
            for _ in range(rule.round_steps):
                point, stamp = rule.fetch(c)
                g, loss = sim.gradient(point, sim.batch(c))
                sim.now = rule.now = end
                rule.apply_update(g, stamp, c)
                verdict = sim.after_update(rule, c, loss, busy, (end - start - finish[c]) / rule.round_steps)
                if verdict is not None:
                    return verdict
        sim.now = end
    return None
