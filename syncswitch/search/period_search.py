"""After the switch point: the longest local-SGD period a job keeps its accuracy with.

Local SGD averages the workers' copies every `period` steps; a longer period means fewer averages, so a faster
phase on a cluster whose averages cost (on this project's 4-worker MNIST-1D job, periods 2/4/8 trained in
26.7/20.0/17.5 s), and copies that drift further apart, which costs accuracy on some jobs and not on others (5
seeds, periods 2/4/8: MNIST-1D 0.964/0.970/0.969, the quickstart 0.780/0.769/0.733; bench/notebook/
2026-11-27-coordinator-4.md). No default fits both, so a recurring job's search tries the longer periods at the
switch point it found, with the same pilots and the same test as the switch point (Algorithm 1's mean accuracy
within beta of A), and keeps the longest that passes and trains faster than the period before it.
"""

from __future__ import annotations

import dataclasses
import functools
import statistics
from typing import Callable, Sequence

from syncswitch.search.binary_search import (PilotCache, PilotResult, Pilots, RunPilot, SearchError, SpeedTrials,
                                              within)


@dataclasses.dataclass(frozen=True)
class PeriodTrial:
    """One period's pilots at the switch point: their accuracies, their median time, and the verdict."""

    period: int
    accuracies: tuple[float | None, ...]
    mean_accuracy: float | None
    time_s: float
    accepted: bool
    why: str  # "kept", "accuracy" (outside A +/- beta, or a pilot failed), "slower" (no faster than the last
    # period kept, or most speed trials so far went back to BSP), "went back" (a pilot's speed trial sent it back to
    # BSP: it cannot vouch for the period, but a few noisy trials do not end the search) or "stayed on BSP"


@dataclasses.dataclass(frozen=True)
class PeriodResult:
    period: int  # the period to run: the job's own where no longer one passed
    trials: tuple[PeriodTrial, ...]
    cost_s: float  # every period pilot's training time, cached ones included
    new_runs: int


def check_periods(periods: Sequence[int], base: int) -> tuple[int, ...]:
    """The periods to try, longest last: those above the job's own `base` (a shorter one cannot train faster)."""
    bad = [p for p in periods if isinstance(p, bool) or not isinstance(p, int) or not 1 <= p <= 10000]
    if bad:
        raise SearchError(f"--periods: {bad[0]!r} is not a local-SGD period (an integer in 1..10000)")
    return tuple(sorted({p for p in periods if p > base}))


def longest_period(pilots_for: Callable[[int], tuple[RunPilot, PilotCache]], switch_at: float, base: int,
                   base_times: Sequence[float], periods: Sequence[int], *, runs: int, target: float,
                   threshold: float, two_sided: bool = True,
                   on_event: Callable[..., None] | None = None) -> PeriodResult:
    """Try `periods` (longer than `base`, ascending) at `switch_at`, `runs` pilots each; stop at the first that
    fails (a longer period only lets the copies drift further), except where it failed only because a minority of
    the trials so far went back: one trial is a fraction of a second of throughput on a shared machine, and says
    nothing of the next period's accuracy (the switch point's search reads trials so too, SpeedTrials).
    `pilots_for(period)` gives that period's pilot runner and cache; `base_times` are the chosen switch point's
    pilot times at the job's own period (the caller tries no period where those pilots never left BSP)."""
    emit = on_event or (lambda kind, **info: None)
    kept, kept_time = base, statistics.median(base_times) if base_times else float("inf")
    trials: list[PeriodTrial] = []
    cost, new = 0.0, 0
    speed = SpeedTrials()
    for period in check_periods(list(periods), base):
        # The switch point's own runner-or-cache, its events tagged with the period they belong to.
        pilots = Pilots(*pilots_for(period), functools.partial(emit, period=period))
        results = [pilots.get(switch_at, repeat, "period")[0] for repeat in range(runs)]
        speed.add(results)
        trial = _judge(period, results, kept_time, target, threshold, two_sided, speed.target_slower)
        cost, new = cost + pilots.cost, new + pilots.new
        trials.append(trial)
        emit("period_done", trial=trial)
        if trial.why == "went back":
            continue
        if not trial.accepted:
            break
        kept, kept_time = period, trial.time_s
    return PeriodResult(kept, tuple(trials), cost, new)


def _judge(period: int, results: list[PilotResult], kept_time: float, target: float, threshold: float,
           two_sided: bool, target_slower: bool) -> PeriodTrial:
    accs = tuple(r.converged_accuracy if r.ok else None for r in results)
    mean = statistics.fmean(accs) if all(a is not None for a in accs) else None  # a failed pilot fails its period
    time_s = statistics.median(r.total_time_s for r in results)
    if any(r.switched is False for r in results):  # it ran no local SGD: nothing to judge the period by
        return PeriodTrial(period, accs, mean, time_s, False, "stayed on BSP")
    if target_slower:  # most trials so far sent their pilot back to BSP: the period buys no speed
        return PeriodTrial(period, accs, mean, time_s, False, "slower")
    if not within(mean, target, threshold, two_sided):
        return PeriodTrial(period, accs, mean, time_s, False, "accuracy")
    if any(r.slower for r in results):  # a pilot ran BSP from its trial's start: it cannot vouch for the period
        return PeriodTrial(period, accs, mean, time_s, False, "went back")
    if time_s >= kept_time:  # as slow as the shorter period: its accuracy risk would buy nothing
        return PeriodTrial(period, accs, mean, time_s, False, "slower")
    return PeriodTrial(period, accs, mean, time_s, True, "kept")
