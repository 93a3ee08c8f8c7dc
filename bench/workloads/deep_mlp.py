"""A user's deep tanh MLP on generated data with a large batch and a small initialization: the signal barely
passes six layers at first, so training sits on a plateau before it finds the classes (synthetic, no download).
Plain TensorFlow, written against the script contract."""
import functools

import numpy as np
import tensorflow as tf

DIM, CLASSES = 20, 5


@functools.cache
def _data(split):
    centers = np.random.RandomState(7).normal(size=(CLASSES, DIM)).astype(np.float32)
    rng = np.random.RandomState(0 if split == "train" else 1)
    n = num_examples(split, {})
    y = rng.randint(0, CLASSES, size=n)
    x = centers[y] + rng.normal(scale=1.2, size=(n, DIM)).astype(np.float32)
    return x.astype(np.float32), y.astype(np.int64)


def num_examples(split, params):
    return 4000 if split == "train" else 1000


def input_fn(split, batch_size, params):
    x, y = _data(split)
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    return (ds.shuffle(4000, seed=1).repeat().batch(batch_size, True) if split == "train" else ds.batch(batch_size))


def model_fn(features, labels, params, training):
    init = tf.keras.initializers.RandomNormal(stddev=params.get("init_std", 0.04))
    h = features
    for _ in range(6):
        h = tf.keras.layers.Dense(params.get("width", 64), activation="tanh", kernel_initializer=init)(h)
    logits = tf.keras.layers.Dense(CLASSES, kernel_initializer=init)(h)
    loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))
    return {"loss": loss, "logits": logits}
