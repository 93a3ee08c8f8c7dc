"""A user-style sequence script, written outside the shipped examples: an embedding and a GRU (a v1 while loop)
classifying generated token sequences by which half sums higher, with BatchNormalization. Plain TensorFlow."""
import numpy as np
import tensorflow as tf
V, L = 50, 10
def _data(split):
    rng = np.random.RandomState(0 if split == "train" else 1)
    n = 2000 if split == "train" else 400
    x = rng.randint(1, V, size=(n, L))
    y = (x[:, :L // 2].sum(1) > x[:, L // 2:].sum(1)).astype(np.int64)  # order matters
    return x, y
def num_examples(split, params):
    return 2000 if split == "train" else 400
def input_fn(split, batch_size, params):
    x, y = _data(split)
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    return (ds.shuffle(2000, seed=1).repeat() if split == "train" else ds).batch(batch_size)
def model_fn(features, labels, params, training):
    h = tf.keras.layers.Embedding(V, 16)(features)
    h = tf.keras.layers.GRU(32)(h)
    h = tf.keras.layers.BatchNormalization()(h, training=training)
    logits = tf.keras.layers.Dense(2)(h)
    loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))
    return {"loss": loss, "logits": logits}
