"""What every protocol engine shares: the interface, the sample-counting optimizer, the staleness meter."""

from __future__ import annotations

import abc
import dataclasses

import tensorflow as tf

from .clipping import clipped
from .update_log import LogPlace, UpdateLog

v1 = tf.compat.v1

# Protocol state (clocks, counters, mean squares) is rebuilt per graph and re-initialized at phase
# entry: it stays out of checkpoints, so a relaunch into a protocol the checkpoint never held restores.
ENGINE_STATE = "syncswitch_engine_state"


def state_variable(name: str, shape, dtype, init=0, colocate=None) -> tf.Variable:
    """A non-trainable, non-checkpointed variable on the parameter servers (beside `colocate`, if given)."""
    collections = [v1.GraphKeys.GLOBAL_VARIABLES, ENGINE_STATE]

    def make():
        return v1.get_variable(name, shape, dtype, v1.constant_initializer(init), trainable=False,
                               collections=collections)

    if colocate is None:
        return make()
    with v1.colocate_with(colocate):
        return make()


def worker_variable(name: str, shape, dtype, init=0) -> tf.Variable:
    """A non-trainable variable of this worker's own (LOCAL_VARIABLES): out of checkpoints, initialized per
    session, on whatever device the caller's scope names."""
    return v1.get_variable(name, shape, dtype, v1.constant_initializer(init), trainable=False,
                           collections=[v1.GraphKeys.LOCAL_VARIABLES])


def localize(graph, variables) -> None:
    """Move `variables` from the global and trainable collections to the local one: each worker owns its copy."""
    refs = {v.ref() for v in variables}
    for key in (v1.GraphKeys.GLOBAL_VARIABLES, v1.GraphKeys.TRAINABLE_VARIABLES):
        kept = [v for v in graph.get_collection(key) if v.ref() not in refs]
        collection = graph.get_collection_ref(key)
        collection[:] = kept
    local = graph.get_collection_ref(v1.GraphKeys.LOCAL_VARIABLES)
    present = {v.ref() for v in local}
    for v in variables:
        if v.ref() not in present:
            present.add(v.ref())
            local.append(v)


class CountingOptimizer(v1.train.Optimizer):
    """Delegates to a shared optimizer and adds the samples one update consumed to a counter.

    Every protocol wraps the same inner optimizer, so momentum slots and the learning-rate
    tensor are shared and continue across a switch. `clip_norm`: the gradients it is given are clipped to that
    global norm first (clipping.py), where they are already the update's (SyncReplicasOptimizer's aggregate).
    """

    def __init__(self, inner, samples, per_update, name: str, clip_norm: float | None = None):
        super().__init__(use_locking=False, name=name)
        self._inner = inner
        self._samples = samples
        self._per_update = per_update
        self._clip_norm = clip_norm

    def compute_gradients(self, *args, **kwargs):
        return self._inner.compute_gradients(*args, **kwargs)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None, after=()):
        """The update, then the sample counter and the global step. `after`: what must be read before this
        update counts in the global step (the staleness meter's read: else it may see its own step, one late)."""
        update = self._inner.apply_gradients(clipped(grads_and_vars, self._clip_norm))
        stepped = []
        # The global step this update counted itself at (None without one): the staleness meter's record.
        self.step_after = None
        if global_step is not None:
            with tf.control_dependencies([update, *after]), v1.colocate_with(global_step):
                stepped.append(v1.assign_add(global_step, 1))
            # Read once: a resource variable's assign_add hands back a lazy read, and each use of it made its own
            # read, so a peer's update landing between two of them gave the update-log row and the meter's sum
            # counts one apart (1 run in 4 of tests/protocols/test_update_log.py's real ASP run).
            with v1.colocate_with(global_step):
                self.step_after = tf.identity(stepped[0])
        with tf.control_dependencies([update]):
            # The counter's new value, produced where the counter lives: fetching it costs no extra hop.
            with v1.colocate_with(self._samples):  # a constant made on the worker would be one more send
                delta = tf.cast(self._per_update, tf.int64)
            self.counted = self._samples.assign_add(delta)
        return tf.group(update, self.counted, *stepped, name=name or f"{self._name}_apply")

    def get_slot(self, var, name):
        return self._inner.get_slot(var, name)

    def get_slot_names(self):
        return self._inner.get_slot_names()

    def variables(self):
        return self._inner.variables()


class StalenessMeter:
    """Step-staleness of one update: the global step when it is applied minus the global step when its
    parameters were read; summed and counted on the parameter servers for the phase's record.

    The read happens at the step's start, as the model's own variable reads do (neither has inputs,
    so the parameter server runs both as soon as the step reaches it). `at_apply` is the count when the step's
    gradients reach the servers (what a rule that scales or drops by staleness must decide on); the record,
    given the step's own count (`record(..., counted=)`), is the updates counted between the read and this one:
    updates of peers that land while this one waits to be applied count too. An instrumented real ASP run at 4
    workers on a shared machine had a quarter of its updates arrive while another was being applied; counted
    at arrival its mean staleness read 1.50-1.64, counted at its own update 1.70-1.82 (notebook
    2026-11-27-simulator-6), and the simulator, whose updates land one at a time, calibrates to the latter.
    """

    def __init__(self, global_step, name: str, log: LogPlace | None = None):
        """`log`: where this worker sits, to keep every update's row as well (update_log.py); None: the sums only."""
        self._global_step = global_step
        with tf.device(global_step.device):
            self.step_at_read = tf.identity(global_step.read_value(), name=f"{name}_step_at_read")
        self.total = state_variable(f"syncswitch/{name}_staleness_sum", [], tf.int64, colocate=global_step)
        self.count = state_variable(f"syncswitch/{name}_staleness_count", [], tf.int64, colocate=global_step)
        self.log = UpdateLog(state_variable, global_step, name, log) if log is not None else None
        resets = [self.total.assign(0), self.count.assign(0)] + ([self.log.reset_op] if self.log else [])
        self.reset_op = tf.group(*resets)

    def at_apply(self, ready) -> tf.Tensor:
        """The staleness, read once the tensors in `ready` (this step's gradients) exist."""
        with tf.device(self._global_step.device), tf.control_dependencies(ready):
            return tf.maximum(self._global_step.read_value() - self.step_at_read, 0)

    def record(self, staleness, counted=None, sum_given: bool = False) -> tf.Operation:
        """Add one update's staleness; `counted`: the global step its update counted itself at, when the record
        is the updates counted between the read and it (else `staleness` as given). `sum_given`: the phase's mean
        stays the `staleness` given (a rule's own count, specsync's) while the row keeps the count at its update."""
        with tf.device(self._global_step.device):
            logged = []
            if counted is not None and self.log is not None:
                logged.append(self.log.write(self.step_at_read, self.step_at_read + staleness, counted - 1))
            if counted is not None and not sum_given:
                staleness = tf.maximum(counted - 1 - self.step_at_read, 0)
            return tf.group(self.total.assign_add(staleness), self.count.assign_add(1), *logged)

    def stats(self, session) -> dict:
        """The phase's mean staleness and update count, and the per-update rows where they are kept."""
        total, count = session.run([self.total, self.count])
        out = {"staleness_mean": float(total) / count if count else None, "updates": int(count)}
        return {**out, **self.log.stats(session)} if self.log is not None else out


class StopFlag:
    """A worker's wish to end its phase after its next collective step, as a variable of its own: raised by a call
    of one assign before that step, read into the step's collective and lowered after the read (`read`).

    A fed placeholder made the step carrying the flag a second signature of the whole training step, whose first
    run registered the step's graph partitions again on every task: on the synthetic ResNet (4 workers on 2
    cores) about a second of every node's start-up for each collective engine warmed up, or of the phase's last
    step where it was not. Raising and lowering are one-assign calls; the step is the same call with or without."""

    def __init__(self, name: str):
        self._flag = worker_variable(f"{name}_stop_flag", (), tf.float32)
        self.raise_op = self._flag.assign(1.0, read_value=False, name=f"{name}_raise_stop")
        self.lower_op = self._flag.assign(0.0, read_value=False, name=f"{name}_lower_stop")

    def read(self, after=()) -> tuple[tf.Tensor, tf.Operation]:
        """(the flag, as a step's collective takes it; the op that lowers it once read): the step runs both."""
        with tf.control_dependencies(list(after)):
            value = self._flag.read_value()
        with tf.control_dependencies([value]):
            return value, self._flag.assign(0.0, read_value=False)


@dataclasses.dataclass(frozen=True)
class CollectiveStep:
    """A step whose call also holds the group's collective, run as BSP's all-reduce step is (step_loop.py): the
    step, the count after it, this worker's stop flag, the group's answer, and the wait for the group."""

    train_op: tf.Operation
    samples_after: tf.Tensor
    stop: StopFlag
    agreed_stop: tf.Tensor
    collective_wait_s: tf.Tensor


def dense(grad):
    """A gradient as a dense tensor (embedding lookups give IndexedSlices)."""
    return tf.convert_to_tensor(grad) if isinstance(grad, tf.IndexedSlices) else grad


class ProtocolEngine(abc.ABC):
    """One synchronization protocol's update path inside the worker graph.

    Optional hooks are no-ops; `params` are the phase's protocol parameters (catalog defaults filled in).
    """

    name: str
    train_op: tf.Operation
    samples_after: tf.Tensor  # the global sample counter, read after this worker's step
    # A synchronous step: `push_op` hands this worker's gradient over without waiting (a worker leaving
    # the group owes that); `step_op` pushes and waits for the group's update, `step_samples` is the counter
    # after it, and `step_wait_s` the wait, timed inside the graph so that one call tells a worker's own speed
    # from the time it spends waiting for others. A push call and a wait call cost a client round trip per
    # step (BSP on a small model ran at 0.85x a hand-written loop's single call).
    push_op = None
    step_op = None
    step_samples = None
    step_wait_s = None
    # Every step applies exactly one per-worker batch: the sample count may be estimated between reads.
    counts_every_step = False
    meter: StalenessMeter | None = None
    # A protocol whose workers step on a worker-local copy of the model (local SGD) gets it built by the
    # graph (`replica=`) and trains its loss: `loss` is then the one the hooks watch, else the shared model's.
    needs_replica = False
    loss: tf.Tensor | None = None
    # A collective step (all workers in one op) must end the phase at the same step on every worker: a worker
    # raises its `stop` flag before the step once it wants to stop, and `agreed_stop` (fetched with the step) says
    # the group does.
    stop: StopFlag | None = None
    agreed_stop: tf.Tensor | None = None
    # A collective step's wait for its group (seconds, timed in the graph around the collective): the step time less
    # it is the worker's own speed, as `step_wait_s` is for a parameter-server step.
    collective_wait_s: tf.Tensor | None = None
    # Its workers meet in collectives: a boundary moved while the phase runs is agreed by the group (see
    # TrainState.move_boundary), never taken by one worker alone.
    collective = False
    # The chief's checkpoint taken as a copy and written beside training (add_snapshot); None: publish and save.
    snapshot = None
    # Applies the shared model's gradient as one worker's update: build_engines hands it clipped to
    # hyperparameters.clip_norm (clipping.py), before any rule of the engine's own scales or compensates it. Engines
    # that combine the workers' gradients, or differentiate a replica, take `clip_norm` and clip where they apply.
    worker_gradient = False
    # The call of a step that ends in the group's collective, where the engine has one (`averaging_step` says when
    # a step runs it); the warm-up runs it once on every worker.
    averaging: CollectiveStep | None = None

    def _finish(self, train_op, samples_after) -> None:
        self.train_op = train_op
        self.samples_after = samples_after

    def enter_chief(self, session, params: dict | None = None) -> None:
        """Run on the chief, with every worker paused, before the phase starts."""
        if self.meter is not None:
            session.run(self.meter.reset_op)

    def choose_path(self, params: dict | None) -> None:
        """An engine with several update paths takes the one the phase's parameters ask for (on every worker)."""

    def enter_worker(self, session, params: dict | None = None) -> None:
        """Run on every worker after the chief entered the phase, before its first step."""

    def publish(self, session) -> None:
        """Make the parameter servers hold the phase's model (before a checkpoint), where workers step on copies."""

    def add_snapshot(self, saved, global_step, samples) -> None:
        """On the chief, where workers step on replicas: build `snapshot` (replica_training.Snapshot), so a
        checkpoint is a copy at the step and written off it. `saved`: the checkpointed variables."""

    def release(self, session) -> None:
        """Unblock workers waiting inside a step so they can reach a phase boundary."""

    def before_warm_up(self, session) -> None:
        """Make one warm-up step harmless to the protocol's own state (the model is reset after)."""

    def averaging_step(self, state) -> CollectiveStep | None:
        """Asked before each step by the loop: the call to run in place of `train_op`'s where this step also ends
        in the group's collective (local SGD's last step before an average), else None. One call where two would
        each pay a session round trip; `after_step` is then told so by the engine's own record."""
        return None

    def after_step(self, session, state) -> float:
        """Called after every step; a protocol that holds fast workers back waits here. Returns seconds waited
        beyond `state.last_wait_s` (the wait timed inside the step's own call)."""
        return 0.0

    def stats(self, session) -> dict:
        """What the phase measured (mean staleness, aborted steps), for the run's summary."""
        return {} if self.meter is None else self.meter.stats(session)
