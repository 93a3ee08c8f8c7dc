"""BSP through SyncReplicasOptimizer, with the elastic group size and backup workers (`aggregate: m`)."""

from __future__ import annotations

import threading
import time

import tensorflow as tf

from .base import CountingOptimizer, ProtocolEngine, state_variable

v1 = tf.compat.v1
OWED_WAIT_S = 600.0  # how long the tokens owed at an in-place re-entry wait for the pending aggregation


class SyncReplicasEngine(ProtocolEngine):
    """BSP: SyncReplicasOptimizer aggregates one gradient from each of n workers per update.

    The token queue starts empty, so each worker applies exactly one gradient and then waits for
    the aggregated update; `release` pushes n extra tokens so workers blocked at a boundary return.
    With backup workers (`aggregate: m`, Chen et al. 2016) an update takes the first m gradients
    and still hands a token to every worker: a late gradient is tagged with an old step and dropped.
    """

    name = "bsp"

    def __init__(self, optimizer, grads_and_vars, global_step, samples, per_worker_batch: int,
                 num_workers: int, is_chief: bool, clip_norm=None, **_):
        group, take = self._group_state(global_step, num_workers)
        # The aggregate is clipped (what SyncReplicasOptimizer hands the optimizer), not each worker's gradient.
        counting = CountingOptimizer(optimizer, samples, tf.cast(take, tf.int64) * per_worker_batch, "bsp",
                                     clip_norm=clip_norm)
        self._opt = v1.train.SyncReplicasOptimizer(
            counting, replicas_to_aggregate=num_workers, total_num_replicas=num_workers, name="bsp_sync")
        self._opt._replicas_to_aggregate = take  # read by take_grad, accepts a tensor
        self._opt._tokens_per_step = group  # read by the token fill, accepts a tensor
        self._num_workers = num_workers
        train_op = self._opt.apply_gradients(grads_and_vars, global_step)
        token = _find_op(train_op, "QueueDequeueV2")
        self.push_op = tf.group(*token.control_inputs, name="bsp_push")  # gradients into the accumulators
        queue = self._opt._sync_token_queue  # no public handle for the token queue
        self._build_step(queue, token, samples)
        self._is_chief = is_chief
        self._queue_runner_started = False
        self._build_control(queue, global_step, num_workers)

    def _group_state(self, global_step, num_workers: int):
        """(the group size read, the gradients an update takes), beside the global step."""
        # The synchronous group's size lives in a variable so the elastic straggler policy can
        # shrink it without rebuilding the graph: the chief aggregates that many gradients and
        # hands out that many tokens per step. Samples per update scale with it.
        with tf.device(global_step.device):
            self.group_size = state_variable("syncswitch/sync_group", [], tf.int32, init=num_workers)
            self._group_in = v1.placeholder(tf.int32, [], name="sync_group_in")
            self._set_group = self.group_size.assign(self._group_in)
            # Backup workers: gradients per update (0: the whole group); set at phase entry.
            self.aggregate = state_variable("syncswitch/sync_aggregate", [], tf.int32)
            self._aggregate_in = v1.placeholder(tf.int32, [], name="sync_aggregate_in")
            self._set_aggregate = self.aggregate.assign(self._aggregate_in)
            # Computed beside the variables: on the worker, every step would read both from the PS.
            group = self.group_size.read_value()
            # The group size each aggregation of the chief's queue runner read when it started (see enter_chief).
            self.pending_group = state_variable("syncswitch/sync_pending_group", [], tf.int32, init=num_workers)
            with tf.control_dependencies([self.pending_group.assign(group)]):
                group = tf.identity(group)
            wanted = self.aggregate.read_value()
            take = tf.where(wanted > 0, tf.minimum(wanted, group), group)
        return group, take

    def _build_step(self, queue, token, samples) -> None:
        """The one-call step: the push, then the wait between two timestamps taken on this worker (so the wait
        includes the token's trip), then the counter after the update, read on the counter's own device: the
        token is only handed out once the aggregated update (and its count) is applied."""
        with tf.device(samples.device):
            self.samples_now = tf.identity(samples.read_value(), name="bsp_samples_now")
        with tf.control_dependencies([self.push_op]):
            waited_from = tf.timestamp(name="bsp_wait_from")
        with tf.device(token.device), tf.control_dependencies([waited_from]):
            step_token = queue.dequeue(name="bsp_step_token")
        token_here = tf.identity(step_token, name="bsp_step_token_here")  # received once, used twice
        with tf.control_dependencies([token_here]):
            self.step_wait_s = tf.subtract(tf.timestamp(name="bsp_wait_until"), waited_from, name="bsp_wait_s")
        self.step_op = self._opt._local_step.assign(token_here)  # as the optimizer's own step does
        with tf.device(samples.device), tf.control_dependencies([step_token]):
            self.step_samples = tf.identity(samples.read_value(), name="bsp_step_samples")
        # The one-call step is this engine's training step: fetching train_op and samples_after together takes
        # one token, as every engine's pair does.
        self._finish(self.step_op, self.step_samples)

    def _build_control(self, queue, global_step, num_workers: int) -> None:
        """The ops the chief and the loop run outside steps: release, owed tokens, drain, warm-up tokens."""
        with tf.device(global_step.device):
            self._release_op = queue.enqueue_many(tf.fill([num_workers], global_step.read_value()))
            self._owed_count = v1.placeholder(tf.int32, [], name="bsp_owed_tokens")
            self._owed_op = queue.enqueue_many(tf.fill([self._owed_count], global_step.read_value()))
            self._global_step = global_step
            self._queue_size = queue.size()
            self._drain_count = v1.placeholder(tf.int32, [], name="bsp_drain_count")
            self._drain_op = queue.dequeue_many(self._drain_count)
        self._chief_init_op = self._opt.chief_init_op
        self._local_step_init_op = self._opt.local_step_init_op
        local_step = self._opt._local_step  # the step a pushed gradient is tagged with
        self._stale_local_step = local_step.assign(tf.constant(-1, tf.int64))
        with tf.device(global_step.device):
            self._own_token = queue.enqueue(global_step.read_value())

    def enter_chief(self, session, params: dict | None = None) -> None:
        aggregate = int((params or {}).get("aggregate") or 0)
        session.run(self._set_aggregate, {self._aggregate_in: aggregate if aggregate < self._num_workers else 0})
        # Leftover release tokens would let workers run ahead of the aggregation.
        size = session.run(self._queue_size)
        if size:
            session.run(self._drain_op, {self._drain_count: size})
        session.run(self._set_group, {self._group_in: self._num_workers})  # the full group again
        session.run(self._chief_init_op)  # accumulators accept gradients from the current step on
        if self._queue_runner_started:
            self._owe_tokens(session)
        # Gradients pushed without completing an update would stay in the accumulators (no variables: a
        # restore leaves them), but no discarding take_grad may run here: the chief queue runner's pending
        # take_grad heads each accumulator's FIFO of takes, so it would block behind it. None are left in
        # practice: a phase ends at a boundary that every worker reaches after its group's update applied.
        if not self._queue_runner_started:
            # Daemon threads: the process exits explicitly, so a blocked take_grad cannot hang shutdown.
            coord = tf.train.Coordinator()
            self._opt.get_chief_queue_runner().create_threads(session, coord=coord, daemon=True, start=True)
            self._queue_runner_started = True

    def _owe_tokens(self, session) -> None:
        """BSP entered again in place: the queue runner's pending aggregation read the group size when BSP was
        last left; after elastic shrank the group it hands out that many tokens for the full group's n workers,
        and one waits forever. The tokens it owes are enqueued once that aggregation has applied, carrying the
        new global step as its own do (before, a worker taking one would push a gradient for the step done)."""
        pending, step = session.run([self.pending_group, self._global_step])
        owed = self._num_workers - int(pending)
        if owed <= 0:
            return

        def hand_out():
            deadline = time.monotonic() + OWED_WAIT_S
            while time.monotonic() < deadline:
                try:
                    if session.run(self._global_step) > step:
                        session.run(self._owed_op, {self._owed_count: owed})
                        return
                except Exception:  # noqa: BLE001 - the session closed: the phase or the task ended first
                    return
                time.sleep(0.005)

        threading.Thread(target=hand_out, name="bsp-owed-tokens", daemon=True).start()

    def enter_worker(self, session, params: dict | None = None) -> None:
        session.run(self._local_step_init_op)

    def before_warm_up(self, session) -> None:
        # A gradient tagged with step -1 is older than any accumulator's step, so it is dropped;
        # the worker's own token lets its wait return at once.
        session.run([self._stale_local_step, self._own_token])

    def release(self, session) -> None:
        session.run(self._release_op)

    def set_group(self, session, size: int) -> None:
        """Aggregate `size` gradients per update from now on (elastic: the healthy workers)."""
        session.run(self._set_group, {self._group_in: int(size)})


def _find_op(start, op_type: str) -> tf.Operation:
    """The nearest upstream op of `op_type` (SyncReplicasOptimizer keeps its token dequeue private)."""
    seen, frontier = set(), [start if isinstance(start, tf.Operation) else start.op]
    while frontier:
        op = frontier.pop(0)
        if op.type == op_type:
            return op
        for parent in [t.op for t in op.inputs] + list(op.control_inputs):
            if parent.name not in seen:
                seen.add(parent.name)
                frontier.append(parent)
    raise ValueError(f"no {op_type} op upstream of {start.name}")
