"""A user-style script in the tf.compat.v1 layers style, written outside the shipped examples: scikit-learn's digits
with labels as a [batch, 1] column (as a CSV pipeline gives them), batch normalization through UPDATE_OPS and an L2
penalty. `params.task`: `multiclass` (10 logits, integer labels) or `binary` (one logit, "is the digit 5 or more",
sigmoid loss). Plain TensorFlow."""

import numpy as np
import tensorflow as tf

v1 = tf.compat.v1


def _data(split):
    from sklearn.datasets import load_digits
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    o = np.random.RandomState(7).permutation(len(x))
    cut = int(0.75 * len(x))
    idx = o[:cut] if split == "train" else o[cut:]
    return x[idx], y[idx]


def num_examples(split, params):
    return len(_data(split)[1])


def input_fn(split, batch_size, params):
    x, y = _data(split)
    if params.get("task", "multiclass") == "binary":
        y = (y >= 5).astype(np.float32)
    ds = tf.data.Dataset.from_tensor_slices((x, y[:, None]))  # labels as a column: [batch, 1]
    if split == "train":
        ds = ds.shuffle(2000, seed=2).repeat()
    return ds.batch(batch_size)


def model_fn(features, labels, params, training):
    reg = tf.keras.regularizers.l2(1e-4)
    h = v1.layers.dense(features, 64, kernel_regularizer=reg)
    h = tf.nn.relu(v1.layers.batch_normalization(h, training=training))
    h = v1.layers.dense(h, 32, activation=tf.nn.relu, kernel_regularizer=reg)
    penalty = v1.losses.get_regularization_loss()
    if params.get("task", "multiclass") == "binary":
        logits = v1.layers.dense(h, 1)
        loss = v1.losses.sigmoid_cross_entropy(labels, logits)
    else:
        logits = v1.layers.dense(h, 10)
        loss = v1.losses.sparse_softmax_cross_entropy(tf.squeeze(labels, 1), logits)
    return {"loss": loss + penalty, "logits": logits}
