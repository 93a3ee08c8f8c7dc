"""Each catalog protocol as a server rule on flat numpy vectors: FRED's `apply_update(grads, timestamp, client)`.

A rule holds the shared parameters `w`, the one momentum slot `v` every protocol shares (a switch keeps it), the
global step (the update count a timestamp is read from) and the sample count. `fetch(client)` is what a worker
reads before its step: (parameters, timestamp). The arithmetic is the engines' own numpy references
(syncswitch/protocols/engines: `compensate`, `staleness_scale`, `lookahead_update`, `should_abort`, `must_wait`,
`transmit_probability`), the ones the engine tests hold the TensorFlow engines to.

Arrays are replaced, never written in place, so a worker's read is a reference, not a copy.
"""

from __future__ import annotations

import abc
import dataclasses

import numpy as np

from syncswitch.errors import SpecError
from syncswitch.protocols.engines.bfasgd import RESOLUTION, transmit_probability
from syncswitch.protocols.engines.dcasgd import compensate
from syncswitch.protocols.engines.fasgd import staleness_scale
from syncswitch.protocols.engines.lookahead import ADAPT_EVERY, lookahead_factor, lookahead_update
from syncswitch.protocols.engines.specsync import should_abort
from syncswitch.protocols.engines.ssp import must_wait
from syncswitch.protocols.speculation import tune

from .ring import ring_mean

RULES: dict[str, type] = {}


@dataclasses.dataclass
class Shared:
    """What the parameter servers hold: parameters, momentum slot, global step, samples trained."""

    w: np.ndarray
    v: np.ndarray
    step: int = 0
    samples: int = 0


def register(cls):
    RULES[cls.name] = cls
    return cls


def rule_for(protocol: str, shared: Shared, workers: int, params: dict, batch: int, seed: int) -> ServerRule:
    if protocol not in RULES:
        raise SpecError(f"protocol {protocol!r} has no simulator rule; valid: {', '.join(sorted(RULES))}")
    return RULES[protocol](shared, workers, params, batch, seed)


class ServerRule(abc.ABC):
    """One protocol's update rule. `lr` and `momentum` are set by the driver before each update (the schedule's
    decayed, warmed-up rate at the current sample count). `rounds` rules are synchronous: every worker reads at
    a round's start and the round's updates land together (`round_steps` local steps per worker each)."""

    name = ""
    rounds = False
    round_steps = 1
    # Blocking calls to the parameter servers a step makes outside its read-to-update window: the arrival model's
    # `call` prices each (a fraction of the step, spent off the core while the peers run).
    calls = 0
    # Where each element of an all-reduce buffer sits in the flat vector (ring.buffer_order); the run sets it from
    # its model (None: in place); `state_order` the same for a buffer of the parameters then their momentum.
    order = state_order = None

    def __init__(self, shared: Shared, workers: int, params: dict, batch: int, seed: int):
        self.s, self.n, self.params, self.batch = shared, workers, dict(params), batch
        self.rng = np.random.RandomState(seed)
        self.lr = self.momentum = 0.0
        self.now = 0.0  # simulated seconds, set by the driver
        self.staleness: list[int] = []

    def fetch(self, client: int) -> tuple[np.ndarray, int]:
        return self.s.w, self.s.step

    @abc.abstractmethod
    def apply_update(self, grads: np.ndarray, timestamp: int, client: int) -> bool:
        """Apply one worker's gradient computed at the parameters of `timestamp`; False if it was dropped."""

    def blocked(self, client: int) -> bool:
        """Whether `client` must wait before its next step (SSP's bound)."""
        return False

    def leave(self) -> None:
        """The phase ends: leave the shared state consistent (local SGD averages its copies)."""

    def begin_round(self, left: int) -> int:
        """A round starts with `left` samples to the phase's end: the local steps each worker takes in it."""
        return self.round_steps

    def checkpointed(self) -> tuple:
        """(parameters, momentum, global step, samples) a checkpoint taken now holds."""
        return self.s.w, self.s.v, self.s.step, self.s.samples

    def step_momentum(self, g: np.ndarray, lr: float | None = None) -> None:
        """TensorFlow's MomentumOptimizer: v = m v + g; w -= lr v. Counts one update."""
        self.s.v = self.momentum * self.s.v + g
        self.s.w = self.s.w - (self.lr if lr is None else lr) * self.s.v
        self.s.step += 1

    def stats(self) -> dict:
        if not self.staleness:
            return {}
        return {"staleness_mean": round(float(np.mean(self.staleness)), 4), "updates": len(self.staleness)}


@register
class Bsp(ServerRule):
    """The first m (aggregate; 0: all n) gradients of the step's round, averaged into one update; the rest
    arrive stale and are dropped, as SyncReplicasOptimizer drops them."""

    name = "bsp"
    rounds = True

    def __init__(self, *args):
        super().__init__(*args)
        self.needed = int(self.params.get("aggregate") or 0) or self.n
        # The engine's path (protocols/engines/synchronous.py): all-reduce unless told off or aggregating.
        self.ring = self.needed == self.n and bool(self.params.get("allreduce", True))
        self._got: dict[int, np.ndarray] = {}

    def apply_update(self, grads, timestamp, client):
        if timestamp != self.s.step:
            return False
        self._got[client] = grads
        if len(self._got) == self.needed:
            self.s.samples += self.batch * self.needed  # the update counts the group's examples at once
            self.step_momentum(self.mean())
            self._got = {}
        return True

    def mean(self) -> np.ndarray:
        """The all-reduce's mean in its summation order (worker i first at chunk i; the buffer carries the loss
        and the stop flag after the gradients); the parameter servers' accumulator: once rounded."""
        if self.ring:
            return ring_mean([self._got[c] for c in range(self.n)], trailing=2, order=self.order)
        got = list(self._got.values())
        return np.mean(got, axis=0, dtype=np.float64).astype(np.float32) if len(got) > 1 else got[0]


@register
class Asp(ServerRule):
    name = "asp"

    def apply_update(self, grads, timestamp, client):
        self.staleness.append(self.s.step - timestamp)
        self.s.samples += self.batch
        self.step_momentum(self.scaled(grads, self.s.step - timestamp, client))
        return True

    def scaled(self, grads, staleness, client):
        return grads


@register
class Ssp(Asp):
    """ASP whose workers wait while more than `staleness` steps ahead of the slowest (`must_wait`). The engine
    polls the clocks in a call of its own after every step (`after_step`), between the update and the next read."""

    name = "ssp"
    calls = 1

    def __init__(self, *args):
        super().__init__(*args)
        self.clocks = np.zeros(self.n, np.int64)

    def apply_update(self, grads, timestamp, client):
        self.clocks[client] += 1
        return super().apply_update(grads, timestamp, client)

    def blocked(self, client):
        return must_wait(self.clocks, client, int(self.params["staleness"]))


@register
class Fasgd(Asp):
    name = "fasgd"

    def scaled(self, grads, staleness, client):
        return grads * np.float32(staleness_scale(staleness, float(self.params["power"])))


@register
class DcAsgd(Asp):
    """g + lambda g*g (w_now - w_read); adaptive: lambda / sqrt(mean square of g)."""

    name = "dc-asgd"

    def __init__(self, *args):
        super().__init__(*args)
        self.reads: dict[int, np.ndarray] = {}
        self.mean_square = None

    def fetch(self, client):
        self.reads[client] = self.s.w
        return self.s.w, self.s.step

    def scaled(self, grads, staleness, client):
        mean_square = None
        if self.params["adaptive"]:
            decay = float(self.params["decay"])
            previous = np.zeros_like(grads) if self.mean_square is None else self.mean_square
            self.mean_square = mean_square = (decay * previous + (1 - decay) * grads * grads).astype(np.float32)
        return compensate(grads, self.s.w, self.reads[client], float(self.params["lambda"]),
                          mean_square).astype(np.float32)


@register
class Lookahead(Asp):
    """The stored point is the look-ahead phi; each update keeps it `lr * f * v` ahead (`lookahead_update`); the
    chief (worker 0) sets the delay to the staleness measured so far every ADAPT_EVERY of its steps."""

    name = "lookahead"

    def __init__(self, *args):
        super().__init__(*args)
        self.delay = float(self.params["delay"])
        self._chief_steps = 0

    def apply_update(self, grads, timestamp, client):
        self.staleness.append(self.s.step - timestamp)
        self.s.samples += self.batch
        f = lookahead_factor(self.momentum, self.delay)
        self.s.w, self.s.v = (a.astype(np.float32) for a in
                              lookahead_update(self.s.w, self.s.v, grads, self.lr, self.momentum, f))
        self.s.step += 1
        if client == 0 and self.params["adaptive"]:
            self._chief_steps += 1
            if self._chief_steps % ADAPT_EVERY == 0:
                self.delay = float(np.mean(self.staleness))
        return True

    def stats(self):
        return {**super().stats(), "lookahead_delay": round(self.delay, 4)}


@register
class SpecSync(Asp):
    """A gradient is dropped (and the worker reads again) when more than abort_rate * n updates by others landed
    since its read (within abort_time seconds of it, when given); adaptive: the paper's Algorithm 1 (`tune`)
    over each epoch's pushes sets abort_time and abort_rate. The engine counts the fresh updates when the
    gradient reaches the servers and only then decides, in a graph-mode cond across worker and servers, to apply
    or drop: the time after the count is outside the window (a peer's push landing there is counted by nobody).
    The simulator spends it as a call before the next read, so the count and the abort see what the engine's do;
    the gradient applied misses those pushes, where the engine's is applied after them."""

    name = "specsync"
    calls = 1

    def __init__(self, *args):
        super().__init__(*args)
        self.rate, self.period = float(self.params["abort_rate"]), float(self.params["abort_time"])
        self.read_at: dict[int, float] = {}
        self.log: list[tuple[float, float, int]] = []  # (read, push, worker) of every applied update
        self.aborted = self.tunes = 0
        self._epoch_start = 0

    def fetch(self, client):
        self.read_at[client] = self.now
        return self.s.w, self.s.step

    def apply_update(self, grads, timestamp, client):
        read = self.read_at.get(client, self.now)
        if self.period > 0:
            fresh = sum(1 for r, p, w in self.log[-4 * self.n:] if w != client and read < p <= read + self.period)
        else:
            fresh = self.s.step - timestamp
        if (self.rate > 0 or self.period > 0) and should_abort(fresh, self.rate, self.n):
            self.aborted += 1
            return False
        self.log.append((read, self.now, client))
        return super().apply_update(grads, timestamp, client)

    def retune(self) -> None:
        """An epoch ended: Algorithm 1 on its pushes."""
        epoch = np.asarray(self.log[self._epoch_start:], np.float64)
        self._epoch_start = len(self.log)
        if len(epoch) < 2:
            return
        result = tune(epoch[:, 2], epoch[:, 0], epoch[:, 1], self.n)
        if result is not None:
            self.tunes += 1
            self.period, self.rate = result.abort_time_s, result.abort_rate

    def stats(self):
        extra = {"tunes": self.tunes, "abort_time_s": self.period, "abort_rate": self.rate} \
            if self.params["adaptive"] else {}
        return {**super().stats(), "aborted_steps": self.aborted, **extra}


@register
class BFasgd(Asp):
    """Each worker steps on its own copy; a push (probability `transmit_probability(c_push, v)`) applies the
    gradient to the shared model staleness-scaled from the copy's fetch; a step draws the fetch with probability
    `transmit_probability(c_fetch, v)` (v: the worker's bias-corrected gradient noise, in units of the largest it
    has seen) and the fetch runs as the worker's next step gets a core (`fetch`): the engine's `after_step` is a
    call of its own after the push returns, and a peer's push that lands in between is in the copy. A fetch
    atomic with the push would count every peer push once: staleness 1.0 at 2 workers on any arrival order, where
    the real 2-worker runs measure 0.74-0.77."""

    name = "b-fasgd"

    def __init__(self, *args):
        super().__init__(*args)
        self.copies = [self.s.w] * self.n
        self.fetched = [self.s.step] * self.n
        self.due = [False] * self.n  # a fetch drawn by the worker's last step, run as its next step starts
        self.pushing = [True] * self.n
        self.moments: list = [None] * self.n  # (t, mean, square, v_max)
        self.counts = {"steps": 0, "fetches": 0, "pushes": 0}

    def fetch(self, client):
        if self.due[client]:
            self.due[client] = False
            self.counts["fetches"] += 1
            self.copies[client], self.fetched[client] = self.s.w, self.s.step
        return self.copies[client], self.fetched[client]

    def _noise(self, client, g):
        decay = float(self.params["decay"])
        t, mean, square, v_max = self.moments[client] or (0, np.zeros_like(g), np.zeros_like(g), 0.0)
        t += 1
        mean = decay * mean + (1 - decay) * g
        square = decay * square + (1 - decay) * g * g
        correction = 1.0 - decay ** t
        square_hat = square / correction
        variance = square_hat - np.square(mean / correction)
        variance = np.where(variance > RESOLUTION * square_hat, variance, 0.0)
        v = float(np.sum(np.sqrt(variance))) / max(g.size, 1)
        v_max = max(v_max, v)
        self.moments[client] = (t, mean, square, v_max)
        return v / v_max if v_max > 0 else 0.0

    def apply_update(self, grads, timestamp, client):
        self.counts["steps"] += 1
        applied = self.pushing[client]
        if applied:
            self.counts["pushes"] += 1
            staleness = max(self.s.step - self.fetched[client], 0)
            self.staleness.append(staleness)
            self.step_momentum(grads * np.float32(staleness_scale(staleness, float(self.params["power"]))))
        self.s.samples += self.batch
        v = self._noise(client, grads.astype(np.float64))
        self.due[client] = bool(self.rng.uniform() < transmit_probability(float(self.params["fetch"]), v))
        self.pushing[client] = bool(self.rng.uniform() < transmit_probability(float(self.params["push"]), v))
        return applied

    def stats(self):
        steps = self.counts["steps"]
        return {**super().stats(), **self.counts,
                "fetch_fraction": round(self.counts["fetches"] / steps, 4) if steps else None,
                "push_fraction": round(self.counts["pushes"] / steps, 4) if steps else None}


@register
class LocalSgd(ServerRule):
    """Each worker steps on its own copy and momentum at the phase's (BSP) rate; after `period` local steps of
    every worker (fewer where the phase ends first), copies and momenta are averaged into the shared ones as the
    engine's one all-reduce does (localsgd_collective.py): every copy and its momentum in one buffer, the
    variables sorted by their shared names, each followed by its slot, then the loss and the stop flag, summed in
    the ring's order (ring.py). Between averages a checkpoint holds the chief's copy, as the engine's snapshot."""

    name = "local-sgd"
    rounds = True

    def __init__(self, *args):
        super().__init__(*args)
        self.round_steps = self._round = int(self.params["period"])
        self._start()
        self.averages = 0

    def _start(self):
        self.copies = [self.s.w] * self.n
        self.velocities = [self.s.v] * self.n
        self.done = [0] * self.n

    def begin_round(self, left):
        # The engine averages at the phase's boundary, however many steps since the last average (every worker
        # counts n batches a step, so all reach it at the same step).
        self._round = max(1, min(self.round_steps, -(-left // (self.batch * self.n))))
        return self._round

    def fetch(self, client):
        return self.copies[client], self.s.step

    def apply_update(self, grads, timestamp, client):
        v = self.momentum * self.velocities[client] + grads
        self.velocities[client] = v
        self.copies[client] = self.copies[client] - self.lr * v
        self.done[client] += 1
        self.s.samples += self.batch
        if min(self.done) >= self._round:
            self.average()
        return True

    def average(self):
        if not any(self.done):
            return
        size = self.s.w.size
        mean = ring_mean([np.concatenate([w, v]) for w, v in zip(self.copies, self.velocities)], trailing=2,
                         order=self.state_order)
        self.s.w, self.s.v = mean[:size], mean[size:]
        self.s.step += max(self.done)
        self.averages += 1
        self._start()

    def checkpointed(self):
        if not any(self.done):
            return super().checkpointed()
        return self.copies[0], self.velocities[0], self.s.step + self.done[0], self.s.samples

    def leave(self):
        self.average()

    def stats(self):
        return {"averages": self.averages}
