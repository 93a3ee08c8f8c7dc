"""A user's sequence model: a frozen embedding (trainable=False), an LSTM, a Dense head. Plain TensorFlow."""
import numpy as np
import tensorflow as tf

V, L = 30, 8


def _data(split):
    rng = np.random.RandomState(0 if split == "train" else 1)
    n = 1600 if split == "train" else 400
    x = rng.randint(1, V, size=(n, L))
    y = (x[:, 0] > x[:, -1]).astype(np.int64)
    return x, y


def num_examples(split, params):
    return 1600 if split == "train" else 400


def input_fn(split, batch_size, params):
    x, y = _data(split)
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    return (ds.shuffle(1600, seed=1).repeat() if split == "train" else ds).batch(batch_size)


def model_fn(features, labels, params, training):
    h = tf.keras.layers.Embedding(V, 8, trainable=False)(features)
    h = tf.keras.layers.LSTM(16)(h)
    logits = tf.keras.layers.Dense(2)(h)
    loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))
    return {"loss": loss, "logits": logits}
