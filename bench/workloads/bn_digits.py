"""Digits 8x8 CNN with batch normalization and dropout, one-hot labels."""
import functools

import numpy as np
import tensorflow as tf


@functools.lru_cache(maxsize=None)
def _data():
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[..., None]
    y = np.eye(10, dtype=np.float32)[d.target]
    order = np.random.RandomState(1).permutation(len(x))
    return x[order[:1500]], y[order[:1500]], x[order[1500:]], y[order[1500:]]


def num_examples(split, params):
    return 1500 if split == "train" else len(_data()[2])


def input_fn(split, batch_size, params):
    x, y, xt, yt = _data()
    if split == "train":
        return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(1500).repeat().batch(batch_size, True)
    return tf.data.Dataset.from_tensor_slices((xt, yt)).batch(batch_size)


def model_fn(features, labels, params, training):
    L = tf.keras.layers
    h = features
    for width in (32, 64):
        h = L.Conv2D(width, 3, padding="same", use_bias=False)(h)
        h = L.BatchNormalization()(h, training=training)
        h = L.ReLU()(h)
        h = L.MaxPool2D()(h)
    h = L.Flatten()(h)
    h = L.Dropout(0.3)(h, training=training)
    logits = L.Dense(10)(h)
    loss = tf.reduce_mean(tf.keras.losses.categorical_crossentropy(labels, logits, from_logits=True))
    return {"loss": loss, "logits": logits}
