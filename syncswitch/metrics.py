"""Metric definitions shared by runs, reports, the search, traces and the benchmarks: converged accuracy, time to
accuracy, and the target a comparison measures it against."""

from __future__ import annotations

import math
import statistics
from typing import Sequence

CONVERGENCE_TOLERANCE = 0.001  # "changed by no more than 0.1%": 0.1 accuracy point, absolute
CONVERGENCE_WINDOW = 5  # "for five evaluations"
# A comparison without a job target measures time to accuracy against the reference (BSP) runs' median converged
# accuracy less this margin: the median, not the mean, so that one collapsed reference run cannot move the bar.
TARGET_MARGIN = 0.01


def converged_accuracy(accuracies: Sequence[float], tolerance: float = CONVERGENCE_TOLERANCE,
                       window: int = CONVERGENCE_WINDOW) -> tuple[float | None, bool]:
    """The paper's converged accuracy: (value, converged?).

    Reading: a run has converged once `window` consecutive evaluations span at most `tolerance`;
    only the final plateau counts (a stable stretch before a switch or LR decay that the run later
    leaves is not convergence), so we walk back from the last evaluation over the trailing run of
    stable windows and report the accuracy at the evaluation that completes the earliest of them,
    the moment the run "is said to be converged". Fallback when the
    last `window` evaluations are not stable: the final evaluation, i.e. the model the workload
    produced (what the paper's published parser reads), flagged not converged.
    """
    accs = [float(a) for a in accuracies if a is not None and math.isfinite(float(a))]
    if not accs:
        return None, False
    found = None
    for start in range(len(accs) - window, -1, -1):
        part = accs[start:start + window]
        if max(part) - min(part) > tolerance + 1e-12:
            break
        found = start + window - 1
    if found is None:
        return accs[-1], False
    return accs[found], True


def time_to_accuracy(evaluations: Sequence[dict], target: float | None) -> float | None:
    """Seconds of training until the test accuracy first reached `target` (None if never or no target).

    The earliest `time_s` among the evaluations at or above the target, whatever order they come in (an evaluator
    scores the newest checkpoint first).
    """
    if target is None:
        return None
    times = [ev["time_s"] for ev in evaluations or () if ev.get("accuracy") is not None and ev["accuracy"] >= target]
    return min(times) if times else None


def reference_target(converged: Sequence[float | None]) -> float | None:
    """The default target: the reference runs' median converged accuracy less TARGET_MARGIN (None without one)."""
    values = [float(a) for a in converged if a is not None and math.isfinite(float(a))]
    return statistics.median(values) - TARGET_MARGIN if values else None


def median_time_to_accuracy(times: Sequence[float | None]) -> float | None:
    """Median over runs where None ("never reached the target") counts as infinitely late; None when the median
    itself is a miss (at least half the runs never got there)."""
    ordered = sorted(math.inf if t is None else t for t in times)
    n = len(ordered)
    if not n:
        return None
    mid = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
    return None if math.isinf(mid) else mid
