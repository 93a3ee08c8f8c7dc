"""Appendix-B binary search for the earliest BSP->ASP switch point that keeps BSP-level accuracy."""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Callable, Iterable, MutableMapping, Sequence

from syncswitch.errors import SyncSwitchError

BSP = 1.0
ASP = 0.0


class SearchError(SyncSwitchError):
    """A search parameter is invalid or the reference runs gave no usable accuracy."""

    exit_code = 2


@dataclasses.dataclass(frozen=True)
class PilotResult:
    """What one pilot training reported; `converged_accuracy` None/NaN means it failed or diverged.

    `rolled_back`: the accuracy guard condemned the pilot's asynchronous phase and the run finished on
    its fallback protocol. Its accuracy is the fallback's, not the switch's, so it cannot vouch for the
    switch point: the pilot counts as failed there.
    """

    converged_accuracy: float | None
    total_time_s: float
    run_dir: str | None = None
    rolled_back: bool = False
    # The speed rule's trial found the switch target slower than BSP and the pilot went back to BSP: no switch point
    # buys time on this job, so the search stops there (pure BSP).
    slower: bool = False
    # Whether the pilot's training loss fell (search/pilot_runs.py); None where unknown. A run that did not train
    # completed, but its accuracy is an untrained model's: it can neither set the target nor vouch for a point.
    learned: bool | None = None
    # Whether the pilot left BSP (its summary records a switch); None where unknown. A pilot that stayed synchronous
    # (the switch rule waited past the end, the speed rule saw no gain worth a trial) ran nothing of its switch
    # target: it says nothing of the target's parameters (search/period_search.py).
    switched: bool | None = None

    @property
    def ok(self) -> bool:
        a = self.converged_accuracy
        return a is not None and math.isfinite(a) and not self.rolled_back and self.learned is not False


RunPilot = Callable[[float, int], PilotResult]
PilotCache = MutableMapping[tuple[float, int], PilotResult]


@dataclasses.dataclass(frozen=True)
class PointResult:
    """One explored setting: its pilots' accuracies and whether their mean met the target."""

    switch_at: float
    accuracies: tuple[float | None, ...]
    mean_accuracy: float | None
    accepted: bool
    time_s: float
    reused: int


@dataclasses.dataclass(frozen=True)
class SearchResult:
    """Outcome of one search; `switch_at` is 1.0 (pure BSP) when no earlier switch qualified."""

    switch_at: float
    target_accuracy: float
    threshold: float
    reference: tuple[float | None, ...]  # BSP reference accuracies (empty when A was given)
    points: tuple[PointResult, ...]
    cost_s: float  # every pilot's training time, reused ones included: what the search costs
    cost_bsp: float | None  # cost_s in multiples of one BSP training (median reference time)
    bsp_time_s: float | None
    runs: int  # pilots the search needed (reference + candidates)
    new_runs: int  # of which actually launched by this call (the rest came from the cache)
    stopped: str  # "max-settings" | "grid-exhausted" | "target-slower"
    # The run folders of the BSP reference pilots that completed: the accuracy guard's reference for later runs
    reference_runs: tuple[str, ...] = ()

    @property
    def chosen(self) -> PointResult | None:
        for p in self.points:
            if p.switch_at == self.switch_at:
                return p
        return None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def cache_key(switch_at: float, repeat: int) -> tuple[float, int]:
    # Rounded so 0.1+0.2-style float noise in grid arithmetic never misses a cached run.
    return (round(float(switch_at), 9), int(repeat))


def dyadic_grid(max_settings: int) -> tuple[float, ...]:
    """Every point plain bisection of [0, 1] can reach in `max_settings` steps: k / 2**M."""
    n = 2 ** max(1, min(int(max_settings), 20))
    return tuple(k / n for k in range(1, n))


def snap(lower: float, upper: float, grid: Sequence[float]) -> float | None:
    """The grid point strictly inside (lower, upper) nearest the midpoint; ties go to the earlier switch.

    The earlier switch wins a tie because the paper's objective is a switch point as early as possible
    (T(s) close to T(ASP)); None when the grid has nothing left between the bounds.
    """
    mid = (lower + upper) / 2
    best = None
    for g in grid:
        if lower < g < upper and (best is None or (abs(g - mid), g) < (abs(best - mid), best)):
            best = g
    return best


def bisect(grid: Sequence[float], max_settings: int, accept: Callable[[float], bool]) -> tuple[float, list[float], str]:
    """Bisection on [ASP, BSP] over `grid`; returns (upper bound, points tried, why it stopped)."""
    lower, upper = ASP, BSP
    tried: list[float] = []
    while len(tried) < max_settings:
        s = snap(lower, upper, grid)
        if s is None:
            return upper, tried, "grid-exhausted"
        tried.append(s)
        if accept(s):
            upper = s
        else:
            lower = s
    return upper, tried, "max-settings"


def within(accuracy: float | None, target: float, threshold: float, two_sided: bool = True) -> bool:
    """Algorithm 1's test: the mean converged accuracy lies in [A - beta, A + beta]."""
    if accuracy is None or not math.isfinite(accuracy):
        return False
    if accuracy < target - threshold - 1e-12:
        return False
    return not two_sided or accuracy <= target + threshold + 1e-12


def _validate(max_settings, threshold, runs, bsp_runs, target_accuracy, grid) -> tuple[float, ...]:
    if isinstance(max_settings, bool) or not isinstance(max_settings, int) or max_settings < 1:
        raise SearchError(f"max_settings={max_settings!r}: must be an integer >= 1")
    if not isinstance(threshold, (int, float)) or not math.isfinite(threshold) or not 0 <= threshold < 1:
        raise SearchError(f"threshold={threshold!r}: must be a number in [0, 1) (0.01 = one accuracy point)")
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise SearchError(f"runs={runs!r}: must be an integer >= 1")
    if isinstance(bsp_runs, bool) or not isinstance(bsp_runs, int) or bsp_runs < 0:
        raise SearchError(f"bsp_runs={bsp_runs!r}: must be an integer >= 0")
    if target_accuracy is None and bsp_runs == 0:
        raise SearchError("bsp_runs=0 needs target_accuracy: without BSP reference runs there is no target")
    if target_accuracy is not None and (not isinstance(target_accuracy, (int, float))
                                        or not 0 <= target_accuracy <= 1):
        raise SearchError(f"target_accuracy={target_accuracy!r}: must be a number in [0, 1]")
    points = tuple(sorted({float(g) for g in (grid if grid is not None else dyadic_grid(max_settings))}))
    bad = [g for g in points if not 0 < g < 1]
    if bad:
        raise SearchError(f"grid: points must lie strictly between 0 (ASP) and 1 (BSP), got {bad[0]!r}")
    if not points:
        raise SearchError("grid: no candidate switch points")
    return points


class Pilots:
    """Runs or reuses pilots and keeps the search's accounts: what they cost, how many ran and how many were new."""

    def __init__(self, run_pilot: RunPilot, cache: PilotCache, emit: Callable[..., None]):
        self.run_pilot, self.cache, self.emit = run_pilot, cache, emit
        self.cost = 0.0
        self.runs = 0
        self.new = 0

    def get(self, switch_at: float, repeat: int, role: str) -> tuple[PilotResult, bool]:
        """(the pilot's result, whether it came from the cache)."""
        key = cache_key(switch_at, repeat)
        result = self.cache.get(key)
        reused = result is not None
        if reused:
            self._emit_result("pilot_reused", switch_at, repeat, role, result)
        else:
            self.emit("pilot_start", switch_at=switch_at, repeat=repeat, role=role)
            result = self.run_pilot(switch_at, repeat)
            if not isinstance(result, PilotResult):
                raise SearchError(f"run_pilot({switch_at}, {repeat}) returned {type(result).__name__}, not PilotResult")
            self.cache[key] = result
            self.new += 1
            self._emit_result("pilot_done", switch_at, repeat, role, result)
        self.cost += float(result.total_time_s)
        self.runs += 1
        return result, reused

    def _emit_result(self, kind: str, switch_at: float, repeat: int, role: str, result: PilotResult) -> None:
        self.emit(kind, switch_at=switch_at, repeat=repeat, role=role, accuracy=result.converged_accuracy,
                  time_s=result.total_time_s, run_dir=result.run_dir, rolled_back=result.rolled_back,
                  learned=result.learned, slower=result.slower)


@dataclasses.dataclass(frozen=True)
class _Reference:
    """The accuracy A to reach, and the BSP reference pilots that set it (none when A was given)."""

    target: float
    accuracies: tuple[float | None, ...] = ()
    runs: tuple[str, ...] = ()
    times: tuple[float, ...] = ()


def _reference(pilots: Pilots, bsp_runs: int, target_accuracy: float | None) -> _Reference:
    if target_accuracy is not None:
        return _Reference(float(target_accuracy))
    pilots.emit("reference", runs=bsp_runs)
    results = [pilots.get(BSP, r, "reference")[0] for r in range(bsp_runs)]
    accuracies = tuple(r.converged_accuracy if r.ok else None for r in results)
    usable = [a for a in accuracies if a is not None]
    if not usable:
        untrained = [r for r in results if r.learned is False]
        if untrained:
            raise SearchError(
                f"{len(untrained)} of {bsp_runs} BSP reference run(s) did not train (the training loss ended no lower "
                f"than it began, e.g. {untrained[0].run_dir}/metrics.jsonl) and the rest failed: their accuracy is an "
                "untrained model's, no target to search against; give the job a learning rate and batch size that "
                "train on this many workers, or give the target accuracy")
        raise SearchError(f"all {bsp_runs} BSP reference run(s) failed; no target accuracy to search against")
    return _Reference(statistics.fmean(usable), accuracies, tuple(r.run_dir for r in results if r.ok and r.run_dir),
                      tuple(r.total_time_s for r in results))


class _TargetSlower(Exception):
    """Most pilots' trials found the switch target slower than BSP: every switch point would go back the same way."""


class SpeedTrials:
    """The speed trials of the search's pilots so far: how many tried the target, how many found it slower.

    One trial is a fraction of a second of throughput on a shared machine: on a 4-worker MLP whose local SGD five
    pilots measured at 1.15-1.47x BSP's, a sixth measured 0.91x and went back. So the target counts as slower
    where most trials found it so (every trial so far, at every point), not where one did. The period search
    counts its pilots' trials the same way (period_search.py)."""

    def __init__(self):
        self.tried = self.slower = 0

    def add(self, results: list[PilotResult]) -> None:
        for p in results:
            if p.slower or p.switched:  # a pilot the switch rule kept synchronous tried nothing
                self.tried += 1
                self.slower += bool(p.slower)

    @property
    def target_slower(self) -> bool:
        return self.slower * 2 > self.tried


def _setting_test(pilots: Pilots, runs: int, target: float, threshold: float, two_sided: bool,
                  explored: list[PointResult]) -> Callable[[float], bool]:
    """Whether a switch point keeps A: its `runs` pilots' mean accuracy within the threshold; records each point."""
    trials = SpeedTrials()

    def accept(s: float) -> bool:
        before = pilots.cost
        got = [pilots.get(s, r, "candidate") for r in range(runs)]
        accs = tuple(p.converged_accuracy if p.ok else None for p, _ in got)
        # A failed pilot fails its setting: it cannot vouch for BSP-level accuracy.
        mean = statistics.fmean(accs) if all(a is not None for a in accs) else None
        kept = within(mean, target, threshold, two_sided)
        # A pilot its trial sent back ran BSP from the trial's start: it cannot vouch for the point either.
        went_back = sum(bool(p.slower) for p, _ in got)
        ok = kept and not went_back
        trials.add([p for p, _ in got])
        explored.append(PointResult(s, accs, mean, ok, pilots.cost - before, sum(r for _, r in got)))
        pilots.emit("setting_done", index=len(explored), switch_at=s, accuracies=accs, mean_accuracy=mean,
                    accepted=ok, within_margin=kept, went_back=went_back)
        if trials.target_slower:
            raise _TargetSlower()
        return ok

    return accept


def binary_search(
    run_pilot: RunPilot,
    *,
    max_settings: int = 5,
    threshold: float = 0.01,
    runs: int = 1,
    bsp_runs: int = 1,
    target_accuracy: float | None = None,
    grid: Iterable[float] | None = None,
    cache: PilotCache | None = None,
    on_event: Callable[..., None] | None = None,
    two_sided: bool = True,
    bsp_time_s: float | None = None,
) -> SearchResult:
    """Find the earliest switch point whose mean converged accuracy over `runs` pilots is within `threshold` of A.

    A is `target_accuracy` or, when None, the mean of `bsp_runs` pure-BSP pilots. `cache` maps
    (switch_at, repeat) to earlier PilotResults so repeated searches reuse finished pilots.
    `on_event(kind, **info)` sees: reference, pilot_start, pilot_done, pilot_reused, target,
    setting_done, done. `bsp_time_s` gives the BSP time used for cost multiples when no reference
    runs are made (recurring jobs).
    """
    points_grid = _validate(max_settings, threshold, runs, bsp_runs, target_accuracy, grid)
    pilots = Pilots(run_pilot, {} if cache is None else cache, on_event or (lambda kind, **info: None))
    ref = _reference(pilots, bsp_runs, target_accuracy)
    pilots.emit("target", target_accuracy=ref.target, threshold=threshold, reference=ref.accuracies)
    explored: list[PointResult] = []
    accept = _setting_test(pilots, runs, ref.target, threshold, two_sided, explored)
    try:
        switch_at, _, stopped = bisect(points_grid, max_settings, accept)
    except _TargetSlower:  # the speed rule's verdict holds at any switch point: the job stays synchronous
        switch_at, stopped = BSP, "target-slower"
    ref_time = statistics.median(ref.times) if ref.times else bsp_time_s
    result = SearchResult(
        switch_at=switch_at,
        target_accuracy=ref.target,
        threshold=float(threshold),
        reference=ref.accuracies,
        points=tuple(explored),
        cost_s=pilots.cost,
        cost_bsp=(pilots.cost / ref_time) if ref_time else None,
        bsp_time_s=ref_time,
        runs=pilots.runs,
        new_runs=pilots.new,
        stopped=stopped,
        reference_runs=ref.runs,
    )
    pilots.emit("done", switch_at=switch_at, cost_s=result.cost_s, cost_bsp=result.cost_bsp, runs=result.runs,
                new_runs=result.new_runs, stopped=stopped)
    return result
