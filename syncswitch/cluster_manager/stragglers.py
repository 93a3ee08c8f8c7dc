"""Stragglers at run time: inject slowdowns, feed the detector, and record what the policy decided."""

from __future__ import annotations

import dataclasses

from syncswitch.cluster_manager.profiler import StragglerDetector
from syncswitch.policies import STRAGGLER_POLICIES, PolicyContext
from syncswitch.spec import Phase


class StragglerController:
    """Per-run straggler state: the injection timeline, the detector, the policy and its action log.

    It decides nothing about the cluster itself: `on_metrics` returns the policy's actions and the
    manager actuates them, reporting back through `action_done`.
    """

    def __init__(self, spec, num_workers: int, send):
        self.spec = spec
        self.num_workers = num_workers
        self.send = send  # send(worker, command_dict)
        self.policy = STRAGGLER_POLICIES.get(spec.policy)()
        self.detector = StragglerDetector(num_workers, spec.window_s, spec.consecutive, min_gap=spec.min_gap)
        self.pending = list(spec.injections)
        self.active: dict[int, dict] = {}
        self.injected: list[dict] = []
        self.actions: list[dict] = []
        self.idle: set[int] = set()
        self.watching = True  # False once the BSP share is done: ASP is immune, nothing to detect
        self.t0: float | None = None

    def rel(self, t: float) -> float:
        return t - (self.t0 if self.t0 is not None else t)

    # -- injection --------------------------------------------------------------------------
    def on_progress(self, fraction: float, now: float) -> None:
        """Start slowdowns that came due and end those whose time is up."""
        for worker, active in list(self.active.items()):
            if now >= active["until"]:
                self.send(worker, {"cmd": "set_delay", "delay_s": 0.0})
                active["record"]["ended_at_s"] = self.rel(now)
                del self.active[worker]
        for injection in list(self.pending):
            if fraction >= injection.at and injection.worker not in self.active:
                self.pending.remove(injection)
                self.send(injection.worker, {"cmd": "set_delay", "delay_s": injection.delay_ms / 1000.0})
                record = {"worker": injection.worker, "at": injection.at, "delay_ms": injection.delay_ms,
                          "duration_s": injection.duration_s, "started_at_s": self.rel(now), "ended_at_s": None,
                          "started_at_fraction": fraction}
                self.injected.append(record)
                self.active[injection.worker] = {"until": now + injection.duration_s, "record": record}

    def reapply(self) -> None:
        """Relaunched tasks start without a delay: restore the slowdowns still under way."""
        for worker, active in self.active.items():
            self.send(worker, {"cmd": "set_delay", "delay_s": active["record"]["delay_ms"] / 1000.0})

    def finish(self, now: float) -> None:
        for worker, active in list(self.active.items()):
            active["record"]["ended_at_s"] = self.rel(now)
        self.active.clear()

    # -- detection and policy -----------------------------------------------------------------
    def on_metrics(self, worker: int, event: dict, now: float, protocol: str, scheduled: str) -> tuple[list, list]:
        """Feed one metrics event; returns (detector events, policy actions) to log and actuate."""
        if not self.watching or event.get("local_steps") is None:
            return [], []
        if worker not in self.idle:
            self.detector.observe(worker, self.rel(now), int(event["local_steps"]), busy_s=event.get("busy_s"))
        events = self.detector.tick(self.rel(now))
        actions = []
        for found in events:
            ctx = PolicyContext(now_s=self.rel(now), protocol=protocol, stragglers=self.detector.stragglers,
                                idle=frozenset(self.idle), num_workers=self.num_workers,
                                bsp_share_done=not self.watching, scheduled=scheduled)
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

    def record_action(self, action, decided_at: float, **extra) -> dict:
        entry = {"time_s": self.rel(decided_at), "action": action.kind, "protocol": action.protocol,
                 "workers": list(action.workers), "reason": action.reason, "overhead_s": None, **extra}
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
        return {"straggler_policy": self.policy.name,
                "straggler_events": self.detector.events_summary(),
                "policy_actions": self.actions,
                "injected_stragglers": self.injected}


def greedy_interrupt(phases: list, k: int, at: float, config_for) -> tuple[float, list]:
    """Cut BSP phase k at `at` and run ASP from there; returns the BSP share still owed and the
    schedule's later phases, which wait until the stragglers clear."""
    phase, config = phases[k]
    owed = max(0.0, phase.until - at)
    phases[k] = (Phase(phase.protocol, at), config)
    tail = phases[k + 1:]
    del phases[k + 1:]
    phases.append((Phase("asp", 1.0), config_for("asp")))  # to the end unless the stragglers clear
    return owed, tail


def greedy_resume(phases: list, k: int, at: float, owed: float, tail: list, config_for) -> None:
    """End ASP interlude k at `at`, owe the BSP share back, then continue with the schedule's tail."""
    phase, config = phases[k]
    phases[k] = (Phase(phase.protocol, at), config)
    bsp_until = min(1.0, at + owed)
    phases.append((Phase("bsp", bsp_until), config_for("bsp")))
    rest = [(p, c) for p, c in tail if p.until > bsp_until]
    if bsp_until < 1.0:
        if not rest:
            rest = [(Phase("asp", 1.0), config_for("asp"))]
        last_phase, last_config = rest[-1]
        rest[-1] = (Phase(last_phase.protocol, 1.0), last_config)
    phases.extend(rest)
