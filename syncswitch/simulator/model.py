"""The user's model in one process: a gradient at any flat parameter vector, and the test-set evaluation.

The model is built once (model_fn on Keras inputs); its trainable variables are scratch space: each gradient
assigns the snapshot a worker read, so the shared parameters and every worker's read live in numpy.
"""

from __future__ import annotations

import contextlib
import os
import random

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

from syncswitch.cluster_manager.launch import INTRA_THREADS
from syncswitch.node import script as scriptmod
from syncswitch.simulator.ring import buffer_order, slot_order


def match_node_threads() -> bool:
    """Run this process's kernels on the nodes' one intra-op thread; False where it is too late to.

    A kernel split over more threads may sum in another order: on an AVX-512 host the simulated BSP run left 17% of
    the quickstart's parameters 1 ulp off the real run's after 32 updates at the default pool (2 threads on 2
    cores), and equal bit for bit at one thread. TensorFlow fixes its pool when its context starts: where ops ran
    first in this process, the pool stays as started (TF_NUM_INTRAOP_THREADS=1 in the environment before the
    start gives the nodes' count too; the tests' conftest sets it)."""
    try:
        tf.config.threading.set_intra_op_parallelism_threads(INTRA_THREADS)
        return True
    except RuntimeError:  # the context has started
        return (tf.config.threading.get_intra_op_parallelism_threads() == INTRA_THREADS
                or os.environ.get("TF_NUM_INTRAOP_THREADS") == str(INTRA_THREADS))


class GradientModel:
    """One Keras model around the script's model_fn; parameters as one float32 vector."""

    def __init__(self, job, seed: int):
        self.node_threads = match_node_threads()  # False: the engines' arithmetic, not necessarily their bits
        tf.keras.backend.clear_session()
        # As a worker seeds its graph: the same seed draws the same initial weights and the same data order.
        scriptmod.seed_random_state(seed)
        self.job, self.params = job, dict(job.params)
        self.module = scriptmod.load_script(job.script)
        train = scriptmod.call_input_fn(self.module, job.script, "train", job.hyperparameters.batch_size,
                                        self.params)
        x_spec, y_spec = train.element_spec
        features = tf.keras.Input(x_spec.shape[1:], dtype=x_spec.dtype)
        labels = tf.keras.Input(y_spec.shape[1:], dtype=y_spec.dtype)
        out = scriptmod.call_model_fn(self.module, job.script, features, labels, self.params, True)
        self.model = tf.keras.Model([features, labels], [out["logits"], out["loss"]])
        self.weights = self.model.trainable_variables
        # What the model updates but does not train (batch normalization's moving averages): each gradient call's
        # update ops move it, as a worker's step runs them (ModelState keeps whose it is).
        self.state_variables = self.model.non_trainable_variables
        self.scorer, self._score_pairs = self._scoring_model(features, labels) if self.state_variables else \
            (self.model, [])
        self.shapes = [tuple(w.shape) for w in self.weights]
        self.sizes = [int(np.prod(s)) for s in self.shapes]
        # Where each element sits in an all-reduce engine's buffer (its variables sorted by name: ring.py).
        names = [w.name.split(":")[0] for w in self.weights]
        self.buffer_order = buffer_order(names, self.sizes)
        self.slot_order = slot_order(names, self.sizes)  # local SGD's average of the momenta
        self._test = None
        self._compile()

    def _compile(self) -> None:
        """The model's graphs: assign a parameter vector, one worker's gradient, a round's gradients, the score."""
        weights, sizes, shapes, model = self.weights, self.sizes, self.shapes, self.model

        def assign(flat):
            for w, piece, shape in zip(weights, tf.split(flat, sizes), shapes):
                w.assign(tf.reshape(piece, shape))

        @tf.function(reduce_retracing=True)
        def gradient(flat, x, y):
            assign(flat)
            with tf.GradientTape() as tape:
                loss = model([x, y], training=True)[1]
            grads = tape.gradient(loss, weights)
            return tf.concat([tf.reshape(g, [-1]) for g in grads], 0), loss

        scorer = self.scorer

        @tf.function(reduce_retracing=True)
        def score(x, y):
            logits, loss = scorer([x, y], training=False)
            if logits.shape.rank == 1 or logits.shape[-1] == 1:
                predicted = tf.cast(tf.reshape(logits, [-1]) > 0, y.dtype)
            else:
                predicted = tf.cast(tf.argmax(logits, -1), y.dtype)
            hits = tf.reduce_sum(tf.cast(tf.equal(predicted, tf.reshape(y, tf.shape(predicted))), tf.float64))
            return hits, loss

        @tf.function
        def gradients(flat, xs, ys):
            # One worker's gradient after another in one graph: the ops of `gradient`, once per worker, so each
            # result has its bits; one call instead of N (a round's workers all read the same parameters).
            assign(flat)
            out, losses = [], []
            for c in range(xs.shape[0]):
                with tf.GradientTape() as tape:
                    loss = model([xs[c], ys[c]], training=True)[1]
                grads = tape.gradient(loss, weights)
                out.append(tf.concat([tf.reshape(g, [-1]) for g in grads], 0))
                losses.append(loss)
            return tf.stack(out), tf.stack(losses)

        self._assign, self._gradient, self._score, self._gradients = tf.function(assign), gradient, score, gradients
        # The concrete function the polymorphic one dispatches to, per batch signature: its dispatch (matching the
        # arguments against its traces) cost a third of a small batch's gradient call, and a run at 32-64 workers
        # makes 20000-40000 of them. The same graphs, so the same bits.
        self._concrete: dict[tuple, object] = {}

    def initial(self) -> np.ndarray:
        """The freshly initialized parameters (seeded) as one vector."""
        return np.concatenate([w.numpy().reshape(-1) for w in self.weights]).astype(np.float32)

    def _scoring_model(self, features, labels):
        """(the model as the evaluator builds it, the variable pairs to copy before a score). model_fn bakes its
        training flag into the layers it calls, and one built for training scores with each test batch's
        statistics where the evaluator's (training=False) reads batch normalization's moving averages. A script that
        reuses its model shares the variables; one that builds anew gets copies, given the trained values before
        each score. Built with the random state given back, so the weights and data order stay the run's."""
        with random_state_kept():
            out = scriptmod.call_model_fn(self.module, self.job.script, features, labels, self.params, False)
        scorer = tf.keras.Model([features, labels], [out["logits"], out["loss"]])
        theirs, ours = scorer.variables, self.model.variables
        if len(theirs) != len(ours) or any(a.shape != b.shape for a, b in zip(theirs, ours)):
            return self.model, []  # no pairing: scored as trained, as before
        return scorer, [(a, b) for a, b in zip(theirs, ours) if a is not b]

    def state(self) -> tuple:
        """The untrained variables' values now (copies: a variable's numpy() may share the buffer its next update
        writes)."""
        return tuple(np.array(v.numpy(), copy=True) for v in self.state_variables)

    def set_state(self, values: tuple) -> None:
        for variable, value in zip(self.state_variables, values):
            variable.assign(value)

    def gradient(self, flat: np.ndarray, batch) -> tuple[np.ndarray, float]:
        """(gradient, loss) of the batch's loss at the parameters `flat`."""
        g, loss = self._call(self._gradient, tf.constant(flat), *batch)
        return g.numpy(), float(loss)

    def gradients(self, flat: np.ndarray, batches: list) -> list[tuple[np.ndarray, float]]:
        """[(gradient, loss)] of each batch's loss at the same parameters `flat`: what `gradient` gives for each, bit
        for bit, in one call (batches of unequal shapes: one call each)."""
        if len(batches) < 2 or len({(tuple(x.shape), tuple(y.shape)) for x, y in batches}) > 1:
            return [self.gradient(flat, batch) for batch in batches]
        xs, ys = tf.stack([x for x, _ in batches]), tf.stack([y for _, y in batches])
        g, losses = self._call(self._gradients, tf.constant(flat), xs, ys)
        g, losses = g.numpy(), losses.numpy()
        return [(g[c], float(losses[c])) for c in range(len(batches))]

    def _call(self, function, flat, x, y):
        """`function(flat, x, y)` through its concrete function for these shapes and dtypes, traced once."""
        key = (function, tuple(x.shape), x.dtype, tuple(y.shape), y.dtype)
        if key not in self._concrete:
            self._concrete[key] = function.get_concrete_function(flat, x, y)
        return self._concrete[key](flat, x, y)

    def evaluate(self, flat: np.ndarray) -> tuple[float, float]:
        """(accuracy, mean loss) on the job's test split at the parameters `flat` (and the untrained state now)."""
        self._assign(tf.constant(flat))
        for mine, trained in self._score_pairs:
            mine.assign(trained)
        if self._test is None:
            ds = scriptmod.call_input_fn(self.module, self.job.script, "test", self.job.evaluation.batch_size,
                                         self.params)
            if scriptmod.num_examples(self.module, self.job.script, "test", self.params) is not None:
                ds = scriptmod.finite_test_set(ds, self.module, self.job.script, self.params,
                                               self.job.evaluation.batch_size)
            self._test = [(x, y) for x, y in ds]
        hits = total = 0
        loss_sum = 0.0
        for x, y in self._test:
            h, loss = self._score(x, y)
            n = int(y.shape[0])
            hits, total, loss_sum = hits + float(h), total + n, loss_sum + float(loss) * n
        return hits / max(total, 1), loss_sum / max(total, 1)

    def train_examples(self) -> int | None:
        return scriptmod.num_train_examples(self.module, self.job.script, self.params)


@contextlib.contextmanager
def random_state_kept():
    """Within: what is drawn from Python's, numpy's, Keras' seed generator's and TensorFlow's op-seed sequence is given
    back after, so building a layer more leaves the weights and draws a run makes after it as they were (a stateful
    TensorFlow op's kernel keeps its own position: a script that draws from one in model_fn is not covered)."""
    from tensorflow.python.eager import context
    from tf_keras.src import backend as keras_backend

    # Keras' and TensorFlow's generators are private: where a release renames them, they are left as they are.
    keras_seeds = getattr(getattr(keras_backend, "_SEED_GENERATOR", None), "generator", None)
    generators = [random, keras_seeds, getattr(context.context(), "_rng", None)]
    saved = [g.getstate() if g is not None else None for g in generators]
    numpy_state = np.random.get_state()
    try:
        yield
    finally:
        for g, state in zip(generators, saved):
            if g is not None:
                g.setstate(state)
        np.random.set_state(numpy_state)


def serial_options() -> tf.data.Options:
    """The stream read on the calling thread: no prefetch tf.data would inject (its background thread is where a
    long simulator process was seen to hang, in glibc's free() under load), no autotuning, a one-thread pool.
    The elements and their order are the same; the simulator reads one batch per gradient anyway."""
    options = tf.data.Options()
    options.autotune.enabled = False
    options.experimental_optimization.inject_prefetch = False
    options.threading.private_threadpool_size = 1
    return options


class Shards:
    """Each worker's training batches as the real input pipeline gives them: `ds.shard(n, i).repeat()` of the
    script's dataset. One pass over the stream hands batch k to worker k mod n (what shard does), so the
    dataset is read once whatever n is; batches a fast worker has not reached wait in its queue."""

    def __init__(self, model: GradientModel, workers: int, batch_size: int):
        ds = scriptmod.call_input_fn(model.module, model.job.script, "train", batch_size, model.params)
        self._stream = iter(ds.with_options(serial_options()).repeat())
        self._queues: list[list] = [[] for _ in range(workers)]
        self._next = 0  # the worker the stream's next batch belongs to
        self.workers = workers

    def next(self, worker: int):
        queue = self._queues[worker]
        while not queue:
            self._queues[self._next].append(next(self._stream))
            self._next = (self._next + 1) % self.workers
        return queue.pop(0)
