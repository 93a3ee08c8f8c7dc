"""What the engines whose workers step on replicas and agree through collectives share.

Each worker trains its copy of the model (node/replica.py) with its own momentum optimizer, at the rate and
momentum the schedule gives for the group's sample count; the count is kept on the worker (every worker takes a
per_worker_batch step per step of the group, so it is exact between reads). The parameter servers hold the
canonical model at the phase's boundaries: entry copies the shared model, its momentum, the count and the
schedule's settings onto the worker (one transfer per server), and the chief writes the replica, its momentum,
the count and the steps taken back (`publish`) before a checkpoint and when the phase ends, so checkpoints, the
evaluator, the guard and the next protocol see the model as they see any other.

`mean` is the one collective: the group's mean of float32 tensors, concatenated into one buffer (one ring
all-reduce over the workers' gRPC servers per call, however many variables the model has).
"""

from __future__ import annotations

import contextlib
import dataclasses

import tensorflow as tf
from tensorflow.python.ops import collective_ops
from tensorflow.python.training.saving import saveable_object_util

from . import fused
from .base import dense, localize, worker_variable

v1 = tf.compat.v1
GROUP_KEY = 31  # the workers' collective group; each engine's collective takes its own instance key
SUPPORTED = (tf.float32,)


def supported(pairs) -> bool:
    """Whether every variable can travel in one float32 buffer."""
    return all(v.dtype.base_dtype in SUPPORTED and v.shape.is_fully_defined() for _, v in pairs)


def gradients_supported(replica) -> bool:
    """Whether BSP's all-reduce can step on `replica`: its one buffer carries the trained variables' gradients
    (float32); the other variables (an integer counter the model advances, a global step it reads) move only at the
    phase's boundaries, grouped by type (fused.py). Requiring every variable in float32 sent such a model's BSP
    through the parameter servers."""
    trained = {c.ref() for c in replica.trainable}
    return (supported([pair for pair in replica.pairs if pair[1].ref() in trained])
            and all(c.shape.is_fully_defined() for _, c in replica.pairs))


def mean(tensors, n: int, instance_key: int, name: str, wire=None) -> tuple[list, tf.Tensor]:
    """(the group's mean of each of `tensors` (float32), from one all-reduce of their concatenation; the seconds
    the all-reduce took on this worker). The latter is mostly waiting for the slowest peer: a worker's own speed is
    its step time less it, which is how a straggler is told apart when every worker steps at the group's pace.
    `wire`: the type the buffer travels and is summed in (compression.py); None: float32."""
    flat = tf.concat([tf.reshape(t, [-1]) for t in tensors], 0, name=f"{name}_flat")
    if wire is not None:
        flat = tf.cast(flat, wire, name=f"{name}_compressed")
    with tf.control_dependencies([flat]):
        start = tf.timestamp(name=f"{name}_wait_from")
    with tf.control_dependencies([start]):
        total = collective_ops.all_reduce(flat, n, GROUP_KEY, instance_key, "Add", "Div")
    if wire is not None:
        total = tf.cast(total, tf.float32, name=f"{name}_decompressed")
    with tf.control_dependencies([total]):
        waited = tf.subtract(tf.timestamp(name=f"{name}_wait_until"), start, name=f"{name}_wait_s")
    # An embedding's gradient, made dense, has a dynamic first dimension: its size is read from the graph then.
    sizes = [t.shape.num_elements() if t.shape.is_fully_defined() else tf.size(t) for t in tensors]
    parts = tf.split(total, sizes, num=len(tensors))
    shapes = [t.shape if t.shape.is_fully_defined() else tf.shape(t) for t in tensors]
    return [tf.reshape(p, shape) for p, shape in zip(parts, shapes)], waited


def warm_publish(session, enter, publish, is_chief: bool) -> None:
    """Before training: pay the first call of the phase's entry (every worker) and of the chief's write-back.

    A call's first run registers its graph partitions on every task it touches, the parameter servers included:
    100-300 ms on a busy machine, which the chief's first publish paid at the phase's end (or before the first
    evaluation checkpoint) while the whole group waited for it. Entry then publish writes back what entry read
    (the steps taken since entry are 0), so the shared model is left as it was; the chief resets it before
    training anyway."""
    session.run(enter)
    if is_chief:
        session.run(publish)


@dataclasses.dataclass
class Snapshot:
    """The chief's copy, taken at one step, of what a checkpoint after `publish` would hold, and a saver that
    writes it under the checkpoint's own names. Taking it is a copy in the chief's memory; writing it needs no
    step to wait: the replicas move on, the copy does not, and what it leaves to the parameter servers (the
    schedule's settings, any other protocol's variables) only changes at a phase's boundary."""

    take: tf.Operation        # copies the replica, its momentum, the count and the steps into the snapshot
    global_step: tf.Tensor    # the global step the checkpoint holds (read with `take`)
    saver: object             # v1.train.Saver writing the snapshot under the shared variables' names


class ReplicaTraining:
    """The worker's optimizer, count and schedule on its replica, and the phase's entry and publish ops.

    Build it inside the engine's device and variable scope, call `apply` once with the gradients to apply, then
    `boundaries` outside the scope. `pairs` is then every (shared, local) pair the phase moves, the trained
    variables' momentum included, in the shared variables' name order: the same on every worker, so that a
    buffer laid out in it means the same on each (the replica lists variables in the order it found them).
    """

    def __init__(self, replica, schedule, per_worker_batch: int, num_workers: int, name: str):
        self.replica = replica
        self.name = name
        self.estimate = worker_variable("samples", (), tf.int64)
        self.steps = worker_variable("steps", (), tf.int64)  # taken since the last publish
        self.settings = [worker_variable(f"schedule_{k}", v.shape, v.dtype.base_dtype)
                         for k, v in enumerate(schedule.variables)]
        self._schedule = schedule
        self._stride = per_worker_batch * num_workers
        lr, momentum = schedule.rates(self.estimate, self.settings)
        self.optimizer = v1.train.MomentumOptimizer(lr, momentum, name=f"{name}_momentum")
        names = {copy.ref(): shared.op.name for shared, copy in replica.pairs}
        self._names = names
        trainable = sorted(replica.trainable, key=lambda c: names[c.ref()])
        # As computed (an embedding's gradient as IndexedSlices: BSP's all-reduce gathers its rows), and dense.
        self.raw_grads = [(g, v) for g, v in self.optimizer.compute_gradients(replica.loss, var_list=trainable)
                          if g is not None]
        self.grads = [(dense(g), v) for g, v in self.raw_grads]
        self.pairs: list = []
        self.momentum_pairs: list = []  # the (shared slot, worker's slot) pairs among `pairs`
        self._scope = None  # the engine's variable scope (`begin`)

    @classmethod
    def begin(cls, scope_name: str, optimizer, replica, schedule, per_worker_batch: int, num_workers: int,
              name: str) -> ReplicaTraining:
        """An engine's ReplicaTraining, made on the worker in the engine's variable scope `scope_name`, and the
        shared optimizer's momentum slots of every shared variable it trains, made outside that scope (named after
        and placed beside their shared variables, as apply_gradients makes them): checkpoints hold them and
        `publish` writes the replica's momentum into them. Made from the variables (the v1 optimizer's own hook,
        outside any control flow), so that no gradient of the shared model need be built where no protocol of the
        run steps on it. The engine builds the rest of its ops `inside()`."""
        with tf.device(replica.device), v1.variable_scope(scope_name) as scope:
            core = cls(replica, schedule, per_worker_batch, num_workers, name)
        core._scope = scope
        copies = {v.ref() for _, v in core.grads}
        trained = [shared for shared, copy in replica.pairs if copy.ref() in copies]
        with tf.init_scope():
            optimizer._create_slots(trained)
        return core

    @contextlib.contextmanager
    def inside(self):
        """Back in the engine's variable scope on the worker, under the scope's own name scope (not a new one)."""
        with tf.device(self.replica.device), v1.variable_scope(self._scope, auxiliary_name_scope=False), \
                tf.name_scope(self._scope.original_name_scope):
            yield

    def apply(self, grads_and_vars) -> tf.Operation:
        """One step on the replica: the momentum update, then the count and the steps taken."""
        before = {v.ref() for v in v1.global_variables()}
        step = self.optimizer.apply_gradients(grads_and_vars)
        self._slots = [v for v in v1.global_variables() if v.ref() not in before]
        with tf.control_dependencies([step]):
            self.estimate_after = self.estimate.assign_add(self._stride)
            counted = self.steps.assign_add(1)
        return tf.group(step, self.estimate_after, counted)

    def boundaries(self, optimizer, global_step, samples):
        """(enter, publish): the phase's entry on every worker, the chief's write-back. `optimizer` is the shared
        one, whose momentum slots hold the canonical momentum."""
        localize(v1.get_default_graph(), self._slots)  # each worker's own momentum: out of checkpoints, readiness
        momentum = []
        trained = {v.ref() for v in self.replica.trainable}
        for shared, copy in self.replica.pairs:
            mine, ours = self.optimizer.get_slot(copy, "momentum"), optimizer.get_slot(shared, "momentum")
            if copy.ref() in trained and mine is not None and ours is not None:
                momentum.append((ours, mine))
        self.momentum_pairs = sorted(momentum, key=lambda p: p[0].op.name)
        self.pairs = sorted([*self.replica.pairs, *momentum], key=lambda p: p[0].op.name)
        groups = fused.by_server(self.pairs, "replica")
        device = self.replica.device
        with tf.device(device):
            steps = self.steps.read_value()
            estimate = self.estimate.read_value()
        enter = fused.pull(groups, device)
        with v1.colocate_with(samples):
            counted_now = samples.read_value()
            setting_values = [v.read_value() for v in self._schedule.variables]
        with tf.device(device):
            enter += [self.estimate.assign(counted_now, read_value=False), self.steps.assign(0, read_value=False)]
            enter += [mine.assign(value, read_value=False) for mine, value in zip(self.settings, setting_values)]
        writes = fused.push_assign(groups, device)
        with v1.colocate_with(samples):
            writes.append(samples.assign(estimate, read_value=False))
        with v1.colocate_with(global_step):
            writes.append(global_step.assign_add(steps, read_value=False))
        with tf.control_dependencies(writes), tf.device(device):
            publish = self.steps.assign_sub(steps, read_value=False)
        return tf.group(*enter), publish

    def snapshot(self, saved, global_step, samples) -> Snapshot:
        """A Snapshot of the checkpointed variables `saved` (call after `boundaries`, on the chief): each one a
        publish writes is copied from the worker (the replica and its momentum; the count; the global step plus
        the steps taken since the last publish) into a worker-local variable, the others are read at save time."""
        mine = {shared.ref(): copy for shared, copy in self.pairs}
        mine[samples.ref()] = self.estimate
        with v1.colocate_with(global_step):
            published = global_step.read_value()
        with tf.device(self.replica.device):
            stepped = tf.add(published, self.steps.read_value(), name=f"{self.name}_snapshot_global_step")
        copies, sources = [], []

        def kept(variable):
            """What the snapshot's saver saves for `variable`: its copy, or itself where nothing publishes it."""
            source = stepped if variable.ref() == global_step.ref() else mine.get(variable.ref())
            if source is None:
                return variable
            with tf.device(self.replica.device):
                copy = worker_variable(f"{self.name}_snapshot/{len(copies)}", variable.shape, variable.dtype.base_dtype)
            # A partitioned variable's part is saved as its slice of the whole, under the whole's name.
            copy._save_slice_info = getattr(variable, "_save_slice_info", None)
            copies.append(copy)
            sources.append(source)
            return copy

        names = {name: [kept(part) for part in variable] if isinstance(variable, (list, tuple)) else kept(variable)
                 for name, variable in saveable_object_util.op_list_to_dict(saved, convert_variable_to_tensor=False)
                 .items()}
        with tf.device(self.replica.device):
            take = tf.group(*[c.assign(s, read_value=False) for c, s in zip(copies, sources)],
                            name=f"{self.name}_snapshot_take")
        # Placed as the checkpoints' own saver is (graph.py): its file is written by the chief's worker.
        saver = v1.train.Saver(names, max_to_keep=None, sharded=False, save_relative_paths=True,
                               name=f"{self.name}_snapshot_saver")
        localize(v1.get_default_graph(), copies)
        return Snapshot(take, stepped, saver)
