"""Update ops a model_fn leaves outside UPDATE_OPS (Keras' BatchNormalization) are found and run with every step."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
tf = pytest.importorskip("tensorflow")
v1 = tf.compat.v1

from syncswitch.node.updates import orphan_updates  # noqa: E402


def _model(kind: str):
    """A graph with one model_fn-like call; (graph, ops it made, loss, logits)."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.constant(np.random.RandomState(0).normal(3.0, 2.0, (16, 4)).astype(np.float32))
        before = set(graph.get_operations())
        if kind == "keras":
            h = tf.keras.layers.BatchNormalization(momentum=0.5)(x, training=True)
        elif kind == "collected":  # the shipped examples' way: updates in UPDATE_OPS
            mean = v1.get_variable("mean", [4], initializer=v1.zeros_initializer(), trainable=False)
            update = mean.assign_sub(0.5 * (mean - tf.reduce_mean(x, 0)))
            v1.add_to_collection(v1.GraphKeys.UPDATE_OPS, update)
            h = x - mean
        else:  # "used": the loss itself runs the assignment
            count = v1.get_variable("count", [], initializer=v1.zeros_initializer(), trainable=False)
            with tf.control_dependencies([count.assign_add(1.0)]):
                h = tf.identity(x)
        w = v1.get_variable("w", [4, 2])
        logits = tf.matmul(h, w)
        loss = tf.reduce_mean(logits ** 2)
        made = [op for op in graph.get_operations() if op not in before]
    return graph, made, loss, logits


def test_keras_batch_norm_moving_statistics_are_found_and_move():
    graph, made, loss, logits = _model("keras")
    with graph.as_default():
        extra = orphan_updates(graph, made, [loss, logits, *v1.get_collection(v1.GraphKeys.UPDATE_OPS)])
        assert sorted(op.type for op in extra) == ["AssignSubVariableOp", "AssignSubVariableOp"]
        with tf.control_dependencies(extra):
            step = tf.identity(loss)
        (moving_mean,) = [v for v in v1.global_variables() if v.op.name.endswith("moving_mean")]
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            assert not session.run(moving_mean).any()
            session.run(step)
            # momentum 0.5: half-way to the batch mean (about 3) after one step
            assert np.all(session.run(moving_mean) > 1.0)


@pytest.mark.parametrize("kind", ["collected", "used"])
def test_updates_that_already_run_are_left_alone(kind):
    graph, made, loss, logits = _model(kind)
    with graph.as_default():
        assert orphan_updates(graph, made, [loss, logits, *v1.get_collection(v1.GraphKeys.UPDATE_OPS)]) == []


def test_initializers_and_trainable_variables_are_never_taken():
    graph, made, loss, logits = _model("keras")
    with graph.as_default():
        w = [v for v in v1.trainable_variables() if v.op.name == "w"][0]
        stray = w.assign(tf.zeros([4, 2]))  # an assignment to a trainable variable nothing runs
        extra = orphan_updates(graph, made + [stray.op], [loss, logits])
        initializers = {v.initializer for v in v1.global_variables()}
        assert extra and not set(extra) & initializers and stray.op not in extra


PLACEHOLDER_DRIVER = """
import os
os.environ["TF_USE_LEGACY_KERAS"] = "1"
import tensorflow as tf
from syncswitch.node.updates import orphan_updates
v1 = tf.compat.v1
v1.disable_eager_execution()  # as in a training task: Keras' own inputs are placeholders then
graph = tf.Graph()
with graph.as_default():
    features = tf.ones([4, 8, 8, 1])
    before = set(graph.get_operations())
    model = tf.keras.Sequential([tf.keras.layers.Conv2D(4, 3, padding="same", input_shape=(8, 8, 1)),
                                 tf.keras.layers.BatchNormalization(), tf.keras.layers.ReLU(),
                                 tf.keras.layers.Flatten(), tf.keras.layers.Dense(10)])
    out = model(features, training=True)
    made = [op for op in graph.get_operations() if op not in before]
    assert any(op.type == "Placeholder" for op in made)  # the model's own input
    extra = orphan_updates(graph, made, [out])
    with v1.Session(graph=graph) as session:
        session.run(v1.global_variables_initializer())
        session.run(extra)  # no feed needed
    print("updates", len(extra))
"""


def test_updates_built_on_a_model_s_own_placeholder_are_left_out():
    # A Sequential given input_shape also builds its layers on a placeholder of its own ("conv2d_input"); the
    # BatchNormalization updates made there need a feed no training step gives, and running them failed the step
    # ("You must feed a value for placeholder tensor"). The two made on the features remain.
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", PLACEHOLDER_DRIVER], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "updates 2"


def test_a_while_loop_in_the_model_does_not_hang_the_search():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.ones([2, 3])
        before = set(graph.get_operations())
        total = v1.get_variable("total", [], trainable=False, initializer=v1.zeros_initializer())
        _, y = tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * 2.0), [tf.constant(0), x])
        update = total.assign_add(tf.reduce_sum(y))
        made = [op for op in graph.get_operations() if op not in before]
        assert orphan_updates(graph, made, [y]) == [update.op]
