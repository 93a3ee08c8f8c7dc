"""Each catalog protocol as a server rule on flat numpy vectors: FRED's `apply_update(grads, timestamp, client)`.

A rule holds the shared parameters `w`, the one momentum slot `v` every protocol shares (a switch keeps it), the
global step (the update count a timestamp is read from) and the sample count. `fetch(client)` is what a worker
reads before its step: (parameters, timestamp). This module holds the base and the synchronous rules (bsp,
local-sgd: the engines' ring all-reduce order, ring.py); async_rules.py the asynchronous ones; rulebook.py every
rule by its protocol's name. The arithmetic is the engines' own numpy references (syncswitch/protocols/engines:
`compensate`, `staleness_scale`, `lookahead_update`, `should_abort`, `must_wait`, `transmit_probability`), the
ones the engine tests hold the TensorFlow engines to.

Arrays are replaced, never written in place, so a worker's read is a reference, not a copy.
"""

from __future__ import annotations

import abc
import dataclasses

import numpy as np

from .ring import ring_mean


@dataclasses.dataclass
class Shared:
    """What the parameter servers hold: parameters, momentum slot, global step, samples trained."""

    w: np.ndarray
    v: np.ndarray
    step: int = 0
    samples: int = 0


def clip(g: np.ndarray, clip_norm: float | None) -> np.ndarray:
    """`g` scaled to at most `clip_norm` in L2 norm (float32, as the engines compute it); unchanged without one."""
    if not clip_norm:
        return g
    norm = np.sqrt(np.sum(np.square(g, dtype=np.float32), dtype=np.float32))
    return g * np.float32(min(1.0, clip_norm / norm)) if norm > 0 else g


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
    # its model (None: in place); `slot_order` the same for a buffer of their momentum.
    order = slot_order = None
    clip_norm: float | None = None  # hyperparameters.clip_norm (the run sets it)
    wire = None  # hyperparameters.compression's type (ring.wire_dtype; the run sets it): the all-reduce sends in it
    # Whether the workers step on replicas of the whole model (the chief's copy is the model's at a checkpoint and
    # when the phase ends), or on the parameter servers' one: where batch normalization's moving averages move.
    replicas = False
    averaged = None  # called after each average of the copies (the run's: the untrained state is in the buffer too)

    def __init__(self, shared: Shared, workers: int, params: dict, batch: int, seed: int):
        self.s, self.n, self.params, self.batch = shared, workers, dict(params), batch
        self.rng = np.random.RandomState(seed)
        self.lr = self.momentum = 0.0
        self.now = 0.0  # simulated seconds, set by the driver
        self.staleness: list[int] = []

    def fetch(self, client: int) -> tuple[np.ndarray, int]:
        return self.s.w, self.s.step

    def worker_gradient(self, g: np.ndarray) -> np.ndarray:
        """One worker's gradient as the rule is given it: clipped where an update is one worker's, before the rule's
        own scaling (protocols/engines/clipping.py); a rule that combines the workers' gradients clips the
        combination instead."""
        return clip(g, self.clip_norm)

    @abc.abstractmethod
    def apply_update(self, grads: np.ndarray, timestamp: int, client: int) -> bool:
        """Apply one worker's gradient computed at the parameters of `timestamp`; False if it was dropped."""

    # -- traffic (network.py prices it on an arrival model's link; `size` counts the model's float32 parameters) --
    def step_traffic(self, client: int, size: int) -> int:
        """Bytes the worker's next asynchronous step moves through the parameter servers: its pull and its push."""
        return 8 * size

    def round_traffic(self, size: int) -> tuple[list[int], int]:
        """What a synchronous round's end sends: each ring all-reduce's buffer in bytes (issued together), and each
        aggregated worker's parameter-server pull and push in bytes (0: none)."""
        return [], 0

    def leave_traffic(self, size: int) -> list[int]:
        """The ring all-reduces' buffers, in bytes, of the phase's end."""
        return []

    def ring_buffers(self, size: int, trailing: int) -> list[int]:
        """An all-reduce of `size` values with `trailing` float32 ones (the loss, the stop flag) beside them: one
        float32 buffer, or compressed, the values in the wire type and the rest in a float32 collective of their
        own (protocols/engines/compression.py)."""
        if self.wire is None:
            return [4 * (size + trailing)]
        return [self.wire.itemsize * size] + ([4 * trailing] if trailing else [])

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
        self.replicas = self.ring
        self._got: dict[int, np.ndarray] = {}

    def worker_gradient(self, g):
        return g  # the group's mean is the update's gradient: clipped in apply_update

    def round_traffic(self, size):
        return (self.ring_buffers(size, 2), 0) if self.ring else ([], 8 * size)

    def apply_update(self, grads, timestamp, client):
        if timestamp != self.s.step:
            return False
        self._got[client] = grads
        if len(self._got) == self.needed:
            self.s.samples += self.batch * self.needed  # the update counts the group's examples at once
            self.step_momentum(clip(self.mean(), self.clip_norm))
            self._got = {}
        return True

    def mean(self) -> np.ndarray:
        """The all-reduce's mean in its summation order (worker i first at chunk i; the buffer carries the loss
        and the stop flag after the gradients); the parameter servers' accumulator: once rounded."""
        if self.ring:  # compressed, the loss and the flag travel in a collective of their own
            return ring_mean([self._got[c] for c in range(self.n)], trailing=0 if self.wire else 2,
                             order=self.order, wire=self.wire)
        got = list(self._got.values())
        return np.mean(got, axis=0, dtype=np.float64).astype(np.float32) if len(got) > 1 else got[0]


class LocalSgd(ServerRule):
    """Each worker steps on its own copy and momentum at the phase's (BSP) rate; after `period` local steps of
    every worker (fewer where the phase ends first), the copies are averaged into the shared model as the engine's
    all-reduce does (localsgd_collective.py): every copy in one buffer, the variables sorted by their shared names,
    then the loss and the stop flag, summed in the ring's order (ring.py). Each worker's momentum stays its own
    until the phase ends, when the momenta are averaged in a buffer of their own. Between averages a checkpoint
    holds the chief's copy and momentum, as the engine's snapshot."""

    name = "local-sgd"
    rounds = True
    replicas = True

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
        if self.wire is None:
            self.s.w = ring_mean(self.copies, trailing=2, order=self.order)
        else:  # each copy's move from the last average (the anchor, equal on every worker), then added to it
            moves = [c - self.s.w for c in self.copies]
            self.s.w = self.s.w + ring_mean(moves, order=self.order, wire=self.wire)
        self.s.step += max(self.done)
        self.averages += 1
        if self.averaged is not None:
            self.averaged()
        self.copies, self.done = [self.s.w] * self.n, [0] * self.n

    def checkpointed(self):
        return self.copies[0], self.velocities[0], self.s.step + self.done[0], self.s.samples

    def round_traffic(self, size):
        return self.ring_buffers(size, 2), 0

    def leave_traffic(self, size):
        return [4 * size]  # the momenta, in float32 (compression leaves them out)

    def leave(self):
        self.average()
        self.s.v = ring_mean(self.velocities, order=self.slot_order)
        self.velocities = [self.s.v] * self.n

    def stats(self):
        return {"averages": self.averages}
