"""A user's residual MLP with LayerNorm and label smoothing on synthetic 10-class data."""
import functools

import numpy as np
import tensorflow as tf


@functools.lru_cache(maxsize=None)
def _data():
    from sklearn.datasets import make_classification
    x, y = make_classification(n_samples=34000, n_features=64, n_informative=32, n_redundant=16, n_classes=10,
                               n_clusters_per_class=3, class_sep=1.0, flip_y=0.01, random_state=11)
    x = ((x - x.mean(0)) / x.std(0)).astype(np.float32)
    return x[:30000], y[:30000].astype(np.int64), x[30000:], y[30000:].astype(np.int64)


def num_examples(split, params):
    return 30000 if split == "train" else 4000


def input_fn(split, batch_size, params):
    x, y, xt, yt = _data()
    if split == "train":
        return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(30000).repeat().batch(batch_size, drop_remainder=True)
    return tf.data.Dataset.from_tensor_slices((xt, yt)).batch(batch_size)


def model_fn(features, labels, params, training):
    h = tf.keras.layers.Dense(192)(features)
    for _ in range(3):
        r = tf.keras.layers.LayerNormalization()(h)
        r = tf.keras.layers.Dense(384, activation="gelu")(r)
        r = tf.keras.layers.Dropout(0.1)(r, training=training)
        r = tf.keras.layers.Dense(192)(r)
        h = h + r
    h = tf.keras.layers.LayerNormalization()(h)
    logits = tf.keras.layers.Dense(10)(h)
    onehot = tf.one_hot(labels, 10)
    loss = tf.reduce_mean(tf.keras.losses.categorical_crossentropy(onehot, logits, from_logits=True,
                                                                   label_smoothing=0.1))
    return {"loss": loss, "logits": logits}
