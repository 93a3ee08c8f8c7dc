"""The two ways workers take turns: asynchronous arrivals (an event queue) and synchronous rounds.

Both call the same hooks of the simulation: `batch(worker)`, `gradient(point, batch, worker)`, `before_update()`
(the rate at the current sample count) and `after_update(worker, loss, step_s, wait_s)`, which records the worker's
report, evaluates at the evaluation points and returns a guard verdict or None. A driver returns when the phase's
sample budget is spent or a verdict came in.
"""

from __future__ import annotations


def run_async(sim, rule, until_samples: int):
    """Each worker reads when its step gets a core, computes and pushes; pushes are applied in time order."""
    cpu = sim.cores()
    began, reads = {}, {}
    for c in range(sim.workers):
        start(cpu, sim, rule, sim.now, c)
    parked: list[int] = []
    while rule.s.samples < min(until_samples, sim.until):
        event = cpu.next()
        if event is None:
            break
        kind, t, c = event
        sim.now = rule.now = t
        if kind == "read":
            began[c], reads[c] = t, rule.fetch(c)
            continue
        point, stamp = reads[c]
        g, loss = sim.gradient(point, sim.batch(c), c)
        sim.before_update(rule)
        rule.apply_update(rule.worker_gradient(g), stamp, c)
        verdict = sim.after_update(rule, c, loss, t - began[c], 0.0)
        if verdict is not None:
            return verdict
        if rule.blocked(c):
            parked.append(c)
        else:
            start(cpu, sim, rule, t, c)
        for w in [w for w in parked if not rule.blocked(w)]:  # the slowest moved on: SSP's waiters go
            parked.remove(w)
            start(cpu, sim, rule, t, w)
    return None


def start(cpu, sim, rule, now: float, worker: int) -> None:
    """The worker's next step: its time from the arrival model, of which the rule's blocking calls outside its
    read-to-update window (`rule.calls` of them, each `call` of a step) are spent off the cores before the read;
    on a network, its pull and push wait there too (before the read: the update lands as the compute ends, so a
    push's time on the link counts once per step without moving the read's staleness window)."""
    work = sim.step_time(worker)
    waiting = min(rule.calls * sim.arrivals.call, 0.9) * work
    cpu.start(now, worker, work - waiting, waiting + sim.transfer(rule, worker, now))


def run_rounds(sim, rule, until_samples: int):
    """Every worker reads at the round's start and takes `round_steps` steps (fewer where the phase ends first);
    under BSP the first m to finish are aggregated (the rest dropped, their gradients never computed), under local
    SGD all average at the end. A step lands on every worker before any reports it: a real worker counts the
    group's n batches a step, so each one's count after step i is the same, and the chief's checkpoint there
    holds its copy after step i (the average, at a round's last step)."""
    while rule.s.samples < min(until_samples, sim.until):
        steps = rule.begin_round(min(until_samples, sim.until) - rule.s.samples)
        start = sim.now
        finish = sim.cores().finish_times([sum(sim.step_time(c) for _ in range(steps))
                                           for c in range(sim.workers)])
        order = sorted(range(sim.workers), key=lambda c: (finish[c], c))
        if rule.name == "bsp":
            order = order[:rule.needed]
        end = start + finish[order[-1]]
        end += sim.communicate(rule, end, len(order))
        first = FirstSteps(sim, rule, order)
        for i in range(steps):
            sim.before_update(rule)  # the rate at the count every worker's step i reads it at
            losses = []
            for c in order:
                point, stamp = rule.fetch(c)
                g, loss = first.take(c) if i == 0 else sim.gradient(point, sim.batch(c), c)
                sim.now = rule.now = end
                rule.apply_update(rule.worker_gradient(g), stamp, c)
                losses.append(loss)
            for c, loss in zip(order, losses):
                verdict = sim.after_update(rule, c, loss, finish[c] / steps, (end - start - finish[c]) / steps)
                if verdict is not None:
                    return verdict
        sim.now = end
    return None


class FirstSteps:
    """Each worker's first step of a round, computed for all of them in one call: every worker reads the same
    parameters at a round's start (BSP's, local SGD's averaged copy), and the gradients are those of one call per
    worker, bit for bit. Each worker's batches stay in their order; another worker's first gradient is computed
    before this one's updates land, which no update of the round reads."""

    def __init__(self, sim, rule, order: list[int]):
        point = rule.fetch(order[0])[0]
        assert all(rule.fetch(c)[0] is point for c in order), "a round's workers read different parameters"
        self.sim, batches = sim, [sim.batch(c) for c in order]
        self._steps = {c: (batch, out) for c, batch, out in zip(order, batches,
                                                                 sim.gradients(point, batches, order))}

    def take(self, worker: int) -> tuple:
        """(gradient, loss) of the worker's first step."""
        return self._steps.pop(worker)[1]
