"""`policy.guard.reference`: earlier runs of the job whose evaluations say what accuracy it had reached where.

A recurring job has been trained before, often with BSP. The guard compares an asynchronous phase's
evaluations with that curve at the same fraction of the workload, which catches an ASP phase that never
collapses but falls steadily behind synchronous training (a reference before the switch cannot).
"""

from __future__ import annotations

import json
import math
import os
import statistics
from typing import Any

from syncswitch.errors import SpecError

MIN_POINTS = 2


def _evaluations(path: str, field: str) -> list[tuple[float, float]]:
    """(fraction, accuracy) of one run: its folder (summary.json inside) or a summary.json itself."""
    file = os.path.join(path, "summary.json") if os.path.isdir(path) else path
    try:
        with open(file, encoding="utf-8") as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        raise SpecError(f"{field}: no such run folder or summary {file}") from None
    except (OSError, ValueError) as exc:
        raise SpecError(f"{field}: {file} is not a run summary ({exc})") from None
    points = []
    for e in (doc.get("evaluations") if isinstance(doc, dict) else None) or []:
        try:
            fraction, accuracy = float(e["fraction"]), float(e["accuracy"])
        except (KeyError, TypeError, ValueError):
            continue
        if math.isfinite(fraction) and math.isfinite(accuracy) and 0.0 < fraction <= 1.0 + 1e-9:
            points.append((fraction, accuracy))
    if len(points) < MIN_POINTS:
        raise SpecError(f"{field}: {file} has {len(points)} evaluation(s); a reference needs at least {MIN_POINTS}")
    return sorted(points)


def interpolate(curve, fraction: float) -> float | None:
    """The curve's accuracy at `fraction` (linear between points, the last value after them); None before it."""
    if not curve or fraction < curve[0][0]:
        return None
    for (f0, a0), (f1, a1) in zip(curve, curve[1:]):
        if fraction <= f1:
            return a0 + (a1 - a0) * (fraction - f0) / (f1 - f0) if f1 > f0 else a1
    return curve[-1][1]


def load_reference(value: Any, base: str, field: str = "policy.guard.reference") -> tuple[tuple[float, float], ...]:
    """One run or a list of runs (paths relative to the spec file); several are combined by their median at
    every fraction any of them was evaluated at, so one lucky or unlucky run does not set the bar."""
    if value is None:
        return ()
    paths = [value] if isinstance(value, str) else value
    if not isinstance(paths, (list, tuple)) or not paths or not all(isinstance(p, str) and p for p in paths):
        raise SpecError(f"{field}={value!r}: must be a run folder or summary.json, or a list of them")
    curves = [_evaluations(os.path.normpath(os.path.join(base, p)), field) for p in paths]
    fractions = sorted({f for curve in curves for f, _ in curve})
    combined = []
    for fraction in fractions:
        values = [a for a in (interpolate(c, fraction) for c in curves) if a is not None]
        combined.append((round(fraction, 6), round(statistics.median(values), 6)))
    return tuple(combined)
