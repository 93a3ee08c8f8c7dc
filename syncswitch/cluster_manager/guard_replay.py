"""What the accuracy guard would decide on recorded runs: their loss reports and evaluations fed through it again.

A recurring job's past runs are the best test of the guard's thresholds for it. The guard is deterministic
and sees nothing but the stream a run's metrics.jsonl records (loss reports, evaluations, divergence and
phase starts, in the order the manager received them), so replaying that stream with other settings says
what those settings would have done, up to the first rollback (after it the run trained another branch).
A run that never left synchronous training can be replayed as though an asynchronous phase began at a
fraction (`as_switch_at`): a verdict there fires on synchronous training's own noise, a false alarm. Such a run's
evaluations, and those of a run whose own guard was off, are fed where their checkpoints were written, as a watched
phase's come in: a run that held checkpoints back (`evaluation.live` holds every phase nobody watches) recorded
their scores after training, newest first, an order in which the latest is always the final model and no dip could
ever be judged (`_scored_live`). A guarded run's stream is fed as recorded: its own guard saw that order.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from syncswitch.errors import SpecError
from syncswitch.policies.base import Verdict
from syncswitch.policies.guard import DegradationGuard, GuardSettings
from syncswitch.policies.speed_settings import window_fraction
from syncswitch.protocols.catalog import synchronous
from syncswitch.runfolder import SUMMARY_FILE, find_run_dirs, read_records, read_summary
from syncswitch.spec.policy import guard_section

PREFIX = "policy.guard."


@dataclasses.dataclass(frozen=True)
class Replay:
    """One run replayed: what it was, what its own guard did, what the replayed guard decided."""

    run_dir: str
    status: str | None
    final_accuracy: float | None
    watched_from: float | None      # where the first watched asynchronous phase began (None: nothing watched)
    pretended: bool                 # that phase is `as_switch_at` on a synchronous run
    guarded: bool                   # the run's own guard was on
    recorded: dict | None           # the run's own first guard event
    verdict: Verdict | None         # the replayed guard's first verdict
    replayed_to: float              # the last fraction fed (the run's own rollback ends the replay)
    # Training progress (the furthest loss report) when the verdict came in: evaluations lag training, so an
    # accuracy verdict about 36% can arrive at 50%, and a rollback loses the asynchronous work up to here.
    decided_at: float | None = None
    rolls_back: bool | None = None  # the verdict's repair (`action`): a rollback, or a fall-back from the weights

    def line(self) -> str:
        name = os.path.basename(os.path.normpath(self.run_dir))
        acc = "-" if self.final_accuracy is None else f"{self.final_accuracy:.3f}"
        head = f"{name}: {self.status or '?'}, final accuracy {acc}"
        if self.watched_from is None and self.verdict is None:
            return f"{head}; no asynchronous phase after a synchronous one: nothing to watch"
        what = "pretended switch" if self.pretended else "asynchronous from"
        if self.verdict is None:
            said = f"quiet up to {self.replayed_to * 100:.1f}%"
        else:
            values = ", ".join(f"{k} {v:.4g}" for k, v in self.verdict.values.items())
            said = (f"{self.verdict.reason} verdict at {self.verdict.fraction * 100:.1f}% "
                    f"(onset {self.verdict.onset * 100:.1f}%; {values}), decided at {self.decided_at * 100:.1f}%, "
                    + ("rolling back" if self.rolls_back else "falling back from there"))
        own = ("quiet" if self.guarded else "off") if self.recorded is None else \
            f"{self.recorded.get('reason')} at {float(self.recorded.get('fraction', 0)) * 100:.1f}%, " \
            f"{self.recorded.get('action')}"
        where = "" if self.watched_from is None else f"; {what} {self.watched_from * 100:.1f}%"
        return f"{head}{where}: {said}; the run's own guard: {own}"

    def as_dict(self) -> dict:
        verdict = None if self.verdict is None else dataclasses.asdict(self.verdict)
        return {"run_dir": self.run_dir, "status": self.status, "final_accuracy": self.final_accuracy,
                "watched_from": self.watched_from, "pretended": self.pretended, "guarded": self.guarded,
                "recorded": self.recorded,
                "verdict": verdict, "replayed_to": self.replayed_to, "decided_at": self.decided_at,
                "rolls_back": self.rolls_back}


def settings_for(recorded: dict | None, overrides: dict[str, Any]) -> GuardSettings:
    """The run's own guard settings (defaults where it recorded none), switched on, then `overrides` (keys of
    `policy.guard`, with or without that prefix), validated as a spec's would be."""
    given = {}
    for key, value in overrides.items():
        given[key.removeprefix(PREFIX)] = value
    spec = guard_section(given)  # unknown keys and bad values fail here, named as policy.guard.KEY
    fields = {f.name for f in dataclasses.fields(GuardSettings)}
    base = {k: v for k, v in (recorded or {}).items() if k in fields and v is not None}
    base["reference"] = tuple(tuple(point) for point in base.get("reference") or ())
    base["enabled"] = True
    if recorded and "loss_rule" not in recorded:
        base["loss_rule"] = True  # recorded before the loss rule became optional: it was on
    settings = GuardSettings(**base)
    asked = (*given, "loss_rule")  # loss_rule too: a loss threshold given turns it on
    changed = {k: getattr(spec, k) for k in asked if k != "enabled" and getattr(spec, k, None) is not None}
    if "reference" in changed and not changed["reference"]:
        del changed["reference"]
    return dataclasses.replace(settings, **changed)


def _read(run_dir: str) -> tuple[dict, list[dict]]:
    summary = read_summary(run_dir).doc
    records = read_records(run_dir, required=True)
    if not isinstance(summary.get("schedule"), list):
        raise SpecError(f"{os.path.join(run_dir, SUMMARY_FILE)}: no phase schedule recorded; not a syncswitch run "
                        "summary")
    return summary, records


def _scored_live(records: list[dict]) -> list[dict]:
    """`records` with each evaluation moved to just after the last record at or before its fraction, in the order
    of the fractions: as if every checkpoint had been scored the moment it was written. The guard judges the latest
    evaluation by fraction; fed a held-back run's scores in their recorded order (1.0 first), it saw every dip with
    a healthier one already after it: replays of 8 real ResNet BSP runs, pretended switched at 0.25, found no
    verdict, where live scores give one on a dip to 0.47 and 0.45 after 0.61 (2026-11-29)."""
    scores = sorted((r for r in records if r.get("kind") == "evaluation" and r.get("fraction") is not None),
                    key=lambda r: r["fraction"])
    kept = {id(r) for r in scores}
    merged, next_score = [], 0
    for record in records:
        if id(record) in kept:
            continue
        fraction = record.get("fraction")
        while fraction is not None and next_score < len(scores) and scores[next_score]["fraction"] < fraction:
            merged.append(scores[next_score])
            next_score += 1
        merged.append(record)
    return merged + scores[next_score:]


def _window(summary: dict, phase: int) -> float:
    """The workload fraction one metrics window spanned in the run's `phase`, as the live guard was told."""
    batch = (summary["schedule"][phase].get("config") or {}).get("per_worker_batch")
    return window_fraction(summary.get("workers"), batch, summary.get("total_samples"))


def replay_run(run_dir: str, overrides: dict[str, Any] | None = None, as_switch_at: float | None = None) -> Replay:
    """Feed one run's recorded stream through a fresh guard; stops at its first verdict or the run's own rollback."""
    summary, records = _read(run_dir)
    schedule = summary["schedule"]
    guard = DegradationGuard(settings_for(summary.get("guard"), overrides or {}))
    ran_async = any(not synchronous(p.get("protocol", "bsp")) for p in schedule)
    pretend = as_switch_at if as_switch_at is not None and not ran_async else None
    watched_from, reached, trained, verdict = None, 0.0, 0.0, None
    recorded = next((r for r in records if r.get("kind") == "guard"), None)
    guarded = bool((summary.get("guard") or {}).get("enabled"))
    if pretend is not None:
        guard.on_phase("bsp", True, 0.0)  # every phase of the run was synchronous
    if pretend is not None or not guarded:  # no live guard asked for its scores as training went on
        records = _scored_live(records)
    stream = iter(records)
    for record in stream:
        kind, fraction = record.get("kind"), record.get("fraction")
        if kind == "guard":
            break  # the run rolled back: what follows is the fallback's branch
        if kind == "entered" and pretend is None and record.get("phase", -1) < len(schedule):
            protocol = schedule[record["phase"]].get("protocol", "bsp")
            guard.on_phase(protocol, synchronous(protocol), float(fraction or 0.0), _window(summary, record["phase"]))
            if guard.watching and watched_from is None:
                watched_from = float(fraction or 0.0)
            continue
        if kind not in ("metrics", "evaluation", "diverged") or fraction is None:
            continue
        if pretend is not None and watched_from is None and fraction >= pretend:
            guard.on_phase("asp", False, pretend)
            watched_from = pretend
        reached = max(reached, float(fraction))
        if kind == "metrics":
            trained = max(trained, float(fraction))
        if kind == "metrics" and record.get("loss") is not None:
            verdict = guard.on_loss(float(fraction), float(record["loss"]))
        elif kind == "evaluation" and not record.get("abandoned") and record.get("accuracy") is not None:
            verdict = guard.on_evaluation(float(fraction), float(record["accuracy"]))
        elif kind == "diverged":
            verdict = guard.on_divergence(float(fraction), float(record.get("loss", float("nan"))))
        if verdict is not None:
            break
    workers = int(summary.get("workers") or 1)
    rolls_back = None
    if verdict is not None:
        _feed_pause_reports(guard, stream, workers)
        rolls_back = guard.rolls_back(verdict, workers)
    if recorded is not None:
        recorded = {k: recorded.get(k) for k in ("reason", "fraction", "onset", "action", "values")}
    return Replay(run_dir, summary.get("status"), summary.get("final_accuracy"), watched_from, pretend is not None,
                  guarded, recorded, verdict, reached, None if verdict is None else max(trained, verdict.fraction),
                  rolls_back)


def _feed_pause_reports(guard: DegradationGuard, stream, workers: int) -> None:
    """The loss each worker reports as it pauses for the repair, which the repair's choice reads: the pause report
    where the run recorded one, else (older runs) each worker's next report after the verdict, its nearest stand-in."""
    seen: set = set()
    for record in stream:
        if record.get("kind") in ("guard", "entered") or len(seen) >= workers:
            return
        if record.get("kind") == "metrics" and record.get("loss") is not None and record.get("fraction") is not None:
            guard.on_loss(float(record["fraction"]), float(record["loss"]))
            seen.add(record.get("worker"))


def replay_runs(paths, overrides: dict[str, Any] | None = None, as_switch_at: float | None = None) -> list[Replay]:
    """Every run under `paths` (run folders or their parents), replayed in the order found."""
    if as_switch_at is not None and not 0.0 < as_switch_at < 1.0:
        raise SpecError(f"as_switch_at={as_switch_at}: must be a fraction of the workload strictly between 0 and 1")
    settings_for(None, overrides or {})  # a bad override fails once, before any run is read
    return [replay_run(d, overrides, as_switch_at) for d in find_run_dirs(paths)]


def tally(replays: list[Replay]) -> str:
    """One line: how many watched runs got a verdict, and where."""
    watched = [r for r in replays if r.watched_from is not None]
    fired = sorted(r.decided_at for r in watched if r.verdict is not None)
    where = f" (decided at {fired[0] * 100:.0f}-{fired[-1] * 100:.0f}%" if fired else ""
    falls = sum(r.verdict is not None and not r.rolls_back for r in watched)
    where += f"; {len(fired) - falls} rolled back, {falls} falling back from there)" if fired else ""
    return f"{len(fired)} of {len(watched)} watched run(s) would be repaired{where}; " \
           f"{len(replays) - len(watched)} had nothing to watch"
