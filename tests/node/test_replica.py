"""The worker-local replica of the user's model (local SGD): every variable paired, none checkpointed."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
tf = pytest.importorskip("tensorflow")
v1 = tf.compat.v1

from syncswitch.errors import ScriptError  # noqa: E402
from syncswitch.node import replica as replicamod  # noqa: E402
from syncswitch.node import script as scriptmod  # noqa: E402

SCRIPT = '''
import tensorflow as tf

CALLS = []

def input_fn(split, batch_size, params):
    raise NotImplementedError

def model_fn(features, labels, params, training):
    CALLS.append(1)
    hidden = tf.keras.layers.Dense(8, activation="relu")(features)
    hidden = tf.keras.layers.BatchNormalization()(hidden, training=training)
    if params.get("grow") and len(CALLS) > 1:
        hidden = tf.keras.layers.Dense(8)(hidden)  # a second call builds a different model
    logits = tf.keras.layers.Dense(3)(hidden)
    loss = tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    return {"loss": tf.reduce_mean(loss), "logits": logits}
'''


def _build(tmp_path, params):
    path = tmp_path / "model.py"
    path.write_text(SCRIPT)
    module = scriptmod.load_script(str(path))
    graph = tf.Graph()
    with graph.as_default():
        features, labels = tf.zeros([4, 5]), tf.zeros([4], tf.int64)
        before = {v.ref() for v in v1.global_variables()}
        scriptmod.call_model_fn(module, str(path), features, labels, params, True)
        shared = [v for v in v1.global_variables() if v.ref() not in before]
        trainable_before = list(v1.trainable_variables())
        updates_before = list(v1.get_collection(v1.GraphKeys.UPDATE_OPS))
        replica = replicamod.build(graph, module, str(path), features, labels, params, shared, "")
        return graph, shared, trainable_before, updates_before, replica


def test_every_variable_is_paired_and_the_copies_are_the_workers_own(tmp_path):
    graph, shared, trainable, updates, replica = _build(tmp_path, {})
    with graph.as_default():
        assert [s for s, _ in replica.pairs] == shared
        copies = [c for _, c in replica.pairs]
        assert [c.shape for c in copies] == [s.shape for s in shared]
        # Out of the global and trainable collections: no checkpoint, no chief initialization, no gradient of
        # the shared model's loss; in the local one, which every worker initializes for itself.
        refs = {c.ref() for c in copies}
        assert not refs & {v.ref() for v in v1.global_variables()}
        assert v1.trainable_variables() == trainable
        assert refs <= {v.ref() for v in v1.local_variables()}
        assert v1.get_collection(v1.GraphKeys.UPDATE_OPS) == updates
        # BatchNormalization's moving statistics are paired (averaged) but not trained.
        assert len(replica.trainable) == len(trainable) < len(copies)
        assert all(c.op.name.startswith(replicamod.SCOPE) for c in copies)


def test_a_model_fn_that_builds_another_model_when_called_again_is_a_script_error(tmp_path):
    with pytest.raises(ScriptError, match="model_fn made different variables when called a second time"):
        _build(tmp_path, {"grow": True})
