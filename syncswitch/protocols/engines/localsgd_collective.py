"""Local SGD averaged by all-reduce: the workers' copies averaged in one collective.

The same protocol as `localsgd.py` (each worker steps on its own copy at BSP's rate, the copies are averaged
every `period` steps), without the parameter servers in the loop: an average is one ring all-reduce of every
copy concatenated, after which each worker holds the mean. Each worker's momentum stays its own between
averages (an average that carried it too moved twice the bytes: at period 2 as much per step as BSP), and the
group's mean momentum is taken once, when the phase ends. With period 1 this is BSP's all-reduce exactly (the
momentum update is linear, so the mean of the momenta follows BSP's). The parameter servers get the model at the
boundaries only (replica_training.py): the chief publishes its copy before a checkpoint (between averages, its
copy is the last average plus its own steps since, and its momentum its own) and when the phase ends (after the
last average, so the group's mean).

Every worker takes part in every average, so all must stop after the same one. A boundary reached by the sample
count (exact on every worker: all step in lockstep between averages) is met by all at the same step, and each
averages there. A boundary moved while the phase runs (a policy's set_boundary reaches each worker at a
different step) is agreed through a flag in the average: a worker past its boundary averages at once with the
flag set, its peers meet it at their next average, and the average whose mean flag is positive is everyone's
last. Divergence is agreed the same way: the loss the hooks watch is the worker's own while finite, and the
group's mean loss at the last average otherwise, so a non-finite copy is reported by every worker at once,
after the average that spread it.

With `hyperparameters.compression` an average sends each copy's move since the last average as 16-bit floats
(compression.py): the copies stay float32 and equal on every worker after it.
"""

from __future__ import annotations

import time

import tensorflow as tf

from .base import CollectiveStep, ProtocolEngine, StopFlag, worker_variable
from .clipping import clipped
from .compression import mean_with_control, wire_type
from .replica_training import ReplicaTraining, mean, warm_publish

INSTANCE_KEY = 3200  # this engine's average (BSP's all-reduce takes 3100)
MOMENTUM_KEY = 3201  # the momenta's average at the phase's end


class CollectiveLocalSGDEngine(ProtocolEngine):
    """Worker-local steps on the replica; every `period` steps one all-reduce averages the copies."""

    name = "local-sgd"
    needs_replica = True
    collective = True

    def __init__(self, optimizer, grads_and_vars, global_step, samples, per_worker_batch: int, num_workers: int,
                 is_chief: bool = False, replica=None, schedule=None, clip_norm=None, compression=None, **_):
        self.period = 2
        self._is_chief = is_chief
        # With the shared momentum slots, when no other protocol of the schedule made them: the published momentum
        # is checkpointed and continues across a switch either way.
        core = ReplicaTraining.begin("syncswitch_local_sgd_allreduce", optimizer, replica, schedule,
                                     per_worker_batch, num_workers, "local_sgd_allreduce")
        with core.inside():
            last_loss = worker_variable("last_loss", (), tf.float32)
            self._mean_loss = worker_variable("mean_loss", (), tf.float32)
            step = core.apply(clipped(core.grads, clip_norm))  # each local step's own gradient
            own = tf.cast(replica.loss, tf.float32)
            with tf.control_dependencies([step]):
                remembered = last_loss.assign(own, read_value=False)
            self.loss = tf.where(tf.math.is_finite(own), own, self._mean_loss.read_value(), name="local_sgd_loss")
        self._finish(tf.group(step, remembered, name="local_sgd_step"), core.estimate_after)
        enter, self._publish = core.boundaries(optimizer, global_step, samples)
        self._core = core
        with tf.device(replica.device):
            self.stop = StopFlag("local_sgd")
            # An average moves the model's copies; each worker's momentum stays its own (post-local SGD's rule,
            # Lin et al. 2020), which halves what a round moves. The momenta are averaged once, at the phase's
            # end, for what comes after it: with the copies averaged every step the mean momentum follows BSP's
            # exactly (the update is linear), so period 1 is still BSP.
            slots = {mine.ref() for _, mine in core.momentum_pairs}
            copies = [copy for _, copy in core.pairs if copy.ref() not in slots]
            self._wire = wire_type(compression)
            # Compressed, an average moves each copy's change since the last one (compression.py): the anchors
            # hold the last average (the entry's model at first), equal on every worker.
            self._anchors = []
            if self._wire is not None:
                with core.inside():
                    self._anchors = [worker_variable(f"anchor_{k}", c.shape, c.dtype.base_dtype)
                                     for k, c in enumerate(copies)]
            self._momentum_average = self._momenta_op([mine for _, mine in core.momentum_pairs], num_workers)
            self._average, _ = self._average_op(copies, last_loss, num_workers, "local_sgd")
            # The same average in the step's own call, read after the step (and after the loss the hooks fetch, so
            # that it is the last average's mean loss, as in a call of its own). Same instance key: a collective's
            # step id comes from the sequence of its call's instance keys, so a worker's n-th average meets its
            # peers' n-th whichever of the two calls each ran.
            agreed, waited = self._average_op(copies, last_loss, num_workers, "local_sgd_fused",
                                              after=[self.train_op, self.loss])
            self.averaging = CollectiveStep(self.train_op, core.estimate_after, self.stop, agreed, waited)
            self._reset_loss = self._mean_loss.assign(0.0, read_value=False)
        # A flag raised for a step whose call failed must not end the next phase at its first step.
        self._enter = tf.group(self._anchored(enter, copies), self.stop.lower_op)
        self._average_fn = self._raise_fn = None
        self._published = True
        self._rounds = 0
        self._steps = 0
        self._waited = 0.0
        self._fusing = False

    def _average_op(self, copies, last_loss, num_workers: int, name: str, after=()):
        """(the group's mean of the copies and their momentum assigned to this worker's, with the last losses' mean:
        true where the group agreed to stop; the seconds it waited for the group). `after`: what its reads follow."""
        flag, lowered = self.stop.read(after)
        with tf.control_dependencies(list(after)):
            values = [c.read_value() for c in copies]
            control = [tf.reshape(last_loss.read_value(), [1]), tf.reshape(flag, [1])]
            if self._wire is not None:
                values = [v - a.read_value() for v, a in zip(values, self._anchors)]
        means, (mean_loss, mean_flag), waited = mean_with_control(values, control, num_workers, INSTANCE_KEY, name,
                                                                  self._wire)
        if self._wire is not None:  # the anchor plus the mean move, in float32: the new anchor too
            means = [a.read_value() + m for a, m in zip(self._anchors, means)]
            assigns = [a.assign(m, read_value=False) for a, m in zip(self._anchors, means)]
        else:
            assigns = []
        assigns += [c.assign(m, read_value=False) for c, m in zip(copies, means)]
        assigns += [self._mean_loss.assign(tf.reshape(mean_loss, []), read_value=False), lowered]
        with tf.control_dependencies(assigns):
            return tf.greater(tf.reshape(mean_flag, []), 0.0, name=f"{name}_agreed_stop"), waited

    def _anchored(self, enter, copies):
        """`enter`, then (compressed) each anchor set to its copy as entry left it."""
        if not self._anchors:
            return enter
        with tf.control_dependencies([enter]), tf.device(self._core.replica.device):
            return tf.group(*[a.assign(c.read_value(), read_value=False) for a, c in zip(self._anchors, copies)])

    @staticmethod
    def _momenta_op(momenta, num_workers: int):
        """The group's mean of the workers' momentum assigned to each (None where nothing is trained)."""
        if not momenta:
            return None
        means, _ = mean([m.read_value() for m in momenta], num_workers, MOMENTUM_KEY, "local_sgd_momentum")
        return tf.group(*[m.assign(v, read_value=False) for m, v in zip(momenta, means)])

    def _averaged(self, session, stop: bool) -> bool:
        """Run one average (with this worker's stop flag); whether the group agreed to stop."""
        if self._average_fn is None:
            self._average_fn = session.make_callable(self._average)
            self._raise_fn = session.make_callable(self.stop.raise_op)
        if stop:
            self._raise_fn()
        return bool(self._average_fn())

    def enter_worker(self, session, params: dict | None = None) -> None:
        self.period = int((params or {}).get("period", self.period))
        self._rounds = 0
        self._steps = 0
        self._waited = 0.0
        self._fusing = False
        session.run([self._enter, self._reset_loss])
        self._published = True

    def before_warm_up(self, session) -> None:
        # Pays the average's first call (graph registration, the group's resolution) before training; every worker
        # warms the protocols up in the same order, so all take part. Entry overwrites what it averaged.
        self._averaged(session, False)
        self._average_momenta(session)
        warm_publish(session, self._enter, self._publish, self._is_chief)
        self._published = True

    def averaging_step(self, state) -> CollectiveStep | None:
        """The step and the average in one call where this step is the period's last or reaches the boundary (exact
        on every worker: all step in lockstep between averages; a moved boundary is taken before the step)."""
        self._fusing = self._steps + 1 >= self.period or state.stop_flag()
        return self.averaging if self._fusing else None

    def after_step(self, session, state) -> float:
        """Average once `period` steps were taken since the last average, at the boundary, or to agree to stop,
        unless the step's call averaged already (`averaging_step`)."""
        self._published = False
        waited = 0.0
        if self._fusing:
            self._fusing = False
            self._steps = 0
            self._rounds += 1
            self._waited += state.last_wait_s
        else:
            self._steps += 1
            wants = state.at_boundary()
            if self._steps >= self.period or wants:
                t0 = time.perf_counter()
                if self._averaged(session, wants):
                    state.boundary = min(state.boundary, state.fraction - 1e-12)  # at it on every worker, float-safe
                self._steps = 0
                self._rounds += 1
                waited = time.perf_counter() - t0
                self._waited += waited
        if state.at_boundary():  # after the group's last average, on every worker
            t0 = time.perf_counter()
            self._average_momenta(session)
            waited += time.perf_counter() - t0
            self.publish(session)
        return waited

    def _average_momenta(self, session) -> None:
        if self._momentum_average is not None:
            session.run(self._momentum_average)

    def add_snapshot(self, saved, global_step, samples) -> None:
        self.snapshot = self._core.snapshot(saved, global_step, samples)

    def publish(self, session) -> None:
        """The chief writes its copy back to the parameter servers (the group's mean right after an average)."""
        if self._is_chief and not self._published:
            session.run(self._publish)
            self._published = True

    def stats(self, session) -> dict:
        return {"allreduce": True, "averages": self._rounds, "period": self.period,
                "average_s": round(self._waited, 3)}
