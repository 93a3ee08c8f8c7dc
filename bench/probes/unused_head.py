"""A two-head model whose auxiliary head is built but left out of the loss (its weights get no gradient), and a
frozen-by-stop_gradient feature extractor."""
import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits


def _data(split):
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    y = y.astype(np.int32)
    return (x[:1400], y[:1400]) if split == "train" else (x[1400:], y[1400:])


def num_examples(split, params):
    return 1400 if split == "train" else 397


def input_fn(split, batch_size, params):
    x, y = _data(split)
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    return (ds.shuffle(1400, seed=2).repeat() if split == "train" else ds).batch(batch_size)


def model_fn(features, labels, params, training):
    frozen = tf.keras.layers.Dense(32, activation="tanh", name="frozen")(features)
    h = tf.keras.layers.Dense(64, activation="relu")(tf.concat([features, tf.stop_gradient(frozen)], axis=1))
    logits = tf.keras.layers.Dense(10)(h)
    aux = tf.keras.layers.Dense(10, name="aux")(h)  # for a later experiment; not in the loss
    loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))
    return {"loss": loss, "logits": logits, "aux_logits": aux}
