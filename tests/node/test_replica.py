"""The worker-local replica of the user's model (local SGD): a copy of the model's ops reading worker-local
variables, every variable paired, none checkpointed; for any way a script builds its model."""

from __future__ import annotations

import os
import pathlib

import numpy as np
import pytest

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
tf = pytest.importorskip("tensorflow")
v1 = tf.compat.v1

from syncswitch.node import replica as replicamod  # noqa: E402
from syncswitch.node import script as scriptmod  # noqa: E402
from syncswitch.node.updates import ancestors, orphan_updates  # noqa: E402

# Three ways scripts build models: inside model_fn, cached per graph (examples/resnet_synthetic.py), and once at
# module level (a Keras Sequential defined beside the functions). The last two make no new variables when called
# again, which is why the replica copies the graph instead of calling model_fn twice.
SCRIPT = '''
import tensorflow as tf

STYLE = "{style}"
_MODULE_MODEL = tf.keras.Sequential([tf.keras.layers.Dense(8, activation="relu"), tf.keras.layers.BatchNormalization(),
                                     tf.keras.layers.Dense(3)])

def input_fn(split, batch_size, params):
    raise NotImplementedError

def _fresh():
    return tf.keras.Sequential([tf.keras.layers.Dense(8, activation="relu"), tf.keras.layers.BatchNormalization(),
                                tf.keras.layers.Dense(3)])

_CACHE = {{}}

def model_fn(features, labels, params, training):
    if STYLE == "inside":
        model = _fresh()
    elif STYLE == "cached":
        model = _CACHE.setdefault(tf.compat.v1.get_default_graph(), _fresh())
    else:
        model = _MODULE_MODEL
    logits = model(features, training=training)
    loss = tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    return {{"loss": tf.reduce_mean(loss), "logits": logits}}
'''
FEATURES = np.random.RandomState(0).normal(size=(16, 5)).astype(np.float32)
LABELS = np.arange(16, dtype=np.int64) % 3


def _build(tmp_path, style):
    path = tmp_path / f"model_{style}.py"
    path.write_text(SCRIPT.format(style=style))
    module = scriptmod.load_script(str(path))
    graph = tf.Graph()
    with graph.as_default():
        features, labels = tf.constant(FEATURES), tf.constant(LABELS)
        before = set(graph.get_operations())
        variables_before = {v.ref() for v in v1.global_variables()}
        out = scriptmod.call_model_fn(module, str(path), features, labels, {}, True)
        made = [op for op in graph.get_operations() if op not in before]
        shared = [v for v in v1.global_variables() if v.ref() not in variables_before]
        updates = orphan_updates(graph, made, [out["loss"], out["logits"]]) + [
            u for u in v1.get_collection(v1.GraphKeys.UPDATE_OPS) if getattr(u, "op", u) in set(made)]
        trainable = list(v1.trainable_variables())
        replica = replicamod.build(graph, made, out["loss"], updates, "", str(path))
    return graph, out["loss"], shared, trainable, updates, replica


@pytest.mark.parametrize("style", ["inside", "cached", "module"])
def test_the_replica_copies_the_model_onto_local_variables(tmp_path, style):
    graph, loss, shared, trainable, updates, replica = _build(tmp_path, style)
    with graph.as_default():
        assert {s.ref() for s, _ in replica.pairs} == {v.ref() for v in shared}
        copies = [c for _, c in replica.pairs]
        refs = {c.ref() for c in copies}
        # Out of the global and trainable collections (no checkpoint, no chief initialization, no gradient of the
        # shared loss); in the local one, which every worker initializes for itself.
        assert not refs & {v.ref() for v in v1.global_variables()}
        assert v1.trainable_variables() == trainable
        assert refs <= {v.ref() for v in v1.local_variables()}
        # BatchNormalization's moving statistics are paired (averaged) but not trained.
        assert len(replica.trainable) == len(trainable) < len(copies)
        # The replica's step reads no shared variable.
        shared_handles = {v.handle.op for v in shared}
        assert not ancestors([replica.loss]) & shared_handles
        # Same values, same batch: the same loss.
        with v1.Session(graph=graph) as session:
            session.run([v1.global_variables_initializer(), v1.local_variables_initializer()])
            session.run([c.assign(s) for s, c in replica.pairs])
            before = session.run(shared)
            ours, theirs = session.run([loss, replica.loss])
            assert ours == pytest.approx(theirs, rel=1e-6)
            # Training the replica moves the copies only; its update ops move the copies' moving statistics.
            step = v1.train.GradientDescentOptimizer(0.5).minimize(replica.loss, var_list=replica.trainable)
            session.run(step)
            for s, value in zip(shared, session.run(shared)):
                np.testing.assert_array_equal(value, before[shared.index(s)])
            moved = [not np.array_equal(a, b) for a, b in zip(session.run([c for _, c in replica.pairs]),
                                                              session.run([s for s, _ in replica.pairs]))]
            assert all(moved)


# A model_fn that calls graph functions: a tf.function given a variable, one that closes over a Keras layer, a
# tf.cond and a loop. The graph makes the shared model's gradients before it copies such a model (graph.py).
FUNCTIONS_SCRIPT = '''
import tensorflow as tf

def input_fn(split, batch_size, params):
    raise NotImplementedError

@tf.function
def block(h, w):
    return tf.nn.relu(tf.matmul(h, w))

def model_fn(features, labels, params, training):
    w = tf.compat.v1.get_variable("w", [5, 6], initializer=tf.compat.v1.glorot_uniform_initializer(seed=1))
    layer = tf.keras.layers.Dense(6, activation="tanh")
    closed = tf.function(lambda h: layer(h))
    h = block(features, w) + closed(features)
    h = tf.cond(tf.reduce_mean(h) > 0.0, lambda: h * 2.0, lambda: h)
    _, h = tf.while_loop(lambda t, a: t < 3, lambda t, a: (t + 1, tf.tanh(a) + h), (tf.constant(0), h))
    logits = tf.keras.layers.Dense(3)(h)
    loss = tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    return {"loss": tf.reduce_mean(loss), "logits": logits}
'''


def test_a_model_calling_graph_functions_has_the_same_gradients_on_its_replica(tmp_path):
    """A tf.function call's gradient lives on its op's Python object, which the copy lacked: differentiating the
    replica failed inside TensorFlow ('AtomicFunction' object has no attribute 'python_grad_func'). The copy's
    gradients now equal the shared model's at the same values, and read no shared variable."""
    path = tmp_path / "functions.py"
    path.write_text(FUNCTIONS_SCRIPT)
    module = scriptmod.load_script(str(path))
    graph = tf.Graph()
    with graph.as_default():
        features, labels = tf.constant(FEATURES), tf.constant(LABELS)
        before = set(graph.get_operations())
        out = scriptmod.call_model_fn(module, str(path), features, labels, {}, True)
        made = [op for op in graph.get_operations() if op not in before]
        trainable = list(v1.trainable_variables())
        shared_grads = tf.gradients(out["loss"], trainable)
        replica = replicamod.build(graph, made, out["loss"], [], "", str(path))
        copies = dict((s.ref(), c) for s, c in replica.pairs)
        replica_grads = tf.gradients(replica.loss, [copies[v.ref()] for v in trainable])
        assert None not in replica_grads and None not in shared_grads
        assert not ancestors(replica_grads) & {v.handle.op for v in trainable}
        with v1.Session(graph=graph) as session:
            session.run([v1.global_variables_initializer(), v1.local_variables_initializer()])
            session.run([c.assign(s) for s, c in replica.pairs])
            for ours, theirs in zip(*session.run([shared_grads, replica_grads])):
                np.testing.assert_allclose(theirs, ours, rtol=1e-5, atol=1e-6)


COUNTER_SCRIPT = pathlib.Path(__file__).with_name("counter_script.py")


def test_the_replica_copies_a_models_counter_and_reads_the_shared_global_step():
    """A copy of the global step would stand still through a replica phase, and publish would write it back over
    the steps the group counted: the replica reads the shared one. The model's own counter is copied (paired)."""
    module = scriptmod.load_script(str(COUNTER_SCRIPT))
    graph = tf.Graph()
    with graph.as_default():
        global_step = v1.train.get_or_create_global_step()
        features, labels = tf.constant(FEATURES[:, :4]), tf.constant(LABELS % 2)
        before = set(graph.get_operations())
        out = scriptmod.call_model_fn(module, str(COUNTER_SCRIPT), features, labels, {}, True)
        made = [op for op in graph.get_operations() if op not in before]
        replica = replicamod.build(graph, made, out["loss"], [], "", str(COUNTER_SCRIPT))
        paired = sorted(s.op.name for s, _ in replica.pairs)
        assert "global_step" not in paired and "batches_seen" in paired, paired
        assert global_step.handle.op in ancestors([replica.loss])
        with v1.Session(graph=graph) as session:
            session.run([v1.global_variables_initializer(), v1.local_variables_initializer()])
            session.run(global_step.assign(7))
            counter = dict((s.op.name, c) for s, c in replica.pairs)["batches_seen"]
            for _ in range(3):
                session.run(replica.loss)
            assert session.run([counter, global_step]) == [3, 7]
