"""The chief's checkpoints as it trains: one at each evaluation point (for the evaluator) and the durable ones."""

from __future__ import annotations

import time

import tensorflow as tf

from syncswitch.wire import agent_pb2 as pb
from syncswitch.wire import codec

v1 = tf.compat.v1
FIRST_STEP = 1e-9  # a durable point every first step crosses


def checkpoint_points(launch) -> tuple[list[float], list[float]]:
    """The chief's (evaluation, durable) checkpoint points: fractions short of the end."""
    def points(every):
        return [p for p in (round(k * every, 9) for k in range(1, int(1 / every) + 1)) if p < 1.0] if every else []

    evaluated, durable = points(launch.eval_every), points(launch.checkpoint_every)
    if evaluated and not launch.restore_from:
        # A checkpoint at the first step of a fresh run: a rate too high for the model blows up within the first
        # evaluation interval, and the guard's rollback then has a sound target (guard.md, divergence).
        durable.insert(0, FIRST_STEP)
    return evaluated, durable


class EvalCheckpointHook(v1.train.SessionRunHook):
    """Writes a checkpoint once progress passes each of `points` or `durable` (fractions), or once
    `every_s` seconds passed since the last, and reports its path: an evaluation point's as an
    EvalCheckpoint (the evaluator scores it; it is durable too), any other as a periodic Saved.

    The points are also the state's marks, so the step runner reads the exact global count near
    them and the checkpoints land on exact counts.
    """

    def __init__(self, state, points, save, emit, durable=(), every_s: float = 0.0, clock=time.monotonic):
        self.state = state
        self._eval = {round(p, 9) for p in points}
        self._all = sorted(self._eval | {round(p, 9) for p in durable})
        self.points = list(self._all)
        self.save = save        # save(session, kind, samples, then): then(checkpoint path) once it is on disk
        self.emit = emit
        self.every_s = every_s
        self.clock = clock
        self.last_save = clock()
        self.session = None
        state.marks = list(self.points)

    def after_create_session(self, session, coord):
        self.session = session
        self.last_save = self.clock()

    def skip_to(self, fraction: float) -> None:
        """Progress starts at `fraction` (a restore): the points at or below it are not checkpointed again."""
        self.points = [p for p in self._all if p > fraction]
        self.state.marks = list(self.points)
        self.last_save = self.clock()  # a restored checkpoint is as recent as a save

    def after_run(self, run_context, run_values):
        state = self.state
        fraction = state.fraction
        crossed = [p for p in self.points if p <= fraction]
        timed = self.every_s > 0 and self.clock() - self.last_save >= self.every_s and fraction < 1.0
        if not crossed and not timed:
            return
        self.points = [p for p in self.points if p > fraction]
        state.marks = list(self.points)
        t0 = time.perf_counter()
        evaluated = any(p in self._eval for p in crossed)
        samples = state.samples

        def report(path: str) -> None:  # the checkpoint is on disk (maybe written beside training, on a thread)
            if evaluated:
                self.emit(codec.event(eval_checkpoint=pb.EvalCheckpoint(path=path, fraction=fraction,
                                                                        samples=samples)))
            else:
                self.emit(codec.event(saved=pb.Saved(path=path, reason=pb.SAVE_REASON_PERIODIC, fraction=fraction,
                                                     samples=samples)))

        self.save(self.session, "evaluation" if evaluated else "periodic", samples, report)
        self.last_save = self.clock()
        # Checkpointing is syncswitch's own cost, not the chief being slow:
        # keep it out of the busy time the straggler detector compares.
        state.last_wait_s += time.perf_counter() - t0
