"""SpecSync's adaptive tuning (Algorithm 1) against the paper's definitions evaluated by brute force."""

from __future__ import annotations

import numpy as np
import pytest

from syncswitch.protocols.speculation import tune


def bursty():
    """Worker 0 reads every second on the second; workers 1 and 2 push 0.10 s and 0.15 s after it reads (from
    before worker 0's first read on, so that every iteration sees the same pattern)."""
    rows = [(0, k - 1.0, float(k)) for k in range(1, 7)]
    rows += [(1, k - 0.9, k + 0.10) for k in range(7)]
    rows += [(2, k - 0.85, k + 0.15) for k in range(-1, 7)]
    w, r, p = zip(*rows)
    return np.array(w), np.array(r), np.array(p)


def brute_force(w, r, p, m, grid):
    """Eq. 7 on a grid of periods D, with the estimator's rules: each worker's gain from its last iteration
    that the log covers, losses (m - 1) D / T_i."""
    spans = {i: np.mean(p[w == i] - r[w == i]) for i in np.unique(w)}
    span = np.mean(list(spans.values()))
    covered = r + span <= p.max()
    out = []
    for d in grid:
        gain = 0.0
        for i in spans:
            x = r[(w == i) & covered].max()
            gain += np.sum((w != i) & (p > x) & (p <= x + d))
        out.append(gain - (m - 1) * d * sum(1 / t for t in spans.values()))
    return np.array(out), span


def test_a_burst_after_each_read_is_worth_waiting_for():
    w, r, p = bursty()
    result = tune(w, r, p, num_workers=3)
    # By hand: D = 0.15 uncovers both bursts for worker 0 and worker 2's push for worker 1: gain 3,
    # loss 2 * 0.15 * 3 / 1.0 = 0.9; the rate is D (m - 1) / (T m) = 0.15 * 2 / 3.
    assert result.abort_time_s == pytest.approx(0.15)
    assert result.improvement == pytest.approx(2.1)
    assert result.span_s == pytest.approx(1.0)
    assert result.abort_rate == pytest.approx(0.1)
    assert result.threshold(3) == pytest.approx(0.3)


def random_epoch(seed: int):
    """Four workers of different speeds, each iteration's span jittered, pushing independently."""
    rng = np.random.default_rng(seed)
    rows = []
    for worker, mean in enumerate([0.2, 0.25, 0.31, 0.4]):
        t = rng.uniform(0, 0.1)
        for _ in range(12):
            span = rng.uniform(0.7, 1.3) * mean
            rows.append((worker, t, t + span))
            t += span + rng.uniform(0, 0.01)
    return (np.array(c) for c in zip(*rows))


def test_the_tuned_period_is_the_brute_force_maximum():
    positive = 0
    for seed in range(12):
        w, r, p = random_epoch(seed)
        result = tune(w, r, p, num_workers=4)
        grid = np.linspace(0, result.span_s, 4001)
        f, span = brute_force(w, r, p, 4, grid)
        slope = 3 * sum(1 / np.mean(p[w == i] - r[w == i]) for i in range(4))
        # The maximum sits right on a push, so the grid can only come close from below.
        assert max(f.max(), 0.0) - 1e-9 <= result.improvement <= max(f.max(), 0.0) + slope * (grid[1] - grid[0])
        assert result.abort_rate == pytest.approx(result.abort_time_s * 3 / (span * 4))
        if f.max() > slope * (grid[1] - grid[0]):
            positive += 1
            assert 0 < result.abort_time_s <= span
            assert result.threshold(4) == pytest.approx(result.abort_time_s * 3 / span)
        else:
            assert result.abort_time_s == 0 or result.improvement > 0
    assert positive >= 3  # the check above ran on epochs where a re-sync pays, not only on empty ones


def test_workers_in_lockstep_gain_nothing_from_a_resync():
    # Three workers reading together see the others' pushes only at their own iteration's end: deferring that
    # long would hide their own push from every peer for as long, so no re-sync is worth it (F <= 0 everywhere).
    rows = [(i, float(k), k + 1.0) for i in range(3) for k in range(6)]
    w, r, p = (np.array(c) for c in zip(*rows))
    result = tune(w, r, p, num_workers=3)
    f, _ = brute_force(w, r, p, 3, np.linspace(1e-4, 1.0, 2000))
    assert f.max() <= 1e-9
    assert (result.abort_time_s, result.abort_rate, result.improvement) == (0.0, 0.0, 0.0)


def test_a_staggered_lockstep_is_worth_a_short_wait():
    # The same, but each worker 10 ms behind the previous: worker 0 reads just before the others' pushes land.
    rows = [(i, k + 0.01 * i, k + 1.0 + 0.01 * i) for i in range(3) for k in range(6)]
    w, r, p = (np.array(c) for c in zip(*rows))
    result = tune(w, r, p, num_workers=3)
    assert result.abort_time_s == pytest.approx(0.02)  # both others' pushes: gain 2, loss 2 * 0.02 * 3
    # In their last iterations worker 0 uncovers 2 pushes, worker 1 one (worker 2's); the loss is 2 * 0.02 * 3.
    assert result.improvement == pytest.approx(2 + 1 - 0.12)


def test_too_few_pushes_say_nothing():
    assert tune([0, 0, 0], [0, 1, 2], [1, 2, 3], num_workers=2) is None  # one worker
    assert tune([0, 1, 1], [0, 0, 1], [1, 1, 2], num_workers=2) is None  # worker 0 pushed once
    assert tune([], [], [], num_workers=2) is None
    with pytest.raises(ValueError, match="len"):
        tune([0, 1], [0.0], [1.0, 2.0], num_workers=2)
