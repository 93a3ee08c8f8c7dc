"""Whose untrained state a gradient moves: batch normalization's moving averages, as the real protocols keep them.

A model's update ops (a batch normalization layer's moving mean and variance) run with every training step. Under a
parameter-server protocol they move the shared variables, so every worker's step moves the one copy the
checkpoints and the evaluator read. Under a replica protocol (BSP by all-reduce, local SGD) each worker pulls every
variable of the model onto its replica at the phase's entry (node/replica.py, replica_training.py), its own steps
move its own copy (local SGD's average moves them to their mean with the rest of the replica), and the chief's
copy is the one a checkpoint snapshots and the phase's end publishes. The simulator's one Keras model holds one
set of these variables: this module swaps each worker's copy in around its gradient call, and hands the chief's
to the evaluator. A model without such variables pays nothing.
"""

from __future__ import annotations

import contextlib

import numpy as np


class ModelState:
    """The shared untrained state, and under a replica protocol each worker's own copy of it."""

    def __init__(self, model):
        self.model = model
        self.shared = model.state()
        self.copies: list | None = None

    @property
    def active(self) -> bool:
        return bool(self.shared)

    def enter(self, replicas: bool, workers: int) -> None:
        """A phase starts: its workers pull the shared state onto their replicas, or step on the shared one."""
        if not self.active:
            return
        self.copies = [self.shared] * workers if replicas else None
        self.model.set_state(self.shared)

    def leave(self) -> None:
        """The phase ends: the chief publishes its copy (a replica protocol), or the shared one is as it stands."""
        if self.active:
            self.shared = self.canonical()
            self.copies = None

    def canonical(self) -> tuple:
        """What a checkpoint taken now holds: the chief's copy, or the shared state."""
        if self.copies is not None:
            return self.copies[0]
        return self.model.state() if self.active else ()

    def average(self) -> None:
        """Local SGD's average: it moves every copy of the replica, these too (localsgd_collective.py), to their
        mean (float32 of a float64 mean; the ring's order is the trained parameters' alone, ring.py)."""
        if self.copies is not None:
            mean = tuple(np.mean(np.stack(values), axis=0, dtype=np.float64).astype(values[0].dtype)
                         for values in zip(*self.copies))
            self.copies = [mean] * len(self.copies)

    def restore(self, values: tuple) -> None:
        """A rollback to a checkpoint: its state becomes the shared one (the phase after it enters from there)."""
        if self.active:
            self.shared = values
            self.model.set_state(values)

    @contextlib.contextmanager
    def of(self, worker: int):
        """Within: the model holds `worker`'s copy, and what its gradient's update ops do to it is kept."""
        if self.copies is None:
            yield
            return
        self.model.set_state(self.copies[worker])
        yield
        self.copies[worker] = self.model.state()

    @contextlib.contextmanager
    def scoring(self):
        """Within: the model holds the state a checkpoint taken now holds (the evaluator scores it)."""
        if self.copies is not None:
            self.model.set_state(self.copies[0])
        yield
