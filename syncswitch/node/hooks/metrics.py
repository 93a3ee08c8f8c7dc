"""Step time, examples/s and loss over a sliding window, reported as Metrics events every interval, and at each
full window in a phase's first windows (a trial of a switch target is judged on those: see policies/speed.py)."""

from __future__ import annotations

import collections
import time

import tensorflow as tf

from syncswitch.wire import agent_pb2 as pb
from syncswitch.wire import codec

v1 = tf.compat.v1


# A phase's first windows are reported as each fills, besides every interval: right after a switch the speed rule
# judges the target on its first reports, and a half-second interval made that trial last two seconds on a small job.
EARLY_WINDOWS = 3


class MetricsHook(v1.train.SessionRunHook):
    """Measures the worker's steps and reports them; also announces each phase's first step.

    The step runner reads the global sample counter with each step (progress in samples means the
    same under every protocol) and the time spent waiting for the synchronous group; this hook
    keeps the worker's busy time (everything but that wait), which tells its own speed apart
    from the group's.
    """

    def __init__(self, state, loss, emit, *, window: int = 20, interval_s: float = 0.5, batch_by_protocol=None,
                 losses=None):
        self.state = state
        self.loss = loss
        self.losses = losses or {}  # protocol -> its own loss (a local replica's), where not `loss`
        self.emit = emit
        self.window = collections.deque(maxlen=window)
        self.interval_s = interval_s
        self.batch_by_protocol = batch_by_protocol or {}
        self._t0 = 0.0
        self._last_emit = 0.0
        self._previous_start: float | None = None
        self.busy_s = 0.0   # per step: the time since the previous step began, less its group wait
        self.wait_s = 0.0

    def before_run(self, run_context):
        self._t0 = time.perf_counter()
        if self._previous_start is not None and self.state.phase_steps > 0:
            # Covers the step, the hooks and anything slowing this worker between steps.
            self.busy_s += self._t0 - self._previous_start - self.state.last_wait_s
        self._previous_start = self._t0
        return v1.train.SessionRunArgs(self.losses.get(self.state.protocol, self.loss))

    def after_run(self, run_context, run_values):
        now = time.perf_counter()
        state = self.state
        self.wait_s += state.last_wait_s
        state.local_steps += 1
        state.phase_steps += 1
        if state.phase_steps == 1:
            # A phase's metrics are its own: a rollback's restore must not report the condemned branch's
            # NaN losses, nor one protocol's step times another's.
            self.window.clear()
        # A phase's first step enters its graph (and, after a switch, fetches what the protocol keeps), and a step
        # that ran a call signature for the first time registered its graph partitions on every task (a protocol on
        # standby pays these inside its first phase: a trial judged local SGD at 0.54x BSP on them): their times
        # are not the protocol's speed, so only their losses are kept; every report measures steps alone.
        untimed = state.phase_steps == 1 or state.first_call
        self.window.append((None if untimed else now - self._t0, float(run_values.results)))
        if state.phase_steps == 1:
            self.emit(codec.event(first_step=pb.FirstStep(phase=state.phase, protocol=state.protocol,
                                                          fraction=state.fraction)))
        size = self.window.maxlen
        early = state.phase_steps <= EARLY_WINDOWS * size + 1 and (state.phase_steps - 1) % size == 0
        if early and state.phase_steps > 1 or now - self._last_emit >= self.interval_s:
            self._last_emit = now
            self.emit(codec.event(metrics=self.snapshot()))

    def at_pause(self) -> None:
        """Report the phase's recent loss as the worker pauses at a boundary: the guard chooses its repair from
        every worker's loss there (reports every `interval_s` leave none after a short stretch of a small job)."""
        if self.state.phase_steps > 0:  # else the window still holds the previous phase's steps
            self._last_emit = time.perf_counter()
            self.emit(codec.event(metrics=self.snapshot()))

    def snapshot(self) -> pb.Metrics:
        state = self.state
        times = [t for t, _ in self.window if t is not None]
        losses = [value for _, value in self.window] or [float("nan")]
        step_time = sum(times) / len(times) if times else 0.0  # 0: no step timed yet in this phase
        batch = self.batch_by_protocol.get(state.protocol, 0)
        return pb.Metrics(
            worker=state.worker, protocol=state.protocol or "", phase=state.phase, samples=state.samples,
            fraction=state.fraction, local_steps=state.local_steps, step_time_s=step_time,
            examples_per_s=batch / step_time if step_time > 0 else 0.0, loss=sum(losses) / len(losses),
            busy_s=self.busy_s, wait_s=self.wait_s)
