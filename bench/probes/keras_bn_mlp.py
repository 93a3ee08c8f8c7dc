"""A user-style script, written outside the shipped examples: an MLP with Keras BatchNormalization and dropout on
scikit-learn's digits (flattened). Plain TensorFlow; used to check that such layers' update ops run."""

import numpy as np
import tensorflow as tf


def _data():
    from sklearn.datasets import load_digits
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    rng = np.random.RandomState(3)
    o = rng.permutation(len(x))
    cut = int(0.75 * len(x))
    return x[o[:cut]], y[o[:cut]], x[o[cut:]], y[o[cut:]]


def num_examples(split, params):
    x, _, xt, _ = _data()
    return len(x) if split == "train" else len(xt)


def input_fn(split, batch_size, params):
    x, y, xt, yt = _data()
    if split == "train":
        data = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(2000, seed=5).repeat()
        return data.batch(batch_size, drop_remainder=True)
    return tf.data.Dataset.from_tensor_slices((xt, yt)).batch(batch_size)


def model_fn(features, labels, params, training):
    h = tf.keras.layers.Dense(128)(features)
    h = tf.keras.layers.BatchNormalization()(h, training=training)
    h = tf.keras.layers.ReLU()(h)
    h = tf.keras.layers.Dropout(0.2)(h, training=training)
    h = tf.keras.layers.Dense(64, activation="relu")(h)
    logits = tf.keras.layers.Dense(10)(h)
    loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))
    return {"loss": loss, "logits": logits}
