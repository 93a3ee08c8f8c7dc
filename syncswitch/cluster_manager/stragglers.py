"""Stragglers at run time: the injection timeline, the detector, and a log of what the policy decided."""

from __future__ import annotations

import dataclasses

from syncswitch.cluster_manager.record import PolicyActionRecord
from syncswitch.policies import STRAGGLER_POLICIES, PolicyContext
from syncswitch.policies.detection import StragglerDetector
from syncswitch.protocols.catalog import synchronous
from syncswitch.wire import agent_pb2 as pb


@dataclasses.dataclass(frozen=True)
class Slowdown:
    """From now on, slow `worker` down by `delay_s` per step, or divide its node's CPU budget by `factor`
    (0 and 1: back to normal speed)."""

    worker: int
    delay_s: float = 0.0
    factor: float = 1.0


class StragglerController:
    """Per-run straggler state: the injection timeline, the detector, the policy and its action log.

    It touches nothing in the cluster: `on_progress` returns the slowdowns to apply and `on_metrics`
    the policy's actions; the job actuates both through its one command path.
    """

    def __init__(self, spec, num_workers: int, switch_to: str = "asp"):
        self.spec = spec
        self.num_workers = num_workers
        self.switch_to = switch_to  # the asynchronous protocol greedy's interlude runs
        self.policy = STRAGGLER_POLICIES.get(spec.policy)()
        # The spec records what the user gave; the detector's defaults fill the rest.
        given = {k: getattr(spec, k) for k in ("window_s", "consecutive", "min_gap") if getattr(spec, k) is not None}
        self.detector = StragglerDetector(num_workers, **given)
        self.pending = list(spec.injections)
        self.active: dict[int, dict] = {}
        self.injected: list[dict] = []
        self.actions: list[PolicyActionRecord] = []
        self.idle: set[int] = set()
        self.watching = True  # False once the BSP share is done: ASP is immune, nothing to detect
        self.t0: float | None = None

    def rel(self, t: float) -> float:
        return t - (self.t0 if self.t0 is not None else t)

    # -- injection --------------------------------------------------------------------------
    def on_progress(self, fraction: float, now: float) -> list[Slowdown]:
        """The slowdowns that come due at `fraction` and the ends of those whose time is up."""
        out = []
        for worker, active in list(self.active.items()):
            if now >= active["until"]:
                out.append(Slowdown(worker))
                active["record"]["ended_at_s"] = self.rel(now)
                del self.active[worker]
        for injection in list(self.pending):
            if fraction >= injection.at and injection.worker not in self.active:
                self.pending.remove(injection)
                out.append(self._slowdown(injection))
                record = {"worker": injection.worker, "at": injection.at, "method": self.spec.method,
                          "delay_ms": injection.delay_ms, "slowdown": injection.slowdown,
                          "duration_s": injection.duration_s, "started_at_s": self.rel(now), "ended_at_s": None,
                          "started_at_fraction": fraction}
                self.injected.append(record)
                self.active[injection.worker] = {"until": now + injection.duration_s, "record": record,
                                                 "injection": injection}
        return out

    def _slowdown(self, injection) -> Slowdown:
        if self.spec.method == "cpu":
            return Slowdown(injection.worker, factor=injection.slowdown)
        return Slowdown(injection.worker, delay_s=injection.delay_ms / 1000.0)

    def reapply(self) -> list[Slowdown]:
        """Relaunched tasks start without a delay: the delays still under way (a CPU budget is the node's,
        it outlives the task)."""
        if self.spec.method == "cpu":
            return []
        return [self._slowdown(active["injection"]) for active in self.active.values()]

    def finish(self, now: float) -> None:
        for worker, active in list(self.active.items()):
            active["record"]["ended_at_s"] = self.rel(now)
        self.active.clear()

    # -- detection and policy -----------------------------------------------------------------
    def on_metrics(self, worker: int, local_steps: int, busy_s: float | None, now: float, protocol: str,
                   scheduled: str) -> tuple[list, list]:
        """Feed one worker's progress; returns (detector events, policy actions) to log and actuate."""
        if not self.watching:
            return [], []
        if worker not in self.idle:
            self.detector.observe(worker, self.rel(now), int(local_steps), busy_s=busy_s)
        events = self.detector.tick(self.rel(now))
        actions = []
        for found in events:
            ctx = PolicyContext(now_s=self.rel(now), protocol=protocol, stragglers=self.detector.stragglers,
                                idle=frozenset(self.idle), num_workers=self.num_workers,
                                bsp_share_done=not self.watching, scheduled=scheduled,
                                switch_to=self.switch_to, rates=dict(self.detector.last_rates),
                                synchronous=synchronous(protocol))
            hook = self.policy.on_detected if found.kind == "detected" else self.policy.on_cleared
            for action in hook(found.worker, ctx):
                if action.kind == "shrink":
                    fresh = tuple(w for w in action.workers if w not in self.idle)
                    if not fresh:
                        continue
                    self.idle.update(fresh)
                    for w in fresh:
                        self.detector.exclude(w)
                    action = dataclasses.replace(action, workers=fresh)
                actions.append(action)
        return events, actions

    def record_action(self, action, decided_at: float, **extra) -> PolicyActionRecord:
        entry = PolicyActionRecord(self.rel(decided_at), action.kind, action.protocol, list(action.workers),
                                   action.reason, **extra)
        self.actions.append(entry)
        return entry

    def phase_changed(self, bsp_share_done: bool) -> None:
        """At every switch: the group is whole again and a switch pause must not read as slowness."""
        for worker in self.idle:
            self.detector.include(worker)
        self.idle.clear()
        self.detector.reset()
        self.watching = not bsp_share_done

    def summary(self) -> dict:
        detector = self.detector
        return {"straggler_policy": self.policy.name,
                "straggler_detection": {"window_s": detector.window_s, "consecutive": detector.consecutive,
                                        "min_gap": detector.min_gap},
                "straggler_events": self.detector.events_summary(),
                "policy_actions": [a.as_dict() for a in self.actions],
                "injected_stragglers": self.injected}


class StragglerResponder:
    """Carries out what the straggler runtime decides, through the nodes' one command path.

    Injected slowdowns become SetDelay commands (or the backend's CPU budgets); elastic's shrink sets the chief's
    group size and idles the stragglers; greedy's switch moves the running phase's boundary to the current
    progress and changes the plan. `guard_rolled_back()` says whether the guard fell back from asynchronous training
    in this run (greedy then does not go back to it).
    """

    def __init__(self, controller: StragglerController, ctx, nodes, guard_rolled_back):
        self.controller = controller
        self.ctx = ctx
        self.nodes = nodes
        self.guard_rolled_back = guard_rolled_back
        self.idle_entries: dict[int, tuple[PolicyActionRecord, float]] = {}  # worker -> (its shrink, decided at)
        self.declined = False  # greedy asked to go asynchronous after a guard rollback (said once)

    def on_metrics(self, source: int, metrics, received: float, fraction: float, k: int | None) -> None:
        """Apply the injections due, then, while phase `k` runs, feed the detector and actuate the policy."""
        ctx, ctl = self.ctx, self.controller
        for slowdown in ctl.on_progress(fraction, received):
            self._apply_slowdown(slowdown)
        if k is None:
            return
        running = ctx.plan[k].protocol
        scheduled = "bsp" if ctx.plan.greedy_tail is not None else running
        found, actions = ctl.on_metrics(source, metrics.local_steps, metrics.busy_s, received, running, scheduled)
        for item in found:
            entry = dataclasses.asdict(item)
            entry["change"] = entry.pop("kind")
            ctx.note("straggler", received, **entry)
            ctx.scalar(f"stragglers/worker{item.worker}", 1.0 if item.kind == "detected" else 0.0, fraction, received)
            ctx.bar.message(f"straggler {item.kind}: worker {item.worker} ({item.throughput:.2f} steps/s, "
                            f"threshold {item.threshold:.2f})")
        for action in actions:
            if action.kind == "shrink":
                self._shrink(action, received)
            elif action.kind == "switch":
                self._policy_switch(k, action, received, fraction)

    def reapply(self) -> None:
        """Relaunched tasks start without a delay: restore the slowdowns still under way."""
        for slowdown in self.controller.reapply():
            self._apply_slowdown(slowdown)

    def on_idled(self, worker: int, received: float) -> None:
        entry, decided = self.idle_entries.pop(worker, (None, None))
        if entry is not None:  # the action's cost: until its last straggler left the group
            entry.cost_at_least(received - decided)

    def _apply_slowdown(self, slowdown: Slowdown) -> None:
        if self.controller.spec.method == "cpu":
            if slowdown.factor > 1.0:
                self.nodes.backend.slow_node(slowdown.worker, slowdown.factor)
            else:
                self.nodes.backend.restore_node(slowdown.worker)
        else:
            self.nodes.send(slowdown.worker, set_delay=pb.SetDelay(delay_s=slowdown.delay_s))

    def _shrink(self, action, now: float) -> None:
        """Elastic: aggregate only the healthy workers' gradients; the stragglers idle until the switch."""
        nodes = self.nodes
        size = nodes.workers - len(self.controller.idle)
        entry = self.controller.record_action(action, now, group_size=size)
        nodes.send(0, set_group=pb.SetGroup(size=size))
        for worker in action.workers:
            self.idle_entries[worker] = (entry, now)
            nodes.send(worker, idle=pb.Idle())
        self.ctx.note("policy_action", now, **entry.as_dict())

    def _policy_switch(self, k: int, action, now: float, fraction: float) -> None:
        """Greedy: end the running phase at the current progress and continue with `action.protocol`."""
        ctx = self.ctx
        run = ctx.phase_run(k)
        if run.paused or run.policy_switch is not None or ctx.plan[k].protocol == action.protocol:
            return  # the phase is ending anyway, or already runs that protocol
        asynchronous = not synchronous(action.protocol)
        if asynchronous and self.guard_rolled_back():
            # The guard rolled asynchronous training back in this run: a straggler is no reason to go back to it.
            if not self.declined:
                self.declined = True
                ctx.bar.message(f"greedy: not switching to {action.protocol} ({action.reason}): the guard fell "
                                "back from asynchronous training in this run")
            return
        if asynchronous:
            ctx.plan.interrupt(k, fraction)
        else:
            ctx.plan.resume(k, fraction)
        entry = self.controller.record_action(action, now, at_fraction=fraction)
        run.policy_switch = (now, entry)
        ctx.note("policy_action", now, **entry.as_dict())
        self.nodes.broadcast(set_boundary=pb.SetBoundary(phase=k, until=fraction))
