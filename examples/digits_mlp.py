"""scikit-learn's bundled 8x8 digits with a small MLP (no download): a second, tiny workload."""

import functools

import numpy as np
import tensorflow as tf


@functools.lru_cache(maxsize=None)
def _data(test_fraction, seed):
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    order = np.random.RandomState(seed).permutation(len(x))
    cut = int(len(x) * (1 - test_fraction))
    return x[order[:cut]], y[order[:cut]], x[order[cut:]], y[order[cut:]]


def num_examples(split, params):
    x, _, x_test, _ = _data(params.get("test_fraction", 0.2), params.get("data_seed", 0))
    return len(x) if split == "train" else len(x_test)


def input_fn(split, batch_size, params):
    x, y, x_test, y_test = _data(params.get("test_fraction", 0.2), params.get("data_seed", 0))
    if split == "train":
        ds = tf.data.Dataset.from_tensor_slices((x, y))
        return ds.shuffle(len(x), seed=1).repeat().batch(batch_size, drop_remainder=True)
    return tf.data.Dataset.from_tensor_slices((x_test, y_test)).batch(batch_size)


def model_fn(features, labels, params, training):
    x = tf.keras.layers.Dense(params.get("hidden", 64), activation="relu")(features)
    logits = tf.keras.layers.Dense(10)(x)
    loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))
    return {"loss": loss, "logits": logits}
