"""A user script small enough to build every protocol's worker graph in seconds: the node tests that inspect a
graph (what a step receives, which calls hold a collective) load it by path as a training task would."""

import tensorflow as tf


def input_fn(split, batch_size, params):
    x = tf.random.stateless_normal([64, 4], seed=[1, 2])
    y = tf.cast(x[:, 0] > 0, tf.int64)
    return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(batch_size, drop_remainder=True)


def model_fn(features, labels, params, training):
    hidden = tf.keras.layers.Dense(8, activation="relu")(features)
    logits = tf.keras.layers.Dense(2)(hidden)
    loss = tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    return {"loss": tf.reduce_mean(loss), "logits": logits}
