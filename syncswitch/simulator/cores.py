"""Workers sharing a machine's cores: when each worker's step reads the parameters and when it pushes.

With a core of its own, a worker reads at the start of its step and pushes its step time later. With N workers
on C < N cores the operating system time-slices them: a worker holds a core for at most `quantum` (in units of
the arrival model's mean step) before the next ready worker gets it, and it reads the parameters only when its
step first gets a core. A quantum longer than any step runs each step to its end once started (at most C steps
in flight: ASP's staleness about C - 1); a quantum near 0 shares the cores evenly (every step overlaps the other
N - 1: staleness about N - 1). Between the two, the quantum sets the staleness a shared machine shows, and
`calibrate_quantum` finds the one that reproduces a real run's measured staleness.

A fair round robin bounds a worker's staleness near N - 1. On the real machine (the workers, the parameter
server, the evaluator and the other jobs' processes on 2 cores) a worker is now and then held off the cores for
many of its peers' steps after its step has read the parameters: an instrumented real ASP run at 4 workers measured
3.5% of its updates at staleness 6 or more and up to 45 (notebook 2026-11-27-simulator-6). `stall(worker, k)`, the
arrival model's, gives such a hold (seconds off the cores right after the read of the worker's k-th step; 0: none).
"""

from __future__ import annotations

import collections
import heapq


class Cores:
    """C cores (None: one per worker) time-sliced round-robin among the ready workers, slices of `quantum` units.

    Drive it with `start(now, worker, work, call)` (the worker begins a step of `work` seconds after `call`
    seconds off the cores) and `next()` -> (kind, time, worker): "read" when a worker's step first gets a core,
    "push" when it is done.
    """

    def __init__(self, cores: int | None, quantum: float, unit: float = 1.0, stall=None):
        self.cores, self.slice = cores, max(quantum * unit, 1e-12)
        self.stall = stall                    # (worker, its step number) -> seconds held off after the read
        self.steps: dict[int, int] = {}      # steps each worker has begun (the stall's index)
        self.ready: collections.deque = collections.deque()  # workers waiting for a core
        self.reads: collections.deque = collections.deque()  # workers whose step just got its first core
        self.left: dict[int, float] = {}                       # work left of each worker's step
        self.began: dict[int, bool] = {}
        self.slices: list = []          # (end, worker, "") of the slices running, (end, worker, "wake") of the calls
        self.running = 0
        self.now = 0.0

    def start(self, now: float, worker: int, work: float, call: float = 0.0) -> None:
        """`worker` begins a step of `work` seconds; with `call` > 0 it first waits that long off the cores, for the
        parameter servers' answer to a call of its protocol's, and reads only after it (peers run meanwhile)."""
        self.now = now
        self.left[worker], self.began[worker] = work, False
        if call > 0:
            heapq.heappush(self.slices, (now + call, worker, "wake"))
            return
        self.ready.append(worker)
        self._dispatch()

    def _dispatch(self) -> None:
        while self.ready and (self.cores is None or self.running < self.cores):
            worker = self.ready.popleft()
            self.running += 1
            if not self.began[worker]:
                self.began[worker] = True
                self.reads.append(worker)
                if self._held(worker):
                    continue
            run = self.left[worker] if self.cores is None else min(self.slice, self.left[worker])
            self.left[worker] -= run
            # Slices ending at one instant end in worker order (round robin's order).
            heapq.heappush(self.slices, (self.now + run, worker, ""))

    def _held(self, worker: int) -> bool:
        """Whether the worker, having just read, is held off the cores (its core goes to the next ready one)."""
        k = self.steps.get(worker, 0)
        self.steps[worker] = k + 1
        off = self.stall(worker, k) if self.stall is not None else 0.0
        if off <= 0:
            return False
        self.running -= 1
        heapq.heappush(self.slices, (self.now + off, worker, "wake"))
        return True

    def next(self) -> tuple[str, float, int] | None:
        """The next read or push, in time order; None when no worker is stepping. A read comes as soon as its
        worker got a core: after the push that freed the core has been applied."""
        while True:
            if self.reads:
                return "read", self.now, self.reads.popleft()
            if not self.slices:
                return None
            t, worker, kind = heapq.heappop(self.slices)
            self.now = t
            if kind == "wake":  # its call returned: it waits for a core
                self.ready.append(worker)
                self._dispatch()
                continue
            self.running -= 1
            if self.left[worker] > 1e-12 * self.slice:  # its slice is over, its step is not: back of the queue
                self.ready.append(worker)
                self._dispatch()
                continue
            self._dispatch()
            return "push", t, worker

    def finish_times(self, works: list[float]) -> dict[int, float]:
        """Seconds after they all start until each worker's `works[c]` of work is done (a synchronous round)."""
        for c, work in enumerate(works):
            self.start(0.0, c, work)
        out = {}
        while (event := self.next()) is not None:
            if event[0] == "push":
                out[event[2]] = event[1]
        return out


def asp_staleness(arrivals, workers: int, cores: int | None, quantum: float, pushes: int = 4000) -> list[int]:
    """The staleness of each of ASP's first `pushes` updates under `arrivals` on `cores` shared cores (no gradients:
    the arrivals alone), in the order they land."""
    cpu = Cores(cores, quantum, arrivals.unit, arrivals.stall)
    step, read_at, out = 0, {}, []
    steps = [0] * workers
    for w in range(workers):
        cpu.start(0.0, w, arrivals.step_time(w, 0))
    while len(out) < pushes:
        kind, t, w = cpu.next()
        if kind == "read":
            read_at[w] = step
            continue
        out.append(step - read_at[w])
        step += 1
        steps[w] += 1
        cpu.start(t, w, arrivals.step_time(w, steps[w]))
    return out


def simulated_staleness(arrivals, workers: int, cores: int | None, quantum: float, pushes: int = 4000) -> float:
    """ASP's mean staleness under `arrivals` on `cores` shared cores."""
    stale = asp_staleness(arrivals, workers, cores, quantum, pushes)
    return sum(stale) / len(stale)


def calibrate_quantum(arrivals, workers: int, cores: int, staleness: float) -> float:
    """The quantum (in steps) at which ASP's simulated staleness on `cores` cores is `staleness`; the ends of the
    range (0.01 and 8 steps) where it lies beyond what the cores can show."""
    lo, hi = 0.01, 8.0  # staleness falls as the quantum grows
    if simulated_staleness(arrivals, workers, cores, hi) >= staleness:
        return hi
    if simulated_staleness(arrivals, workers, cores, lo) <= staleness:
        return lo
    for _ in range(14):
        mid = (lo * hi) ** 0.5
        if simulated_staleness(arrivals, workers, cores, mid) > staleness:
            lo = mid
        else:
            hi = mid
    return round((lo * hi) ** 0.5, 4)
