"""A user script whose model runs a loop (tf.while_loop, as an RNN layer does), for the graph tests."""

import tensorflow as tf


def input_fn(split, batch_size, params):
    x = tf.random.stateless_normal([64, 5, 3], seed=[1, 2])
    y = tf.cast(x[:, 0, 0] > 0, tf.int64)
    return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(batch_size, drop_remainder=True)


def model_fn(features, labels, params, training):
    cell = tf.keras.layers.Dense(4, activation="tanh")
    state = cell(tf.zeros_like(features[:, 0, :1]) + tf.zeros([1, 3]))

    def body(t, h):
        return t + 1, cell(features[:, t, :] + tf.reduce_sum(h, axis=1, keepdims=True))

    _, state = tf.while_loop(lambda t, h: t < 5, body, (tf.constant(0), state))
    logits = tf.keras.layers.Dense(2)(state)
    loss = tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    return {"loss": tf.reduce_mean(loss), "logits": logits}
