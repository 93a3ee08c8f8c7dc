"""SessionRunHooks of a training task: a composable HookList, metrics over sliding windows, and control."""

from __future__ import annotations

import collections
import math
import time

import tensorflow as tf

v1 = tf.compat.v1


class HookList(v1.train.SessionRunHook):
    """A list of hooks that is itself a hook; fetches of each member are kept apart."""

    def __init__(self, hooks):
        self.hooks = list(hooks)

    def begin(self):
        for hook in self.hooks:
            hook.begin()

    def after_create_session(self, session, coord):
        for hook in self.hooks:
            hook.after_create_session(session, coord)

    def before_run(self, run_context):
        fetches, feeds, options = {}, {}, None
        for i, hook in enumerate(self.hooks):
            args = hook.before_run(run_context)
            if args is None:
                continue
            if args.fetches is not None:
                fetches[i] = args.fetches
            if args.feed_dict:
                feeds.update(args.feed_dict)
            options = options or args.options
        return v1.train.SessionRunArgs(fetches, feed_dict=feeds or None, options=options)

    def after_run(self, run_context, run_values):
        results = run_values.results or {}
        for i, hook in enumerate(self.hooks):
            values = v1.train.SessionRunValues(results.get(i), run_values.options, run_values.run_metadata)
            hook.after_run(run_context, values)

    def end(self, session):
        for hook in self.hooks:
            hook.end(session)


class TrainState:
    """What the loop, the hooks and the control channel share about the running phase."""

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
        # Under ASP the global count is read every READ_EVERY steps and estimated in between
        # (`stride` samples per local step across the cluster), exactly wherever it matters.
        self.stride = 0            # 0: read it every step
        self.unread_steps = 0
        self.marks: list[float] = []  # other fractions that must be met exactly (evaluation points)
        self.diverged_loss: float | None = None

    @property
    def fraction(self) -> float:
        return self.samples / self.total

    def at_boundary(self) -> bool:
        return self.samples >= self.boundary * self.total

    READ_EVERY = 8

    def needs_exact_samples(self) -> bool:
        """Read the global count this step: periodically, and on every step near a boundary or mark."""
        if not self.stride or self.unread_steps + 1 >= self.READ_EVERY:
            return True
        reach = self.samples + 2 * self.READ_EVERY * self.stride
        return any(self.samples < p * self.total <= reach for p in [self.boundary, *self.marks])


class MetricsHook(v1.train.SessionRunHook):
    """Measures step time, examples/s and loss over a sliding window and reports them periodically.

    The step runner reads the global sample counter with each step (progress in samples means the
    same under every protocol) and the time spent waiting for the synchronous group; this hook
    keeps the worker's busy time (everything but that wait), which tells its own speed apart
    from the group's, and flags a NaN or infinite loss.
    """

    def __init__(self, state: TrainState, engines, loss, emit, *, window: int = 20,
                 interval_s: float = 0.5, batch_by_protocol=None):
        self.state = state
        self.engines = engines
        self.loss = loss
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
        return v1.train.SessionRunArgs({"loss": self.loss})

    def after_run(self, run_context, run_values):
        now = time.perf_counter()
        loss = float(run_values.results["loss"])
        state = self.state
        self.wait_s += state.last_wait_s
        state.local_steps += 1
        state.phase_steps += 1
        self.window.append((now - self._t0, loss))
        if state.phase_steps == 1:
            self.emit({"event": "first_step", "phase": state.phase, "protocol": state.protocol,
                       "fraction": state.fraction})
        if not math.isfinite(loss):
            state.diverged_loss = loss
            run_context.request_stop()
            return
        if now - self._last_emit >= self.interval_s:
            self._last_emit = now
            self.emit(self.snapshot())

    def snapshot(self) -> dict:
        state = self.state
        times = [t for t, _ in self.window] or [float("nan")]
        losses = [l for _, l in self.window] or [float("nan")]
        step_time = sum(times) / len(times)
        batch = self.batch_by_protocol.get(state.protocol, 0)
        return {
            "event": "metrics", "worker": state.worker, "protocol": state.protocol, "phase": state.phase,
            "samples": state.samples, "fraction": state.fraction, "local_steps": state.local_steps,
            "step_time_s": step_time, "examples_per_s": batch / step_time if step_time > 0 else 0.0,
            "loss": sum(losses) / len(losses), "busy_s": self.busy_s, "wait_s": self.wait_s,
        }


class ControlHook(v1.train.SessionRunHook):
    """Applies the manager's commands at step boundaries and pauses the worker at phase boundaries.

    `task` supplies `pending_config()` (a learning-rate/momentum change asked for by the manager),
    `on_eval_boundary()` (chief checkpoints for the evaluator) and `pause()` (blocks until resumed).
    """

    def __init__(self, state: TrainState, task):
        self.state = state
        self.task = task
        self.session = None

    def after_create_session(self, session, coord):
        self.session = session

    def after_run(self, run_context, run_values):
        config = self.task.pending_config()
        if config is not None:
            self.task.apply_config(self.session, config)
        self.task.on_step(self.session)
        if self.task.idle_requested and not self.state.at_boundary():
            self.task.idle_requested = False
            if not self.task.pause(self.session, idle=True):
                run_context.request_stop()
                return
        if self.state.at_boundary():
            if not self.task.pause(self.session):
                run_context.request_stop()
