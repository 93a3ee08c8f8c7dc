"""Trace-driven replay of the binary search: cost, amortization and success per Table-II search setting."""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
from typing import Sequence

from syncswitch.errors import SpecError
from syncswitch.search.binary_search import BSP, PilotResult, binary_search, bisect, within
from syncswitch.search.traces import TraceError, TraceRun, TraceSet

ROW_KEYS = ("recurring", "bsp_runs", "candidate_runs", "search_cost", "amortized_recurrences",
            "effective_training", "success_probability")


@dataclasses.dataclass(frozen=True)
class Setting:
    """A search setting as in the paper's Table II: (recurring job?, BSP runs, runs per candidate)."""

    recurring: bool
    bsp_runs: int
    candidate_runs: int

    def __str__(self) -> str:
        return f"{'yes' if self.recurring else 'no'},{self.bsp_runs},{self.candidate_runs}"


# The rows of the paper's Table IV, in its order (the first is the baseline that uses every run).
TABLE_IV_SETTINGS = tuple(Setting(r, k, c) for r, k, c in (
    (False, 5, 5), (False, 4, 4), (False, 3, 3), (False, 2, 2), (False, 1, 1),
    (False, 1, 5), (False, 1, 4), (False, 1, 3), (False, 1, 2),
    (True, 0, 5), (True, 0, 4), (True, 0, 3), (True, 0, 2), (True, 0, 1)))

_YES = ("yes", "y", "true", "1")
_NO = ("no", "n", "false", "0")


def parse_setting(text: str, field: str = "--setting") -> Setting:
    """`yes|no,BSP_RUNS,CANDIDATE_RUNS`, e.g. `no,3,3` or `yes,0,2`."""
    parts = [p.strip() for p in str(text).strip("() ").split(",")]
    if len(parts) != 3:
        raise SpecError(f"{field}={text!r}: expected RECURRING,BSP_RUNS,CANDIDATE_RUNS such as no,3,3")
    rec = parts[0].lower()
    if rec not in _YES + _NO:
        raise SpecError(f"{field}={text!r}: recurring must be yes or no, got {parts[0]!r}")
    try:
        k, r = int(parts[1]), int(parts[2])
    except ValueError:
        raise SpecError(f"{field}={text!r}: BSP_RUNS and CANDIDATE_RUNS must be integers") from None
    recurring = rec in _YES
    if r < 1:
        raise SpecError(f"{field}={text!r}: CANDIDATE_RUNS must be >= 1")
    if k < 0:
        raise SpecError(f"{field}={text!r}: BSP_RUNS must be >= 0")
    if recurring and k != 0:
        raise SpecError(f"{field}={text!r}: a recurring job reuses its stored target, so BSP_RUNS must be 0")
    if not recurring and k == 0:
        raise SpecError(f"{field}={text!r}: a new job needs BSP_RUNS >= 1 to set its target accuracy")
    return Setting(recurring, k, r)


def draw(pool: Sequence[TraceRun], k: int, rng: random.Random) -> list[TraceRun]:
    """k runs without replacement; once the pool is used up a fresh shuffled pass continues.

    So R runs of a point that has R logs use each log once, and a point with fewer logs than R
    uses all of them before repeating any (repeating is the only way to stand for R pilots).
    """
    out: list[TraceRun] = []
    while len(out) < k:
        batch = list(pool)
        rng.shuffle(batch)
        out.extend(batch)
    return out[:k]


@dataclasses.dataclass(frozen=True)
class Baseline:
    """The search with every logged run: its answer defines success for the sampled settings."""

    switch_at: float
    target_accuracy: float
    bsp_time_s: float
    time_ratio: float  # median time at switch_at / median BSP time
    points: tuple[tuple[float, float, bool, int], ...]  # (switch_at, pooled mean, accepted, runs)
    grid: tuple[float, ...]
    stopped: str


@dataclasses.dataclass(frozen=True)
class Report:
    name: str
    source: str
    trials: int
    threshold: float
    max_settings: int
    seed: int
    baseline: Baseline
    rows: tuple[dict, ...]
    skipped: tuple[str, ...]  # logs left out (cut short or without accuracy)


def _mean_acc(runs: Sequence[TraceRun]) -> float:
    return statistics.fmean(r.converged_accuracy for r in runs)


def prepare(traces: TraceSet) -> tuple[dict[float, list[TraceRun]], tuple[float, ...]]:
    pools = traces.pools()
    if not pools.get(BSP):
        raise TraceError(f"{traces.source}: no complete pure-BSP run (bsp_fraction 1.0); the target needs one")
    grid = tuple(s for s in pools if 0.0 < s < 1.0)
    if not grid:
        raise TraceError(f"{traces.source}: no complete BSP->ASP runs with 0 < bsp_fraction < 1 to search over")
    return pools, grid


def baseline(traces: TraceSet, threshold: float = 0.01, max_settings: int = 5, two_sided: bool = True) -> Baseline:
    pools, grid = prepare(traces)
    target = _mean_acc(pools[BSP])
    tried: list[tuple[float, float, bool, int]] = []

    def accept(s: float) -> bool:
        mean = _mean_acc(pools[s])
        ok = within(mean, target, threshold, two_sided)
        tried.append((s, mean, ok, len(pools[s])))
        return ok

    answer, _, stopped = bisect(grid, max_settings, accept)
    bsp_time = statistics.median(r.total_time_s for r in pools[BSP])
    ratio = statistics.median(r.total_time_s for r in pools[answer]) / bsp_time
    return Baseline(answer, target, bsp_time, ratio, tuple(tried), grid, stopped)


def simulate_setting(traces: TraceSet, setting: Setting, base: Baseline, *, trials: int, threshold: float,
                     max_settings: int, seed: int, two_sided: bool = True) -> dict:
    """Replay `trials` searches drawing logged runs; one row with the ROW_KEYS."""
    pools, grid = prepare(traces)
    rng = random.Random(f"{seed}/{setting}")  # per-setting stream: rows do not depend on each other
    hits, cost, valid = 0, 0.0, 0
    for _ in range(trials):
        draws: dict[float, list[TraceRun]] = {}

        def replay(s: float, repeat: int) -> PilotResult:
            if s not in draws:
                draws[s] = draw(pools[s], setting.bsp_runs if s == BSP else setting.candidate_runs, rng)
            run = draws[s][repeat]
            return PilotResult(run.converged_accuracy, run.total_time_s, run.source)

        result = binary_search(
            replay, max_settings=max_settings, threshold=threshold, runs=setting.candidate_runs,
            bsp_runs=setting.bsp_runs, target_accuracy=base.target_accuracy if setting.recurring else None,
            grid=grid, two_sided=two_sided, bsp_time_s=base.bsp_time_s)
        hits += result.switch_at == base.switch_at
        cost += result.cost_s / base.bsp_time_s
        # Sessions whose model is usable: the BSP references and every pilot of an accepted setting.
        valid += setting.bsp_runs + setting.candidate_runs * sum(p.accepted for p in result.points)
    search_cost = cost / trials
    saving = 1.0 - base.time_ratio
    return {
        "recurring": setting.recurring,
        "bsp_runs": setting.bsp_runs,
        "candidate_runs": setting.candidate_runs,
        "search_cost": round(search_cost, 4),
        "amortized_recurrences": round(search_cost / saving, 4) if saving > 0 else None,
        "effective_training": round(valid / cost, 4) if cost > 0 else None,
        "success_probability": round(hits / trials, 4),
    }


def simulate(traces: TraceSet, settings: Sequence[Setting] = TABLE_IV_SETTINGS, *, trials: int = 1000,
             threshold: float = 0.01, max_settings: int = 5, seed: int = 0, two_sided: bool = True) -> Report:
    """Replay the search for each setting on `traces` (see docs/search.md for the reading)."""
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise SpecError(f"--trials={trials!r}: must be an integer >= 1")
    if not isinstance(threshold, (int, float)) or not 0 <= threshold < 1 or math.isnan(threshold):
        raise SpecError(f"--threshold={threshold!r}: must be in [0, 1) (0.01 = one accuracy point)")
    if isinstance(max_settings, bool) or not isinstance(max_settings, int) or max_settings < 1:
        raise SpecError(f"--max-settings={max_settings!r}: must be an integer >= 1")
    base = baseline(traces, threshold, max_settings, two_sided)
    rows = tuple(simulate_setting(traces, s, base, trials=trials, threshold=threshold,
                                  max_settings=max_settings, seed=seed, two_sided=two_sided) for s in settings)
    skipped = tuple(r.source for r in traces.skipped())
    return Report(traces.name, traces.source, trials, threshold, max_settings, seed, base, rows, skipped)


def format_table(report: Report) -> str:
    b = report.baseline
    path = ", ".join(f"{s:.4g}{'+' if ok else '-'}" for s, _, ok, _ in b.points)
    lines = [
        f"{report.name}: baseline (every run) switches at {b.switch_at:.4g}; target {b.target_accuracy:.4f} "
        f"+/- {report.threshold:g}; one BSP training = {b.bsp_time_s:.0f} s; path {path}",
        f"{report.trials} trials per setting, seed {report.seed}, max settings {report.max_settings}"
        + (f"; {len(report.skipped)} log(s) skipped as incomplete" if report.skipped else ""),
        "",
        f"{'setting (rec,K,R)':<20}{'search cost':>12}{'amortized':>11}{'effective':>11}{'success':>9}",
    ]
    for row in report.rows:
        setting = f"({'yes' if row['recurring'] else 'no'},{row['bsp_runs']},{row['candidate_runs']})"
        amort = "-" if row["amortized_recurrences"] is None else f"{row['amortized_recurrences']:.2f}"
        eff = "-" if row["effective_training"] is None else f"{row['effective_training']:.2f}X"
        lines.append(f"{setting:<20}{row['search_cost']:>11.2f}X{amort:>11}{eff:>11}"
                     f"{row['success_probability'] * 100:>8.1f}%")
    return "\n".join(lines)
