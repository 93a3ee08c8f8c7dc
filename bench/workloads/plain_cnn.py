"""A user's digits CNN with no normalization: four plain ReLU convolutions, a small initialization and high
momentum (scikit-learn's bundled 8x8 digits, no download). Plain TensorFlow, written against the script contract."""
import functools

import numpy as np
import tensorflow as tf


@functools.cache
def _data():
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[..., None]
    y = digits.target.astype(np.int64)
    order = np.random.RandomState(0).permutation(len(x))
    return x[order[:1400]], y[order[:1400]], x[order[1400:]], y[order[1400:]]


def num_examples(split, params):
    return 1400 if split == "train" else len(_data()[2])


def input_fn(split, batch_size, params):
    x, y, x_test, y_test = _data()
    if split == "train":
        return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(1400, seed=1).repeat().batch(batch_size, True)
    return tf.data.Dataset.from_tensor_slices((x_test, y_test)).batch(batch_size)


def model_fn(features, labels, params, training):
    init = tf.keras.initializers.RandomNormal(stddev=params.get("init_std", 0.06))
    x = features
    for width, stride in ((16, 1), (32, 2), (32, 1), (32, 1)):
        x = tf.keras.layers.Conv2D(width, 3, stride, "same", activation="relu", kernel_initializer=init)(x)
    x = tf.keras.layers.GlobalAveragePooling2D()(x)
    logits = tf.keras.layers.Dense(10, kernel_initializer=init)(x)
    loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))
    return {"loss": loss, "logits": logits}
