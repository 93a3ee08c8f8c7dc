"""What a training task's loop, hooks and command reader share about the running phase."""

from __future__ import annotations

import enum
import threading


class PauseRequest(enum.Enum):
    """Why the loop must stop stepping after the current step."""

    BOUNDARY = "boundary"   # the phase's sample count is reached
    IDLE = "idle"           # the elastic policy took this worker out of the synchronous group
    DIVERGED = "diverged"   # a non-finite loss: wait for the manager to roll back or stop


class TrainState:
    """Progress of this worker in the running phase; written by the loop and hooks, read by the reader thread."""

    READ_EVERY = 8

    def __init__(self, total_samples: int, worker: int):
        self.total = total_samples
        self.worker = worker
        self.protocol: str | None = None
        self.phase = -1
        self.boundary = 0.0   # the phase ends when samples reach boundary * total
        self.samples = 0
        self.local_steps = 0
        self.phase_steps = 0
        self.last_wait_s = 0.0  # the last step's wait for the synchronous group (0 under ASP)
        # The last step ran a call signature for the first time (graph partitions registered on every task).
        self.first_call = False
        # Under ASP the global count is read every READ_EVERY steps and estimated in between
        # (`stride` samples per local step across the cluster), exactly wherever it matters.
        self.stride = 0            # 0: read it every step
        self.unread_steps = 0
        self.marks: list[float] = []  # other fractions that must be met exactly (evaluation points)
        self.diverged_loss: float | None = None
        self.delay_s = 0.0         # an injected straggler's sleep per step
        self._idle_requested = threading.Event()
        self.pause_request: PauseRequest | None = None
        # A phase whose workers meet in collectives (all-reduce) must end after the same step on every worker: a
        # moved boundary waits here until the loop takes it before a step, where the group agrees on it.
        self.hold_boundary = False
        self._moved: float | None = None
        # Each worker takes a moved boundary before its own next step, so one may take it a step before its peers.
        # A collective step says in its flag whether it reaches the boundary (from its samples across the group,
        # `step_samples`) and the group stops after the first step one of them flagged. A worker whose step took it
        # past the boundary unflagged (its prediction was off) must not pause alone: its peers would wait for it in
        # their next collective. It is `unagreed` until its next step, which it flags.
        self.step_samples = 0
        self.unagreed = False

    @property
    def fraction(self) -> float:
        return self.samples / self.total

    def at_boundary(self) -> bool:
        return self.samples >= self.boundary * self.total and not self.unagreed

    def stop_flag(self) -> bool:
        """A collective step's flag: this worker's step reaches (or its last one passed) the boundary."""
        return self.samples + self.step_samples >= self.boundary * self.total

    def after_collective_step(self, samples: int, agreed: bool) -> None:
        """A collective step's outcome: `agreed` (some worker flagged it) ends the phase here on every worker."""
        self.step_samples = max(0, samples - self.samples)
        self.samples = samples
        if agreed:
            self.boundary = min(self.boundary, self.fraction - 1e-12)  # at it on every worker, float-safe
        self.unagreed = not agreed and self.samples >= self.boundary * self.total

    def needs_exact_samples(self) -> bool:
        """Read the global count this step: periodically, and on every step near a boundary or mark."""
        if not self.stride or self.unread_steps + 1 >= self.READ_EVERY:
            return True
        reach = self.samples + 2 * self.READ_EVERY * self.stride
        return any(self.samples < p * self.total <= reach for p in [self.boundary, *self.marks])

    # -- requests from the command reader thread ------------------------------------------
    def move_boundary(self, until: float) -> None:
        """A policy ends the running phase early, at `until`: at once, or at the loop's next step (hold_boundary).

        A worker of a collective phase that took the new boundary between its step and the boundary check would
        pause alone, and its peers would wait for it in their next collective."""
        if self.hold_boundary:
            self._moved = until
        else:
            self.boundary = until

    def take_moved_boundary(self) -> None:
        """The loop, before a step: apply a boundary moved while the last one ran."""
        moved, self._moved = self._moved, None
        if moved is not None:
            self.boundary = moved

    def request_idle(self) -> None:
        self._idle_requested.set()

    def take_idle_request(self) -> bool:
        """Whether an idle request is pending; consumes it."""
        if self._idle_requested.is_set():
            self._idle_requested.clear()
            return True
        return False

    def clear_idle_request(self) -> None:
        self._idle_requested.clear()
