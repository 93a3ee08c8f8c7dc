"""SpecSync's adaptive tuning of ABORT_TIME and ABORT_RATE (Zhang et al. 2018, Algorithm 1), free of TensorFlow.

The chief runs it once per tuning epoch on the pushes the parameter servers logged in that epoch; the engine
(engines/specsync.py) then counts, for each gradient, the pushes by other workers in the first ABORT_TIME
after its read and drops it when there were more than ABORT_RATE * m.
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class Tuning:
    """One epoch's result: the speculation period (s), the rate threshold, and the estimated freshness gain."""

    abort_time_s: float
    abort_rate: float
    improvement: float
    span_s: float  # the averaged iteration span T the rate was derived from

    def threshold(self, workers: int) -> float:
        """Abort when more than this many pushes by others landed in the speculation period."""
        return self.abort_rate * workers


def tune(workers, reads, pushes, num_workers: int) -> Tuning | None:
    """Algorithm 1 on one epoch of pushes: entry k is worker `workers[k]`'s update, its parameters read at
    `reads[k]` and pushed at `pushes[k]` (seconds, one clock).

    The gain of deferring worker i's iteration by D (Eq. 5) is the number of other workers' pushes in
    (read, read + D] of its last iteration in the epoch, the last one the log covers for a whole span. (Averaging
    over all its iterations instead, measured on the quickstart and the digits CNN, smooths the step function
    onto the loss line and almost always yields D = 0.) The loss (Eq. 6) is (m - 1) D / T_i missed peers, T_i
    the worker's mean iteration span. F(D) = sum_i gain_i(D) - loss_i(D) (Eq. 7) is a step function minus a line, so its
    maximum sits where D right-aligns with a push: those D are the candidates. D is kept within the averaged
    span T (a gradient can only count pushes that landed before it did). Then ABORT_RATE = D (m - 1) / (T m).
    No candidate with a positive F gives D = 0: nothing is worth a re-sync, and nothing aborts.

    None when the epoch holds too few pushes to say (fewer than two workers, or under two pushes each).
    """
    w = np.asarray(workers, np.int64)
    r = np.asarray(reads, np.float64)
    p = np.asarray(pushes, np.float64)
    if not (len(w) == len(r) == len(p)):
        raise ValueError(f"{len(w)=}, {len(r)=} and {len(p)=} must be equal")
    ok = p >= r
    w, r, p = w[ok], r[ok], p[ok]
    ids, counts = np.unique(w, return_counts=True)
    if len(ids) < 2 or counts.min() < 2:
        return None
    spans = {i: float(np.mean(p[w == i] - r[w == i])) for i in ids}
    span = float(np.mean(list(spans.values())))
    if span <= 0:
        return None
    m = num_workers
    # The epoch's log ends at its last push: an iteration read less than a span before that would see its
    # later pushes missing, so the last iteration the log covers is the one that estimates the gain.
    covered = r + span <= p.max()
    offsets = {}
    for i in ids:
        mine = (w == i) & covered if np.any((w == i) & covered) else w == i
        read = r[mine].max()
        # How long after worker i's last read each other worker's push landed.
        offsets[i] = np.sort(p[(w != i) & (p > read)] - read)
    candidates = np.unique(np.concatenate(list(offsets.values())))
    candidates = candidates[(candidates > 0) & (candidates <= span)]
    if len(candidates) == 0:
        return Tuning(0.0, 0.0, 0.0, span)
    gain = np.zeros(len(candidates))
    for i in ids:
        gain += np.searchsorted(offsets[i], candidates, side="right")
    loss = (m - 1) * candidates * sum(1.0 / spans[i] for i in ids)
    improvement = gain - loss
    best = int(np.argmax(improvement))
    if improvement[best] <= 0:
        return Tuning(0.0, 0.0, 0.0, span)
    d = float(candidates[best])
    return Tuning(d, d * (m - 1) / (span * m), float(improvement[best]), span)
