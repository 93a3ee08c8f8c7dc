"""Synthetic 8-class tabular data (scikit-learn make_classification) with a 3-layer MLP with dropout."""
import functools

import numpy as np
import tensorflow as tf


@functools.lru_cache(maxsize=None)
def _data():
    from sklearn.datasets import make_classification

    x, y = make_classification(n_samples=24000, n_features=40, n_informative=24, n_redundant=8, n_classes=8,
                               n_clusters_per_class=2, class_sep=1.2, flip_y=0.02, random_state=7)
    x = ((x - x.mean(0)) / x.std(0)).astype(np.float32)
    return x[:20000], y[:20000].astype(np.int64), x[20000:], y[20000:].astype(np.int64)


def num_examples(split, params):
    return 20000 if split == "train" else 4000


def input_fn(split, batch_size, params):
    x, y, xt, yt = _data()
    if split == "train":
        return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(20000, seed=3).repeat().batch(batch_size, True)
    return tf.data.Dataset.from_tensor_slices((xt, yt)).batch(batch_size)


def model_fn(features, labels, params, training):
    h = features
    for width in (256, 256, 128):
        h = tf.keras.layers.Dense(width, activation="relu")(h)
        h = tf.keras.layers.Dropout(0.2)(h, training=training)
    logits = tf.keras.layers.Dense(8)(h)
    loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))
    return {"loss": loss, "logits": logits}
