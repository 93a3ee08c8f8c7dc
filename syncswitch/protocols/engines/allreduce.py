"""BSP by all-reduce: every worker steps its own replica with the group's mean gradient, as all-reduce trainers do.

SyncReplicasOptimizer sends every variable's gradient to the parameter servers, fills one accumulator per
variable, waits for the chief's queue runner to apply the update and hand out tokens, and every worker then
reads every variable back: four transfers per variable per step and two round trips through the chief. Here a
step is one collective: each worker concatenates its gradients (with its loss and a stop flag) into one flat
tensor, a ring all-reduce between the workers' servers returns the mean on every worker, and each applies the
same momentum update to its replica. The replicas start equal (pulled from the parameter servers at the phase's
entry) and stay equal, so the result is the parameter-server BSP's update: n workers at batch B take the steps
one worker takes at batch nB. An embedding's gradient (IndexedSlices) is applied as such, to the rows its batch
touched, as the parameter servers and one process apply it; a large table's rows are gathered rather than
reduced dense (sparse_gather.py).

The parameter servers hold the canonical model at the phase's boundaries: the chief writes its replica, its
momentum, the sample count and the global step back (`publish`) before every checkpoint and when the phase
ends, so checkpoints, the evaluator, the guard and the next protocol see the model as they see any other.
The learning rate and momentum follow the schedule on the worker, from the replica's own sample count (exact:
every step takes per_worker_batch from each of the n workers), with the schedule's settings read at entry.

A collective waits for all n workers, so every worker must stop after the same step. A boundary reached by the
sample count is met by all at the same step; a boundary moved while the phase runs (a policy's set_boundary
arrives at each worker at a different step) is agreed through the flag: a worker past its boundary sends 1,
and the step whose mean flag is positive is everyone's last. The loss the hooks watch is the group's mean
loss from the same collective, so a divergence is seen by every worker at the same step. With
`hyperparameters.compression` the gradients travel as 16-bit floats and the loss and flag beside them in float32
(compression.py).
"""

from __future__ import annotations

import tensorflow as tf

from .base import ProtocolEngine, StopFlag
from .clipping import clipped
from .compression import mean_with_control, wire_type
from .replica_training import ReplicaTraining, warm_publish
from .sparse_gather import RowPlan, gather_mean

INSTANCE_KEY = 3100     # this engine's all-reduce (other engines' collectives take other keys)
SPARSE_KEY = 3110       # its gathers of sparse gradients (three keys from here: sparse_gather.py)

__all__ = ["AllReduceEngine"]


class AllReduceEngine(ProtocolEngine):
    """Synchronous steps on the worker's replica, the gradients averaged by one fused all-reduce per step."""

    name = "bsp"
    needs_replica = True
    collective = True

    def __init__(self, optimizer, global_step, samples, per_worker_batch: int, num_workers: int, is_chief: bool,
                 replica, schedule, clip_norm=None, compression=None):
        self._is_chief = is_chief
        # With the shared momentum a parameter-server BSP's update would have made: checkpoints hold it, publish
        # fills it.
        core = ReplicaTraining.begin("syncswitch_allreduce", optimizer, replica, schedule, per_worker_batch,
                                     num_workers, "allreduce")
        with core.inside():
            self.stop = StopFlag("allreduce")
            flag, lowered = self.stop.read()
            plan = RowPlan(core.raw_grads)  # an embedding's rows: gathered, or dense in the buffer (sparse_gather)
            reduced = plan.reduced()
            loss = tf.reshape(tf.cast(replica.loss, tf.float32), [1])
            means, (mean_loss, mean_flag), self.collective_wait_s = mean_with_control(
                reduced, [loss, tf.reshape(flag, [1])], num_workers, INSTANCE_KEY, "allreduce", wire_type(compression))
            gathered = gather_mean(plan.gathered(), num_workers, SPARSE_KEY, "allreduce")
            # The group's mean is the update's gradient: clipped as one worker's at batch nB would be.
            step = core.apply(clipped(plan.finish(means, gathered), clip_norm))
            self.loss = tf.reshape(mean_loss, [], name="allreduce_mean_loss")
            self.agreed_stop = tf.greater(tf.reshape(mean_flag, []), 0.0, name="allreduce_agreed_stop")
        self._finish(tf.group(step, lowered, name="allreduce_step"), core.estimate_after)
        enter, self._publish = core.boundaries(optimizer, global_step, samples)
        # A flag raised for a step whose call failed must not end the next phase at its first step.
        self._enter = tf.group(enter, self.stop.lower_op)
        self._core = core
        self._published = True
        self._waited = 0.0

    def enter_worker(self, session, params: dict | None = None) -> None:
        session.run(self._enter)
        self._published = True
        self._waited = 0.0

    def before_warm_up(self, session) -> None:
        warm_publish(session, self._enter, self._publish, self._is_chief)
        self._published = True

    def after_step(self, session, state) -> float:
        self._published = False
        self._waited += state.last_wait_s  # the step's all-reduce, as its own call timed it
        if state.at_boundary():
            self.publish(session)
        return 0.0

    def add_snapshot(self, saved, global_step, samples) -> None:
        self.snapshot = self._core.snapshot(saved, global_step, samples)

    def publish(self, session) -> None:
        """The chief writes the group's model back to the parameter servers (the replicas are equal)."""
        if self._is_chief and not self._published:
            session.run(self._publish)
            self._published = True

    def stats(self, session) -> dict:
        """The seconds this worker spent in the phase's all-reduces: on the group's slowest worker (the last to
        pause, whose stats the summary keeps) that is the collective's own time, not a wait for a slower peer."""
        return {"allreduce_s": round(self._waited, 3)}
