"""Local SGD: each worker steps on its own copy of the model; the copies are averaged every `period` steps.

After BSP this is post-local SGD (Lin et al., "Don't use large mini-batches, use local SGD", ICLR 2020):
the Sync-Switch schedule with a second phase that stays synchronous in the one way that matters for
accuracy (every worker's work is averaged into one model, none is applied stale) but talks to the parameter
servers once per `period` steps instead of every step. Each copy steps at BSP's rate (n x eta, the
configuration policy scales it as BSP's) with its own momentum; averaging every step would be exactly BSP,
because the momentum update is linear.

An average is each worker adding (copy - anchor) / n to the shared variables, its momentum likewise to
the shared momentum slots, then waiting until all n have added theirs this round and reading the result
back as its new copy and anchor. The shared model is the average of the copies after every round, so
checkpoints, the evaluator, the guard and a switch out of the phase all see it as they see any model.
"""

from __future__ import annotations

import time

import tensorflow as tf

from . import fused
from .base import ProtocolEngine, dense, localize, worker_variable
from .clipping import clipped

v1 = tf.compat.v1
RELEASE_ROUNDS = 64  # averages a released worker may still take alone before it reaches its boundary


class LocalSGDEngine(ProtocolEngine):
    """Worker-local steps on the replica (syncswitch/node/replica.py), averaged through the parameter servers.

    An average is one call: push, barrier, pull (see the queues below); the chief's release frees a worker
    whose peers stopped at a boundary.
    """

    name = "local-sgd"
    needs_replica = True

    def __init__(self, optimizer, grads_and_vars, global_step, samples, per_worker_batch: int, num_workers: int,
                 task_index: int, is_chief: bool = False, replica=None, rates=None, clip_norm=None, **_):
        if replica is None or rates is None:
            raise ValueError("local-sgd needs the worker's model replica and the shared rate tensors")
        n = num_workers
        self.loss = replica.loss
        self.period = 2
        self._n = n
        # Built, never run: it makes the shared momentum slots when no other protocol of the schedule did, so
        # the averaged momentum is checkpointed and continues across a switch either way.
        optimizer.apply_gradients(grads_and_vars, name="local_sgd_slots")
        device = replica.device
        pairs, anchors = self._build_local_step(optimizer, replica, per_worker_batch * n, clip_norm)
        own = self._build_barrier(global_step, n, task_index)
        groups = fused.by_server([(shared, copy, anchor) for (shared, copy), anchor in zip(pairs, anchors)],
                                 self.name)
        adds = self._push_adds(groups, device, global_step, samples, per_worker_batch, is_chief)
        with tf.control_dependencies(adds), tf.device(global_step.device):
            arrived = [q.enqueue(tf.constant(0, tf.int64)) for q in self._queues]
        with tf.control_dependencies(arrived), tf.device(global_step.device):
            everyone = own.dequeue_many(n)
        learning_rate, momentum = rates
        with tf.control_dependencies([everyone]):
            pulled = self._pull(groups, device, samples, learning_rate, momentum)
        with tf.device(device), tf.control_dependencies(pulled[1]):
            self._sync = tf.identity(pulled[0], name="local_sgd_synced_samples")
        # Entering the phase: the shared model as the copy and anchor, nothing pushed.
        self._enter = tf.group(*self._pull(groups, device, samples, learning_rate, momentum)[1], name="local_sgd_enter")
        self._sync_fn = None
        self._rounds = 0
        self._steps = 0
        self._waited = 0.0

    def _build_local_step(self, optimizer, replica, samples_per_step: int, clip_norm=None):
        """The local step on the copy (this engine's train op); returns the (shared, local) pairs averaged each
        round and their anchors (the copy as last read)."""
        with tf.device(replica.device), v1.variable_scope("syncswitch_local_sgd"):
            # The rate and momentum are read at each average, not each step: a local step reads nothing remote.
            self._lr = worker_variable("learning_rate", (), tf.float32)
            self._momentum = worker_variable("momentum", (), tf.float32)
            self._estimate = worker_variable("samples", (), tf.int64)  # the global count, extrapolated between averages
            self._unsynced = worker_variable("unsynced_steps", (), tf.int64)
            local_opt = v1.train.MomentumOptimizer(self._lr, self._momentum, name="local_sgd_momentum")
            made = local_opt.compute_gradients(self.loss, var_list=replica.trainable)
            grads = clipped([(dense(g), v) for g, v in made if g is not None], clip_norm)  # each local step's own
            before = {v.ref() for v in v1.global_variables()}
            step = local_opt.apply_gradients(grads)
            slots = [v for v in v1.global_variables() if v.ref() not in before]
            with tf.control_dependencies([step]):
                # Lockstep: every worker takes a step of per_worker_batch examples per step of this one.
                self._estimate_after = self._estimate.assign_add(samples_per_step)
                counted = self._unsynced.assign_add(1)
            # (shared, local) pairs averaged each round: the model's variables, then the momentum of each
            # trained one (the shared slot against the local optimizer's).
            pairs = list(replica.pairs)
            trained = {v.ref() for v in replica.trainable}
            for shared, copy in replica.pairs:
                mine, ours = local_opt.get_slot(copy, "momentum"), optimizer.get_slot(shared, "momentum")
                if copy.ref() in trained and mine is not None and ours is not None:
                    pairs.append((ours, mine))
            anchors = [worker_variable(f"anchor_{k}", copy.shape, copy.dtype.base_dtype)
                       for k, (_, copy) in enumerate(pairs)]
        localize(v1.get_default_graph(), slots)  # each worker's own momentum: out of checkpoints and readiness
        self._finish(tf.group(step, self._estimate_after, counted, name="local_sgd_step"), self._estimate_after)
        return pairs, anchors

    def _build_barrier(self, global_step, n: int, task_index: int):
        """The barrier: one token queue per worker beside the global step (returns this worker's). Each average
        puts a token into every queue and takes n from its own, so a worker goes on once all n put theirs (a
        worker can be at most one round ahead of another). No coordinator thread: a replacement node needs
        nothing from the chief."""
        with tf.device(global_step.device):
            self._queues = [tf.queue.FIFOQueue(-1, tf.int64, shapes=[[]], name=f"local_sgd_tokens_{j}",
                                               shared_name=f"syncswitch_local_sgd_tokens_{j}") for j in range(n)]
            own = self._queues[task_index]
            self._sizes = [q.size() for q in self._queues]
            self._drain_count = v1.placeholder(tf.int32, [], name="local_sgd_drain_count")
            self._drains = [q.dequeue_many(self._drain_count) for q in self._queues]
            # Released workers (peers stopped at a boundary) must not wait again this phase: many rounds' worth.
            self._release = tf.group(*[q.enqueue_many(tf.zeros([n * RELEASE_ROUNDS], tf.int64)) for q in self._queues])
            self._own_tokens = own.enqueue_many(tf.zeros([n], tf.int64))
        return own

    def _push_adds(self, groups, device, global_step, samples, per_worker_batch: int, is_chief: bool) -> list:
        """Push: this worker's move since its last read, as one n-th of the average, and the samples it trained."""
        n = self._n

        def move(item):
            delta, dtype = item[1].read_value() - item[2].read_value(), item[0].dtype.base_dtype
            # A model's integer variable (a counter its update ops advance) gains every worker's change, as it
            # does on the parameter servers under every other protocol; dividing it failed the graph stage.
            return delta / tf.cast(n, dtype) if dtype.is_floating else delta

        adds = fused.push_add(groups, device, move)
        with tf.device(device):
            trained_samples = self._unsynced.read_value() * per_worker_batch
        with v1.colocate_with(samples):
            adds.append(samples.assign_add(trained_samples, read_value=False))
        if is_chief:
            # The global step counts the group's steps, as under BSP (one per round of n local steps): checkpoints
            # are named by it, so a phase that left it still would save every checkpoint over the last one.
            with tf.device(device):
                steps = self._unsynced.read_value()
            with v1.colocate_with(global_step):
                adds.append(global_step.assign_add(steps, read_value=False))
        return adds

    def _pull(self, groups, device, samples, learning_rate, momentum):
        """(the global sample count read, the assignments): the shared model and momentum as the new copy and
        anchor, with the rate and momentum the schedule gives now. One transfer per parameter server and dtype."""
        assigns = fused.pull(groups, device)
        with v1.colocate_with(samples):
            counted = samples.read_value()
        with tf.device(device):
            now = tf.identity(counted)
            assigns += [self._lr.assign(learning_rate, read_value=False),
                        self._momentum.assign(momentum, read_value=False),
                        self._estimate.assign(now, read_value=False), self._unsynced.assign(0, read_value=False)]
        return now, assigns

    def _synced(self, session) -> int:
        if self._sync_fn is None:
            self._sync_fn = session.make_callable(self._sync)
        return int(self._sync_fn())

    def enter_chief(self, session, params: dict | None = None) -> None:
        # Every worker is paused: tokens left by a release or a warm-up would let a worker skip a round.
        for size, drain in zip(session.run(self._sizes), self._drains):
            if size:
                session.run(drain, {self._drain_count: int(size)})

    def enter_worker(self, session, params: dict | None = None) -> None:
        self.period = int((params or {}).get("period", self.period))
        self._rounds = 0
        self._steps = 0
        self._waited = 0.0
        session.run(self._enter)

    def before_warm_up(self, session) -> None:
        # Pays the first call of the average (graph registration) before training: n tokens of its own let it
        # through alone. It moves the shared model and its count, as ASP's warm-up step does: the chief resets
        # both before training, and drains the tokens it left at the phase's entry.
        session.run(self._own_tokens)
        self._synced(session)

    def release(self, session) -> None:
        session.run(self._release)

    def after_step(self, session, state) -> float:
        """Average once `period` steps were taken since the last average, or at the phase's boundary."""
        self._steps += 1
        if self._steps < self.period and not state.at_boundary():
            return 0.0
        t0 = time.perf_counter()
        state.samples = self._synced(session)
        self._steps = 0
        self._rounds += 1
        waited = time.perf_counter() - t0
        self._waited += waited
        return waited

    def stats(self, session) -> dict:
        return {"averages": self._rounds, "period": self.period, "average_s": round(self._waited, 3)}
