"""BSP by all-reduce: every worker steps its own replica with the group's mean gradient, as all-reduce trainers do.

SyncReplicasOptimizer sends every variable's gradient to the parameter servers, fills one accumulator per
variable, waits for the chief's queue runner to apply the update and hand out tokens, and every worker then
reads every variable back: four transfers per variable per step and two round trips through the chief. Here a
step is one collective: each worker concatenates its gradients (with its loss and a stop flag) into one flat
tensor, a ring all-reduce between the workers' servers returns the mean on every worker, and each applies the
same momentum update to its replica. The replicas start equal (pulled from the parameter servers at the phase's
entry) and stay equal, so the result is the parameter-server BSP's update: n workers at batch B take the steps
one worker takes at batch nB.

The parameter servers hold the canonical model at the phase's boundaries: the chief writes its replica, its
momentum, the sample count and the global step back (`publish`) before every checkpoint and when the phase
ends, so checkpoints, the evaluator, the guard and the next protocol see the model as they see any other.
The learning rate and momentum follow the schedule on the worker, from the replica's own sample count (exact:
every step takes per_worker_batch from each of the n workers), with the schedule's settings read at entry.

A collective waits for all n workers, so every worker must stop after the same step. A boundary reached by the
sample count is met by all at the same step; a boundary moved while the phase runs (a policy's set_boundary
arrives at each worker at a different step) is agreed through the flag: a worker past its boundary sends 1,
and the step whose mean flag is positive is everyone's last. The loss the hooks watch is the group's mean
loss from the same collective, so a divergence is seen by every worker at the same step.
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.ops import collective_ops

from . import fused
from .base import ProtocolEngine, dense, localize, worker_variable

v1 = tf.compat.v1
GROUP_KEY = 31          # the workers' collective group
INSTANCE_KEY = 3100     # this engine's one all-reduce (other engines' collectives take other keys)
SUPPORTED = (tf.float32,)


def supported(grads_and_vars) -> bool:
    """Whether every gradient can travel in one float32 buffer."""
    return all(v.dtype.base_dtype in SUPPORTED and v.shape.is_fully_defined() for _, v in grads_and_vars)


class AllReduceEngine(ProtocolEngine):
    """Synchronous steps on the worker's replica, the gradients averaged by one fused all-reduce per step."""

    name = "bsp"
    needs_replica = True

    def __init__(self, optimizer, global_step, samples, per_worker_batch: int, num_workers: int, is_chief: bool,
                 replica, schedule):
        n = num_workers
        device = replica.device
        self._is_chief = is_chief
        with tf.device(device), v1.variable_scope("syncswitch_allreduce"):
            self._estimate = worker_variable("samples", (), tf.int64)
            self._steps = worker_variable("steps", (), tf.int64)  # taken since the last publish
            settings = [worker_variable(f"schedule_{k}", v.shape, v.dtype.base_dtype)
                        for k, v in enumerate(schedule.variables)]
            lr, momentum = schedule.rates(self._estimate, settings)
            local_opt = v1.train.MomentumOptimizer(lr, momentum, name="allreduce_momentum")
            # The buffer's layout must be the same on every worker: in the shared variables' name order (the
            # replica lists them in the order it found them, which differs between processes).
            names = {copy.ref(): shared.op.name for shared, copy in replica.pairs}
            trainable = sorted(replica.trainable, key=lambda c: names[c.ref()])
            grads = [(dense(g), v) for g, v in local_opt.compute_gradients(replica.loss, var_list=trainable)
                     if g is not None]
            self.stop_in = v1.placeholder_with_default(tf.constant(0.0), [], name="allreduce_stop_in")
            pieces = [tf.reshape(g, [-1]) for g, _ in grads]
            flat = tf.concat([*pieces, tf.reshape(tf.cast(replica.loss, tf.float32), [1]),
                              tf.reshape(self.stop_in, [1])], 0, name="allreduce_flat")
            mean = collective_ops.all_reduce(flat, n, GROUP_KEY, INSTANCE_KEY, "Add", "Div")
            parts = tf.split(mean, [fused.size(v) for _, v in grads] + [1, 1])
            averaged = [(tf.reshape(p, v.shape), v) for p, (_, v) in zip(parts, grads)]
            before = {v.ref() for v in v1.global_variables()}
            step = local_opt.apply_gradients(averaged)
            slots = [v for v in v1.global_variables() if v.ref() not in before]
            with tf.control_dependencies([step]):
                after = self._estimate.assign_add(per_worker_batch * n)
                counted = self._steps.assign_add(1)
            self.loss = tf.reshape(parts[-2], [], name="allreduce_mean_loss")
            self.agreed_stop = tf.greater(tf.reshape(parts[-1], []), 0.0, name="allreduce_agreed_stop")
        localize(v1.get_default_graph(), slots)  # each worker's own momentum: out of checkpoints and readiness
        self._finish(tf.group(step, after, counted, name="allreduce_step"), after)

        pairs = list(replica.pairs)
        trained = {v.ref() for v in replica.trainable}
        for shared, copy in replica.pairs:
            mine, ours = local_opt.get_slot(copy, "momentum"), optimizer.get_slot(shared, "momentum")
            if copy.ref() in trained and mine is not None and ours is not None:
                pairs.append((ours, mine))
        groups = fused.by_server(pairs, self.name)
        with tf.device(device):
            steps = self._steps.read_value()
            estimate = self._estimate.read_value()
        # Entry: the shared model, momentum, count and schedule settings as this worker's; one read per server.
        enter = fused.pull(groups, device)
        with v1.colocate_with(samples):
            counted_now = samples.read_value()
            setting_values = [v.read_value() for v in schedule.variables]
        with tf.device(device):
            enter += [self._estimate.assign(counted_now, read_value=False), self._steps.assign(0, read_value=False)]
            enter += [mine.assign(value, read_value=False) for mine, value in zip(settings, setting_values)]
        self._enter = tf.group(*enter, name="allreduce_enter")
        # Publish (the chief): the replica, its momentum, the count and the steps taken back to the servers.
        writes = fused.push_assign(groups, device)
        with v1.colocate_with(samples):
            writes.append(samples.assign(estimate, read_value=False))
        with v1.colocate_with(global_step):
            writes.append(global_step.assign_add(steps, read_value=False))
        with tf.control_dependencies(writes), tf.device(device):
            self._publish = self._steps.assign_sub(steps, read_value=False)
        self._published = True

    def enter_worker(self, session, params: dict | None = None) -> None:
        session.run(self._enter)
        self._published = True

    def after_step(self, session, state) -> float:
        self._published = False
        if state.at_boundary():
            self.publish(session)
        return 0.0

    def publish(self, session) -> None:
        """The chief writes the group's model back to the parameter servers (the replicas are equal)."""
        if self._is_chief and not self._published:
            session.run(self._publish)
            self._published = True
