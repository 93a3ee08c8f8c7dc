"""Straggler detection from per-worker progress: windowed throughput below the others' mean − std (paper IV-B2)."""

from __future__ import annotations

import dataclasses
import math
import statistics

DETECTED = "detected"
CLEARED = "cleared"
# Defaults, shared with the spec's `stragglers.detection` section; the class docstring says why.
DEFAULT_WINDOW_S = 2.0
DEFAULT_CONSECUTIVE = 2
DEFAULT_MIN_GAP = 0.15
MIN_WORKERS = 3
# A rate is measured over at least this share of a window of busy time, reaching back over at most SPAN_WINDOWS
# earlier windows: the class docstring says why.
MIN_SPAN = 0.5
SPAN_WINDOWS = 4


@dataclasses.dataclass(frozen=True)
class StragglerEvent:
    """A worker became a straggler, or stopped being one, when the window ending at `time_s` closed."""

    worker: int
    kind: str            # "detected" | "cleared"
    time_s: float        # end of the window that completed the streak
    throughput: float    # the worker's local steps per second over that window
    threshold: float     # below this a window counts as slow: min(mean − std, (1 − min_gap) × median), of the others


@dataclasses.dataclass
class _Worker:
    pending: list = dataclasses.field(default_factory=list)  # (time_s, local_steps) not yet in a closed window
    bases: list = dataclasses.field(default_factory=list)  # the last sample of each earlier window, oldest first
    last_steps: int | None = None
    slow_streak: int = 0
    ok_streak: int = 0
    detected: bool = False


class StragglerDetector:
    """Flags worker k when its window throughput S_k < S̄ − σ of the others for `consecutive` windows in a row.

    Defaults and why:
    - window_s=2.0: metrics arrive every ~0.5 s per worker, so a window holds ~4 samples; short
      enough that `consecutive`=2 detects a slowdown within 3 windows (6 s) of its onset, which is
      small next to the paper's transient stragglers (up to 100 s).
    - consecutive=2: a window straddling the onset may look healthy, so detection lands at most
      3 windows after the onset; one window alone is too easily a noise spike.
    - S̄ and σ of the *other* workers (leave-one-out, population std): the paper's S̄ − σ over the
      whole cluster lets the stragglers' own rates pull the bound down, so k equally slow workers
      were flagged only as a strict minority (k < n/2). Two stragglers on 4 workers, the paper's
      moderate scenario on a small cluster, then sat exactly at the bound and were missed in most
      windows. Against the others, k equally slow workers are flagged up to half the cluster
      (k <= n/2: the others' median is still a healthy worker's rate); a slow majority is not
      flagged, since it is as likely the cluster's own speed. With 2 workers nothing is compared
      against more than one rate, hence min_workers=3.
    - min_gap=0.15: S̄ − σ alone flags the slowest worker of a uniform cluster in many windows (its
      own spread sets σ), so a slow window must also be below (1 − min_gap) × the median of the
      other workers. Simulated on 4 workers with 5% gaussian noise per window: 0.15 gives about
      one false detection per 10^4 windows (0.1: about 15 times more) and detects a 30% slowdown
      within 3 windows in >99% of cases (0.2: 98%).
    The clear rule is the complement: a window is healthy unless it is slow by both tests, and
    `consecutive` healthy windows clear the worker; without the gap a recovered worker with
    ordinary noise would keep dipping under S̄ − σ and clear late.

    Throughput is Δlocal_steps / Δtime from the worker's last sample of an earlier window to its
    last sample in this one: exact over the window, and a worker stalled for several windows shows
    the stall in its next window. A rate spans at least half a window of busy time, reaching back
    over up to 4 earlier windows where one holds less: under BSP with a straggler the others wait
    for it most of each window, and a rate read from their ~0.1 busy seconds (6 steps) swung 2x with
    one scheduler hiccup, lifting the straggler above the gap for a window and delaying its
    detection. A straggler, busy all the time, is still measured over its last window alone.
    A worker with no sample in a window (idle, paused, or between slow steps) is left out of that
    window's statistics and keeps its state and streaks.
    Windows start at the first observation after construction or `reset()`. Deterministic: all
    times are passed in, nothing reads a clock.
    """

    def __init__(self, num_workers: int, window_s: float = DEFAULT_WINDOW_S,
                 consecutive: int = DEFAULT_CONSECUTIVE, min_workers: int = MIN_WORKERS,
                 min_gap: float = DEFAULT_MIN_GAP):
        if num_workers < 1:
            raise ValueError(f"num_workers={num_workers!r}: must be >= 1")
        if not window_s > 0:
            raise ValueError(f"window_s={window_s!r}: must be > 0")
        if consecutive < 1:
            raise ValueError(f"consecutive={consecutive!r}: must be >= 1")
        if min_workers < MIN_WORKERS:
            raise ValueError(f"min_workers={min_workers!r}: must be >= 3 (mean − std never flags one of 2)")
        if not 0 <= min_gap < 1:
            raise ValueError(f"min_gap={min_gap!r}: must be in [0, 1)")
        self.num_workers = num_workers
        self.window_s = float(window_s)
        self.consecutive = int(consecutive)
        self.min_workers = int(min_workers)
        self.min_gap = float(min_gap)
        self._workers = [_Worker() for _ in range(num_workers)]
        self._excluded: set[int] = set()
        self._history: list[dict] = []
        self._open: dict[int, dict] = {}   # worker -> its history entry while detected
        self.last_rates: dict[int, float] = {}  # throughputs of the last evaluated window, for logs
        self._origin: float | None = None
        self._next = 0                     # index of the first window not yet closed

    # ------------------------------------------------------------------ inputs

    def observe(self, worker: int, time_s: float, local_steps: int,
                examples_per_s: float | None = None, busy_s: float | None = None) -> None:
        """Record a worker's cumulative step count at `time_s`.

        `busy_s`, the worker's cumulative time not spent waiting for the synchronous group, makes
        the rate steps per busy second. Under BSP every worker completes the same steps per wall
        second (all wait for the slowest), so only busy time tells the straggler apart.
        `examples_per_s` is accepted so a metrics event can be passed through, but not used: it is
        the worker's 20-step moving average (it lags a slowdown and mixes in BSP wait time).
        """
        self._check(worker)
        if worker in self._excluded:
            return
        if self._origin is None:
            self._origin = float(time_s)
        if self._index(time_s) < self._next:
            return  # late for a window already closed
        state = self._workers[worker]
        if state.last_steps is not None and local_steps < state.last_steps:
            # The counter went back: the task restarted (relaunch); its old samples mean nothing now.
            state.pending.clear()
            state.bases.clear()
        state.last_steps = local_steps
        state.pending.append((float(time_s), local_steps, None if busy_s is None else float(busy_s)))

    def exclude(self, worker: int) -> None:
        """Stop tracking a worker (a policy idled it); it keeps its detected state meanwhile."""
        self._check(worker)
        self._excluded.add(worker)
        self._forget_samples(self._workers[worker])

    def include(self, worker: int) -> None:
        """Track a worker again, from its next sample on (its idle time is not counted as slowness)."""
        self._check(worker)
        self._excluded.discard(worker)
        self._forget_samples(self._workers[worker])

    def reset(self) -> None:
        """Restart windowing at a phase change: throughput levels differ between protocols.

        Samples, baselines and streaks are dropped and windows restart at the next observation;
        who is currently detected and the event history are kept, so a straggler detected before
        the change still needs `consecutive` healthy windows to clear.
        """
        for state in self._workers:
            self._forget_samples(state)
        self._origin = None
        self._next = 0
        self.last_rates = {}

    # ------------------------------------------------------------------ evaluation

    def tick(self, now: float) -> list[StragglerEvent]:
        """Close every window that ended at or before `now`; return the detections and clears."""
        events: list[StragglerEvent] = []
        if self._origin is None:
            return events
        complete = self._index(now)  # windows [0, complete) have ended
        while self._next < complete:
            earliest = min((s.pending[0][0] for s in self._workers if s.pending), default=None)
            if earliest is None:
                self._next = complete  # nothing pending: skip the empty windows at once
                break
            self._next = max(self._next, min(self._index(earliest), complete))
            if self._next >= complete:
                break
            events.extend(self._close(self._next))
            self._next += 1
        return events

    def _close(self, window: int) -> list[StragglerEvent]:
        rates: dict[int, float] = {}
        for worker, state in enumerate(self._workers):
            if worker in self._excluded:
                continue
            inside = []
            while state.pending and self._index(state.pending[0][0]) <= window:
                inside.append(state.pending.pop(0))
            if not inside:
                continue
            last = inside[-1]
            if not state.bases and len(inside) > 1:
                state.bases = [inside[0]]  # the first window: from its first sample
            base = self._base(state.bases, last) if state.bases else None
            state.bases = (state.bases + [last])[-SPAN_WINDOWS:]
            if base is None or last[0] <= base[0]:
                continue
            if last[2] is not None and base[2] is not None and last[2] > base[2]:
                rates[worker] = (last[1] - base[1]) / (last[2] - base[2])
            else:
                rates[worker] = (last[1] - base[1]) / (last[0] - base[0])
        if len(rates) < self.min_workers:
            return []  # too few workers to say who is slow: nobody's streak moves
        self.last_rates = rates
        end = self._origin + (window + 1) * self.window_s
        events = []
        for worker, rate in sorted(rates.items()):
            others = [r for w, r in rates.items() if w != worker]
            threshold = self.threshold(others)
            state = self._workers[worker]
            if rate < threshold:
                state.slow_streak, state.ok_streak = state.slow_streak + 1, 0
            else:
                state.slow_streak, state.ok_streak = 0, state.ok_streak + 1
            if not state.detected and state.slow_streak >= self.consecutive:
                state.detected = True
                entry = {"worker": worker, "detected_at_s": end, "cleared_at_s": None}
                self._history.append(entry)
                self._open[worker] = entry
                events.append(StragglerEvent(worker, DETECTED, end, rate, threshold))
            elif state.detected and state.ok_streak >= self.consecutive:
                state.detected = False
                self._open.pop(worker)["cleared_at_s"] = end
                events.append(StragglerEvent(worker, CLEARED, end, rate, threshold))
        return events

    def _base(self, bases: list, last: tuple) -> tuple:
        """The latest earlier sample that leaves MIN_SPAN of a window of busy time (wall time without busy times)
        between it and `last`, else the earliest one kept."""
        for base in reversed(bases):
            busy = last[2] is not None and base[2] is not None
            if (last[2] - base[2] if busy else last[0] - base[0]) >= MIN_SPAN * self.window_s:
                return base
        return bases[0]

    def threshold(self, others: list[float]) -> float:
        """Below this a worker's window is slow: min(S̄ − σ, (1 − min_gap) × median) of the *other* workers."""
        bound = statistics.fmean(others) - statistics.pstdev(others)
        return min(bound, (1.0 - self.min_gap) * statistics.median(others))

    # ------------------------------------------------------------------ outputs

    @property
    def stragglers(self) -> frozenset[int]:
        """Workers currently detected as stragglers (excluded ones included until cleared)."""
        return frozenset(w for w, s in enumerate(self._workers) if s.detected)

    def events_summary(self) -> list[dict]:
        """One `{worker, detected_at_s, cleared_at_s}` per detection, in order; cleared_at_s None if open."""
        return [dict(entry) for entry in self._history]

    # ------------------------------------------------------------------ helpers

    def _index(self, time_s: float) -> int:
        return math.floor((time_s - self._origin) / self.window_s)

    def _check(self, worker: int) -> None:
        if not 0 <= worker < self.num_workers:
            raise ValueError(f"worker={worker!r}: must be in [0, {self.num_workers})")

    @staticmethod
    def _forget_samples(state: _Worker) -> None:
        state.pending.clear()
        state.bases.clear()
        state.last_steps = None
        state.slow_streak = state.ok_streak = 0
