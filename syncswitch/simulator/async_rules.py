"""The asynchronous protocols' server rules (rules.py holds the base, the registry and the synchronous ones).

Each applies one worker's update when it arrives, from the parameters that worker read at `fetch` (its
timestamp), with the engines' own numpy references: `compensate`, `staleness_scale`, `lookahead_update`,
`should_abort`, `must_wait`, `transmit_probability`.
"""

from __future__ import annotations

import collections

import numpy as np

from syncswitch.protocols.engines.bfasgd import RESOLUTION, transmit_probability
from syncswitch.protocols.engines.dcasgd import compensate
from syncswitch.protocols.engines.fasgd import staleness_scale
from syncswitch.protocols.engines.lookahead import ADAPT_EVERY, lookahead_factor, lookahead_update
from syncswitch.protocols.engines.specsync import should_abort
from syncswitch.protocols.engines.ssp import must_wait
from syncswitch.protocols.speculation import tune

from .rules import ServerRule


class Asp(ServerRule):
    name = "asp"

    def apply_update(self, grads, timestamp, client):
        landed = self.s.step - timestamp
        self.staleness.append(landed)
        self.s.samples += self.batch
        self.step_momentum(self.scaled(grads, self.decided_on(landed, client), client))
        return True

    def decided_on(self, landed: int, client: int) -> int:
        """The staleness the rule's engine decides on, from the update's landing count: that count itself here."""
        return landed

    def scaled(self, grads, staleness, client):
        return grads


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


# How long an update takes to land after its gradients reached the servers, as a share of the worker's step (read to
# push). Real update-log rows (SYNCSWITCH_UPDATE_LOG=1, each update's count at its arrival and at its landing): the
# peers' updates landing in between number 0.07-0.08 a step at 2 workers, 0.13 at 3 and 0.18-0.20 at 4, i.e. about
# 0.07 of a step per peer at every size (notebook 2026-11-28-coordinator-13).
APPLY_WINDOW = 0.07


class ArrivalCount:
    """The count an engine that decides at arrival reads (`StalenessMeter.at_apply`: when the step's gradients reach
    the servers), where the simulator's updates land at once: the landing count less the peers' updates that land
    within the last APPLY_WINDOW of the step, while the real update would still be applied."""

    def __init__(self, workers: int, window: float = APPLY_WINDOW):
        self.window = window
        self.read_at: dict[int, float] = {}
        self.landings: collections.deque = collections.deque(maxlen=8 * workers)  # (time, worker)

    def read(self, worker: int, now: float) -> None:
        self.read_at[worker] = now

    def count(self, landed: int, worker: int, now: float) -> int:
        """The count at arrival of `worker`'s update landing now, `landed` updates after its read."""
        since = now - self.window * (now - self.read_at.get(worker, now))
        late = 0
        for t, w in reversed(self.landings):  # in time order: only the newest few lie in the window
            if t <= since:
                break
            late += w != worker
        return max(landed - late, 0)

    def land(self, worker: int, now: float) -> None:
        self.landings.append((now, worker))


class CountsAtArrival(Asp):
    """A rule whose engine decides on the count at its gradients' arrival (ArrivalCount); `arrival_staleness` keeps
    each update's."""

    def __init__(self, *args):
        super().__init__(*args)
        self.arrival = ArrivalCount(self.n)
        self.arrival_staleness: list[int] = []

    def fetch(self, client):
        self.arrival.read(client, self.now)
        return super().fetch(client)

    def decided_on(self, landed: int, client: int) -> int:
        counted = self.arrival.count(landed, client, self.now)
        self.arrival_staleness.append(counted)
        return counted

    def apply_update(self, grads, timestamp, client):
        applied = super().apply_update(grads, timestamp, client)
        self.arrival.land(client, self.now)
        return applied


class Fasgd(CountsAtArrival):
    """ASP with each gradient scaled by its staleness as the engine counts it, at the gradient's arrival (a peer's
    update landing while this one is applied is not in it); the staleness record is the landing count, as the
    engine's record and the other rules' are."""

    name = "fasgd"

    def scaled(self, grads, staleness, client):
        return grads * np.float32(staleness_scale(staleness, float(self.params["power"])))

    def stats(self):
        out = super().stats()
        if self.arrival_staleness:
            out["arrival_staleness_mean"] = round(float(np.mean(self.arrival_staleness)), 4)
        return out


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


class Lookahead(CountsAtArrival):
    """The stored point is the look-ahead phi; each update keeps it `lr * f * v` ahead (`lookahead_update`); the
    chief (worker 0) sets the delay to the staleness measured so far every ADAPT_EVERY of its steps. That record is
    the count at each gradient's arrival, as the engine's own (its meter's `at_apply`)."""

    name = "lookahead"

    def __init__(self, *args):
        super().__init__(*args)
        self.delay = float(self.params["delay"])
        self._chief_steps = 0

    def apply_update(self, grads, timestamp, client):
        self.staleness.append(self.decided_on(self.s.step - timestamp, client))
        self.s.samples += self.batch
        f = lookahead_factor(self.momentum, self.delay)
        self.s.w, self.s.v = (a.astype(np.float32) for a in
                              lookahead_update(self.s.w, self.s.v, grads, self.lr, self.momentum, f))
        self.s.step += 1
        self.arrival.land(client, self.now)
        if client == 0 and self.params["adaptive"]:
            self._chief_steps += 1
            if self._chief_steps % ADAPT_EVERY == 0:
                self.delay = float(np.mean(self.staleness))
        return True

    def stats(self):
        return {**super().stats(), "lookahead_delay": round(self.delay, 4)}


class SpecSync(Asp):
    """A gradient is dropped (and the worker reads again) when more than abort_rate * n updates by others landed
    since its read (within abort_time seconds of it, when given); adaptive: the paper's Algorithm 1 (`tune`)
    over each epoch's pushes sets abort_time and abort_rate. The engine counts the fresh updates when the
    gradient reaches the servers and only then decides, in a graph-mode cond across worker and servers, to apply
    or drop: the time after the count is outside the window (a peer's push landing there is counted by nobody).
    The simulator spends it as a call before the next read, so the count and the abort see what the engine's do;
    the gradient applied misses those pushes, where the engine's is applied after them. Real runs' update-log rows
    put about as many peers' updates there as in the count (2 and 4 workers, both shipped jobs: notebook
    2026-11-28-coordinator-11); landing each update when its call ends gets the landed count right at 4 workers but
    triples the aborts, so it is not done (same notebook)."""

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

    def step_traffic(self, client, size):
        return 4 * size * (int(self.due[client]) + int(self.pushing[client]))  # what the last step drew

    def stats(self):
        steps = self.counts["steps"]
        return {**super().stats(), **self.counts,
                "fetch_fraction": round(self.counts["fetches"] / steps, 4) if steps else None,
                "push_fraction": round(self.counts["pushes"] / steps, 4) if steps else None}
