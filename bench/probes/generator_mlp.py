"""Examples made by a Python generator (tf.data.Dataset.from_generator), as a user streams from their own reader."""
import numpy as np
import tensorflow as tf


def _examples(split):
    rng = np.random.RandomState(0 if split == "train" else 1)
    n = 3000 if split == "train" else 500
    w = np.random.RandomState(9).normal(size=(20, 3))
    for _ in range(n):
        x = rng.normal(size=20).astype(np.float32)
        yield x, np.int64(np.argmax(x @ w))


def num_examples(split, params):
    return 3000 if split == "train" else 500


def input_fn(split, batch_size, params):
    ds = tf.data.Dataset.from_generator(lambda: _examples(split), output_signature=(
        tf.TensorSpec([20], tf.float32), tf.TensorSpec([], tf.int64)))
    return ds.batch(batch_size)


def model_fn(features, labels, params, training):
    h = tf.keras.layers.Dense(32, activation="relu")(features)
    logits = tf.keras.layers.Dense(3)(h)
    loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))
    return {"loss": loss, "logits": logits}
