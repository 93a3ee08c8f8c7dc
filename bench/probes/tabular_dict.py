"""A user's tabular script: dict features (as a CSV reader gives them), an int step counter in the model, dropout
and L2 regularization. Plain TensorFlow."""
import numpy as np
import tensorflow as tf


def _data(split):
    rng = np.random.RandomState(0 if split == "train" else 1)
    n = 2000 if split == "train" else 500
    a, b = rng.normal(size=n).astype(np.float32), rng.normal(size=n).astype(np.float32)
    y = ((a * b > 0) ^ (a > 1.0)).astype(np.int32)
    return {"a": a, "b": b}, y


def num_examples(split, params):
    return 2000 if split == "train" else 500


def input_fn(split, batch_size, params):
    x, y = _data(split)
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    return (ds.shuffle(2000, seed=1).repeat() if split == "train" else ds).batch(batch_size)


def model_fn(features, labels, params, training):
    x = tf.stack([features["a"], features["b"], features["a"] * features["b"]], axis=1)
    seen = tf.compat.v1.get_variable("batches_seen", [], tf.int64, tf.compat.v1.zeros_initializer(), trainable=False)
    h = tf.keras.layers.Dense(32, activation="relu", kernel_regularizer=tf.keras.regularizers.l2(1e-4))(x)
    h = tf.keras.layers.Dropout(0.1)(h, training=training)
    logits = tf.keras.layers.Dense(2)(h)
    loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))
    loss += tf.add_n(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES) or [0.0])
    if training:
        with tf.control_dependencies([seen.assign_add(1)]):
            loss = tf.identity(loss)
    return {"loss": loss, "logits": logits}
