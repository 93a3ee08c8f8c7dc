"""A user script whose model keeps an integer counter of its own and reads the global step (a schedule of its own),
for the graph tests: neither is trained, so neither keeps BSP off its all-reduce."""

import tensorflow as tf


def input_fn(split, batch_size, params):
    x = tf.random.stateless_normal([64, 4], seed=[1, 2])
    y = tf.cast(x[:, 0] > 0, tf.int64)
    return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(batch_size, drop_remainder=True)


def model_fn(features, labels, params, training):
    seen = tf.compat.v1.get_variable("batches_seen", [], tf.int64, tf.compat.v1.zeros_initializer(), trainable=False)
    step = tf.cast(tf.compat.v1.train.get_global_step(), tf.float32)
    hidden = tf.keras.layers.Dense(8, activation="relu")(features) * (1.0 + 0.0 * step)
    logits = tf.keras.layers.Dense(2)(hidden)
    loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))
    with tf.control_dependencies([seen.assign_add(1)]):
        loss = tf.identity(loss)
    return {"loss": loss, "logits": logits}
