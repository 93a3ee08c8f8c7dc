"""How close an arrival model's per-update staleness is to a real run's: the real side from the per-update record
an instrumented run keeps (SYNCSWITCH_UPDATE_LOG=1: the phase's `measured["update_log"]`, update_log.py), the
simulated side from the model's arrivals alone (no gradients), as many updates, several seeds.

The comparison's models are calibrated to the real mean; what tells them apart is the shape, the tail above all (an
update 6 or more steps stale on a 4-worker run): `chi_square` weighs the pmf in bins 0..BINS-2 and BINS-1 or more.
"""

from __future__ import annotations

import numpy as np

from syncswitch.simulator.arrivals import arrival_model
from syncswitch.simulator.cores import asp_staleness

BINS = 11  # staleness 0..9 one bin each, 10 or more the last


def counted_staleness(measured: dict) -> np.ndarray:
    """Each recorded update's staleness as the asynchronous engines' meters count it: the updates that counted
    between its read and it (specsync's mean is the count at the arrival instead; its rows give both)."""
    log = measured.get("update_log")
    if not log:
        raise ValueError("no per-update record in this phase (run it with SYNCSWITCH_UPDATE_LOG=1)")
    return np.maximum(np.asarray(log["landed"], np.int64) - np.asarray(log["read"], np.int64), 0)


def model_staleness(model: str, workers: int, seeds, updates: int) -> np.ndarray:
    """ASP's per-update staleness under arrival model `model` (its text, e.g. `speeds:0.2+cores:1:staleness=1.7`),
    `updates` updates for each of `seeds`, pooled."""
    out = []
    for seed in seeds:
        arrivals = arrival_model(model, workers, seed)
        out.extend(asp_staleness(arrivals, workers, arrivals.cores, arrivals.quantum, updates))
    return np.asarray(out, np.int64)


def counts(staleness, bins: int = BINS) -> np.ndarray:
    """Updates per staleness bin, the last bin holding `bins - 1` and more."""
    return np.bincount(np.minimum(np.asarray(staleness, np.int64), bins - 1), minlength=bins).astype(float)


def chi_square(real, simulated, bins: int = BINS) -> float:
    """Pearson's chi-square of the real counts against the simulated pmf scaled to as many updates (an expected
    count under 1 counts as 1: a bin the model never fills is weighed, not divided by zero)."""
    observed, expected = counts(real, bins), counts(simulated, bins)
    expected = expected / expected.sum() * observed.sum()
    return float(np.sum((observed - expected) ** 2 / np.maximum(expected, 1.0)))


def shape(staleness) -> dict:
    """The distribution in the figures the notebooks compare: mean, sd, P(0..3), P(>=4), P(>=6), p99, max."""
    s = np.asarray(staleness)
    out = {"updates": int(len(s)), "mean": round(float(s.mean()), 4), "sd": round(float(s.std()), 3)}
    out.update({f"p{k}": round(float(np.mean(s == k)), 4) for k in range(4)})
    out.update({"p_ge4": round(float(np.mean(s >= 4)), 4), "p_ge6": round(float(np.mean(s >= 6)), 4),
                "p99": float(np.percentile(s, 99)), "max": int(s.max())})
    return out
