"""A plain script with Keras' BatchNormalization: its moving statistics train on a real cluster and are checkpointed."""

import glob
import os

import numpy as np
import pytest

from syncswitch import spec as specmod
from syncswitch.cluster_manager import manager

pytestmark = pytest.mark.cluster

SCRIPT = '''
import numpy as np
import tensorflow as tf


def _data():
    from sklearn.datasets import load_digits
    d = load_digits()
    x, y = (d.data / 16.0).astype(np.float32), d.target.astype(np.int64)
    return x[:1400], y[:1400], x[1400:], y[1400:]


def num_examples(split, params):
    x, _, xt, _ = _data()
    return len(x) if split == "train" else len(xt)


def input_fn(split, batch_size, params):
    x, y, xt, yt = _data()
    if split == "train":
        ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(1400, seed=1)
        return ds.repeat().batch(batch_size, drop_remainder=True)
    return tf.data.Dataset.from_tensor_slices((xt, yt)).batch(batch_size)


def model_fn(features, labels, params, training):
    h = tf.keras.layers.Dense(64)(features)
    h = tf.keras.layers.BatchNormalization()(h, training=training)
    logits = tf.keras.layers.Dense(10)(tf.nn.relu(h))
    loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))
    return {"loss": loss, "logits": logits}
'''

JOB = """
name: keras-bn
script: bn_mlp.py
hyperparameters: {batch_size: 16, learning_rate: 0.05, momentum: 0.9}
workload: {epochs: 3}
cluster: {backend: local, workers: 2}
policy: {schedule: [{protocol: bsp}]}
evaluation: {every: 0.5}
"""


def test_keras_batch_norm_statistics_move_and_the_model_evaluates_well(write_spec, tmp_path, no_leftovers):
    import tensorflow as tf

    (tmp_path / "bn_mlp.py").write_text(SCRIPT)
    job = specmod.load(write_spec(JOB))
    summary = manager.submit(job, output_dir=str(tmp_path / "run"), progress=False)
    assert summary["status"] == "completed", summary["message"]
    reader = tf.train.load_checkpoint(str(tmp_path / "run" / "checkpoints"))
    mean = reader.get_tensor("batch_normalization/moving_mean")
    assert np.abs(mean).mean() > 0.05  # it never moved from 0 before (evaluation normalised with 0 and 1)
    # Evaluated with the moving statistics (training=False): a well-trained model, not one normalised by 0 and 1.
    assert summary["final_accuracy"] > 0.85
    logs = glob.glob(os.path.join(str(tmp_path / "run"), "nodes", "*", "task-*.log"))
    assert any("update op(s) outside UPDATE_OPS" in open(p, encoding="utf-8").read() for p in logs)
