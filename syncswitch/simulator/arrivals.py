"""Arrival models: how long each simulated worker's step takes, so which worker's update lands next.

A step time is in seconds of the real cluster being simulated (a calibrated per-step cost scales them), and a
model is a pure function of (worker, its step number) and the seed: the same seed gives the same order.

    round-robin        every step takes one unit: workers finish in turn 0, 1, ..., n-1
    speeds[:SIGMA]     each worker a speed drawn once (log-normal, sigma SIGMA, default 0.3: stragglers),
                       each step jittered around it (log-normal, sigma SIGMA / 2)
    replay:RUN         each worker's measured step times from a real run's metrics.jsonl, in order, cycled;
                       simulated worker i replays real worker i mod (the run's workers)
"""

from __future__ import annotations

import abc
import json
import os

import numpy as np

from syncswitch.errors import SpecError

NAMES = ("round-robin", "speeds[:SIGMA]", "replay:RUN_DIR")


class ArrivalModel(abc.ABC):
    """Step times of each simulated worker; `unit` is the mean step time in seconds (the real-time scale)."""

    name = ""

    def __init__(self, workers: int, seed: int, unit: float = 1.0):
        self.workers, self.seed, self.unit = workers, seed, unit

    @abc.abstractmethod
    def step_time(self, worker: int, step: int) -> float:
        """Seconds worker `worker`'s step number `step` (counted over the run) takes."""

    def describe(self) -> dict:
        return {"model": self.name, "unit_s": self.unit}


class RoundRobin(ArrivalModel):
    name = "round-robin"

    def step_time(self, worker: int, step: int) -> float:
        return self.unit


class Speeds(ArrivalModel):
    name = "speeds"

    def __init__(self, workers: int, seed: int, unit: float = 1.0, sigma: float = 0.3):
        super().__init__(workers, seed, unit)
        self.sigma = sigma
        rng = np.random.RandomState(seed + 7919)
        self.slowness = np.exp(rng.normal(0.0, sigma, workers))  # each worker's mean step, in units
        self._jitter: dict[int, np.ndarray] = {}

    def step_time(self, worker: int, step: int) -> float:
        block, k = divmod(step, 4096)
        key = worker * 1_000_003 + block
        if key not in self._jitter:
            rng = np.random.RandomState((self.seed * 7_368_787 + key) % (2 ** 32))
            self._jitter[key] = np.exp(rng.normal(0.0, self.sigma / 2, 4096))
        return float(self.unit * self.slowness[worker] * self._jitter[key][k])

    def describe(self) -> dict:
        return {**super().describe(), "sigma": self.sigma, "slowness": [round(float(s), 4) for s in self.slowness]}


class Replay(ArrivalModel):
    name = "replay"

    def __init__(self, workers: int, seed: int, unit: float = 1.0, run_dir: str = ""):
        super().__init__(workers, seed, unit)
        self.run_dir = run_dir
        self.times = replayed_step_times(run_dir)
        self.unit = float(np.mean(np.concatenate(list(self.times.values()))))

    def step_time(self, worker: int, step: int) -> float:
        real = sorted(self.times)
        times = self.times[real[worker % len(real)]]
        return float(times[step % len(times)])

    def describe(self) -> dict:
        return {**super().describe(), "run_dir": self.run_dir, "workers_replayed": len(self.times)}


def replayed_step_times(run_dir: str) -> dict[int, np.ndarray]:
    """Each worker's busy time per step from a run's metrics reports (busy_s and local_steps are cumulative
    per phase, so a report's step time is its growth over the previous report's); waits at a barrier are not a
    worker's speed and are left out."""
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.isfile(path):
        raise SpecError(f"--arrivals replay:{run_dir}: {path} not found; give a finished run folder")
    last: dict[int, tuple] = {}
    out: dict[int, list[float]] = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if '"metrics"' not in line:
                continue
            r = json.loads(line)
            if r.get("kind") != "metrics" or r.get("worker") is None:
                continue
            w, steps, busy = int(r["worker"]), r.get("local_steps"), r.get("busy_s")
            prev = last.get(w)
            last[w] = (r.get("phase"), steps, busy)
            if steps is None or busy is None:
                if r.get("step_time_s"):
                    out.setdefault(w, []).append(float(r["step_time_s"]))
                continue
            if prev is not None and prev[0] == r.get("phase") and steps > prev[1] and busy >= prev[2]:
                per = (busy - prev[2]) / (steps - prev[1])
                out.setdefault(w, []).extend([per] * min(steps - prev[1], 64))
    out = {w: np.asarray(t) for w, t in out.items() if t and np.all(np.isfinite(t)) and np.sum(t) > 0}
    if not out:
        raise SpecError(f"--arrivals replay:{run_dir}: {path} holds no worker step times")
    return {w: np.maximum(t, 1e-6) for w, t in out.items()}


def arrival_model(text: str, workers: int, seed: int, unit: float = 1.0) -> ArrivalModel:
    """The model `text` names (see the module's docstring); a clear error names the valid ones."""
    kind, _, arg = (text or "round-robin").partition(":")
    if kind == "round-robin" and not arg:
        return RoundRobin(workers, seed, unit)
    if kind == "speeds":
        try:
            sigma = float(arg) if arg else 0.3
        except ValueError:
            raise SpecError(f"--arrivals {text}: SIGMA must be a number, e.g. speeds:0.5") from None
        if not 0.0 <= sigma <= 3.0:
            raise SpecError(f"--arrivals {text}: SIGMA must be between 0 and 3")
        return Speeds(workers, seed, unit, sigma)
    if kind == "replay" and arg:
        return Replay(workers, seed, unit, arg)
    raise SpecError(f"--arrivals {text!r}: unknown arrival model; valid: {', '.join(NAMES)}")
