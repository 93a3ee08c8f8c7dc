"""Arrival models: how long each simulated worker's step takes, so which worker's update lands next.

A step time is in seconds of the real cluster being simulated (a calibrated per-step cost scales them), and a
model is a pure function of (worker, its step number) and the seed: the same seed gives the same order.

    round-robin        every step takes one unit: workers finish in turn 0, 1, ..., n-1
    speeds[:SIGMA]     each worker a speed drawn once (log-normal, sigma SIGMA, default 0.3: stragglers),
      [:jitter=J]      each step jittered around it (log-normal, sigma J, default SIGMA / 2),
      [:block=K]       K steps in a row sharing one draw of the jitter (default 1: a draw a step): a real
                       worker's speed drifts over tens of steps on a shared machine (its metrics windows of 20
                       steps spread about 0.2 in log, its steps around their window's mean much less)
    replay:RUN         each worker's measured step times from a real run's metrics.jsonl, in order, cycled;
                       simulated worker i replays real worker i mod (the run's workers)

Any of them takes a suffix `+cores:C[:q=QUANTUM | :staleness=S][:stall=P/M]`: the workers share C cores of one
machine (syncswitch/simulator/cores.py), time-sliced in slices of QUANTUM mean steps (default 1), or in the slice
at which ASP's staleness is S (calibrated, stalls included); on a replayed run, with neither given, the staleness
its asynchronous phases measured. `stall=P/M`: after its read, a step is held off the cores with probability P for
an exponential time of mean M mean steps (the operating system's long holds that give a real shared machine's
staleness its tail). Without the suffix every worker has a core of its own.

And a suffix `+call:F`: a protocol's own blocking call to the parameter servers outside its read-to-update
window (SSP's clock poll after each step, specsync's update decided in a second round trip) takes F of the
worker's step, off its core (the worker waits for the servers' answer); default 0, calls cost nothing.

And a suffix `+link:MBIT[:latency=MS][:burst=KB][:shared]`: the network (syncswitch/simulator/network.py). The
collectives and parameter-server transfers take time on links of MBIT Mbit/s each way; without it they are free.
"""

from __future__ import annotations

import abc
import json
import os

import numpy as np

from syncswitch.errors import SpecError
from syncswitch.simulator.cores import calibrate_quantum
from syncswitch.simulator.network import LINK, parse_link

NAMES = ("round-robin", "speeds[:SIGMA][:jitter=J][:block=K]", "replay:RUN_DIR")
CORES = "+cores:C[:q=QUANTUM|:staleness=S][:stall=P/M]"
CALL = "+call:F"


class ArrivalModel(abc.ABC):
    """Step times of each simulated worker; `unit` is the mean step time in seconds (the real-time scale)."""

    name = ""

    def __init__(self, workers: int, seed: int, unit: float = 1.0):
        self.workers, self.seed, self.unit = workers, seed, unit
        self.cores: int | None = None  # shared cores (None: each worker its own) and their slice, in mean steps
        self.quantum = 1.0
        self.call = 0.0  # a protocol's blocking call outside its window, as a fraction of the step (off the core)
        self.link = None  # the network (network.Link): None, communication is free
        self.stall_p, self.stall_mean = 0.0, 0.0  # a step held off the shared cores after its read: probability, mean
        self._stalls: dict[int, np.ndarray] = {}

    @abc.abstractmethod
    def step_time(self, worker: int, step: int) -> float:
        """Seconds worker `worker`'s step number `step` (counted over the run) takes."""

    def stall(self, worker: int, step: int) -> float:
        """Seconds worker `worker`'s step number `step` is held off the cores after its read (0: not held); drawn
        apart from the step times, so a model without stalls draws the same times as before."""
        if self.stall_p <= 0:
            return 0.0
        block, k = divmod(step, 4096)
        key = worker * 1_000_003 + block
        if key not in self._stalls:
            rng = np.random.RandomState((self.seed * 5_003_969 + key + 104_729) % (2 ** 32))
            held = rng.uniform(size=4096) < self.stall_p
            self._stalls[key] = np.where(held, rng.exponential(self.stall_mean, 4096), 0.0)
        return float(self.unit * self._stalls[key][k])

    def describe(self) -> dict:
        shared = {} if self.cores is None else {"cores": self.cores, "quantum": self.quantum,
                                                "calibrated_to_staleness": getattr(self, "calibrated_to", None)}
        if self.stall_p > 0:
            shared.update(stall_p=self.stall_p, stall_mean=self.stall_mean)
        call = {"call": self.call} if self.call else {}
        link = {"link": self.link.describe()} if self.link else {}
        return {"model": self.name, "unit_s": self.unit, **shared, **call, **link}


class RoundRobin(ArrivalModel):
    name = "round-robin"

    def step_time(self, worker: int, step: int) -> float:
        return self.unit


class Speeds(ArrivalModel):
    name = "speeds"

    def __init__(self, workers: int, seed: int, unit: float = 1.0, sigma: float = 0.3, jitter: float | None = None,
                 block: int = 1):
        super().__init__(workers, seed, unit)
        self.sigma, self.block = sigma, block
        self.jitter = sigma / 2 if jitter is None else jitter
        rng = np.random.RandomState(seed + 7919)
        self.slowness = np.exp(rng.normal(0.0, sigma, workers))  # each worker's mean step, in units
        self._jitter: dict[int, np.ndarray] = {}

    def step_time(self, worker: int, step: int) -> float:
        block, k = divmod(step // self.block, 4096)
        key = worker * 1_000_003 + block
        if key not in self._jitter:
            rng = np.random.RandomState((self.seed * 7_368_787 + key) % (2 ** 32))
            self._jitter[key] = np.exp(rng.normal(0.0, self.jitter, 4096))
        return float(self.unit * self.slowness[worker] * self._jitter[key][k])

    def describe(self) -> dict:
        return {**super().describe(), "sigma": self.sigma, "jitter": self.jitter, "block": self.block,
                "slowness": [round(float(s), 4) for s in self.slowness]}


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
    """Each worker's busy time per step from a run's metrics reports (busy_s and local_steps are the worker
    process's counters, so a report's step time is their growth since its previous report; counters that went
    back started anew, in a relaunched process); waits at a barrier are not a worker's speed and are left out."""
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
            if steps is None or busy is None:
                if r.get("step_time_s"):
                    out.setdefault(w, []).append(float(r["step_time_s"]))
                continue
            prev_steps, prev_busy = last.get(w, (0, 0.0))
            if steps < prev_steps or busy < prev_busy:
                prev_steps, prev_busy = 0, 0.0
            last[w] = (steps, busy)
            if steps > prev_steps:
                per = (busy - prev_busy) / (steps - prev_steps)
                out.setdefault(w, []).extend([per] * min(steps - prev_steps, 64))
    out = {w: np.asarray(t) for w, t in out.items() if t and np.all(np.isfinite(t)) and np.sum(t) > 0}
    if not out:
        raise SpecError(f"--arrivals replay:{run_dir}: {path} holds no worker step times")
    return {w: np.maximum(t, 1e-6) for w, t in out.items()}


def measured_staleness(run_dir: str) -> float | None:
    """The mean staleness a run's asynchronous phases measured (summary.json), weighted by their updates."""
    path = os.path.join(run_dir, "summary.json")
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as fh:
        phases = json.load(fh).get("schedule") or []
    seen = [(p["measured"]["staleness_mean"], p["measured"].get("updates") or 1) for p in phases
            if (p.get("measured") or {}).get("staleness_mean") is not None]
    return sum(s * n for s, n in seen) / sum(n for _, n in seen) if seen else None


def arrival_model(text: str, workers: int, seed: int, unit: float = 1.0) -> ArrivalModel:
    """The model `text` names (see the module's docstring); a clear error names the valid ones."""
    text = text or "round-robin"
    unlinked, link = _take_link(text)
    rest, priced, call = unlinked.rpartition("+call:")
    rest = rest if priced else unlinked
    base, plus, shared = rest.rpartition("+cores:")
    model = _base_model(base if plus else rest, text, workers, seed, unit)
    if plus:
        _share_cores(model, shared, text)
    if priced:
        model.call = _call_fraction(call, text)
    if link is not None:
        model.link = parse_link(link, text)
    return model


def _take_link(text: str) -> tuple[str, str | None]:
    """`text` without its `+link:...` suffix (wherever it stands among the others), and that suffix's argument."""
    head, found, tail = text.partition("+link:")
    if not found:
        return text, None
    arg, plus, rest = tail.partition("+")
    return head + plus + rest, arg


def _call_fraction(arg: str, text: str) -> float:
    try:
        value = float(arg)
    except ValueError:
        value = -1.0
    if not 0.0 <= value < 1.0:
        raise SpecError(f"--arrivals {text}: {CALL} takes the call's fraction of a step, 0 <= F < 1, e.g. +call:0.2")
    return value


def _share_cores(model: ArrivalModel, arg: str, text: str) -> None:
    count, _, rest = arg.partition(":")
    if "stall=" in rest:  # first: the quantum is calibrated with the stalls
        rest, _, stall = rest.rpartition("stall=")
        rest = rest.rstrip(":")
        _stalls(model, stall, text)
    key, _, value = rest.partition("=")
    try:
        model.cores = int(count)
        number = float(value) if rest else None
    except ValueError:
        raise SpecError(f"--arrivals {text}: {CORES} takes whole cores and a number, e.g. +cores:2:q=0.5") from None
    if model.cores < 1 or (rest and key not in ("q", "staleness")) or (number is not None and number <= 0):
        raise SpecError(f"--arrivals {text}: expected {CORES} with C >= 1 and a positive QUANTUM or S")
    if key == "q":
        model.quantum = number
        return
    target = number if key == "staleness" else \
        measured_staleness(model.run_dir) if isinstance(model, Replay) else None
    if target is not None:
        model.quantum = calibrate_quantum(model, model.workers, model.cores, target)
        model.calibrated_to = target


def _stalls(model: ArrivalModel, arg: str, text: str) -> None:
    p, _, mean = arg.partition("/")
    try:
        model.stall_p, model.stall_mean = float(p), float(mean)
    except ValueError:
        model.stall_p = -1.0
    if not (0.0 <= model.stall_p < 1.0 and model.stall_mean >= 0.0):
        raise SpecError(f"--arrivals {text}: stall=P/M takes a probability 0 <= P < 1 and a mean M >= 0 in steps, "
                        "e.g. +cores:1:stall=0.05/6")


def _base_model(kind_arg: str, text: str, workers: int, seed: int, unit: float) -> ArrivalModel:
    kind, _, arg = kind_arg.partition(":")
    if kind == "round-robin" and not arg:
        return RoundRobin(workers, seed, unit)
    if kind == "speeds":
        return _speeds(arg, text, workers, seed, unit)
    if kind == "replay" and arg:
        return Replay(workers, seed, unit, arg)
    raise SpecError(f"--arrivals {text!r}: unknown arrival model; valid: {', '.join(NAMES)} "
                    f"(each with {CORES}, {CALL} and {LINK})")


def _speeds(arg: str, text: str, workers: int, seed: int, unit: float) -> Speeds:
    """speeds[:SIGMA][:jitter=J][:block=K]"""
    first, *named = arg.split(":") if arg else [""]
    if "=" in first:
        first, named = "", [first, *named]
    try:
        sigma = float(first) if first else 0.3
    except ValueError:
        raise SpecError(f"--arrivals {text}: SIGMA must be a number, e.g. speeds:0.5") from None
    if not 0.0 <= sigma <= 3.0:
        raise SpecError(f"--arrivals {text}: SIGMA must be between 0 and 3")
    given = dict(item.partition("=")[::2] for item in named)
    if set(given) - {"jitter", "block"}:
        raise SpecError(f"--arrivals {text}: speeds takes SIGMA, jitter=J and block=K, e.g. speeds:0.05:jitter=0.2")
    try:
        jitter = float(given["jitter"]) if "jitter" in given else None
        block = int(given.get("block", 1))
    except ValueError:
        jitter, block = -1.0, 0
    if (jitter is not None and not 0.0 <= jitter <= 3.0) or block < 1:
        raise SpecError(f"--arrivals {text}: jitter must be between 0 and 3 and block a whole number >= 1")
    return Speeds(workers, seed, unit, sigma, jitter, block)
