"""A Keras MLP under the mixed_float16 policy (float16 compute, float32 variables), as a user would turn it on."""
import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits


def _data(split):
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    return (x[:1400], y[:1400].astype(np.int32)) if split == "train" else (x[1400:], y[1400:].astype(np.int32))


def num_examples(split, params):
    return 1400 if split == "train" else 397


def input_fn(split, batch_size, params):
    x, y = _data(split)
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    return (ds.shuffle(1400, seed=2).repeat() if split == "train" else ds).batch(batch_size)


def model_fn(features, labels, params, training):
    tf.keras.mixed_precision.set_global_policy("mixed_float16")
    h = tf.keras.layers.Dense(64, activation="relu")(features)
    logits = tf.keras.layers.Dense(10, dtype="float32")(h)
    loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))
    return {"loss": loss, "logits": logits}
