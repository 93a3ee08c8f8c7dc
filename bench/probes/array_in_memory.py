"""A user's script whose data set is one large numpy array in memory (as `np.load` of a .npy file gives it), handed
to `tf.data.Dataset.from_tensor_slices`: 30 000 x 784 float32 by default, 94 MB. Ten noisy class centres, a small
MLP. Plain TensorFlow."""
import numpy as np
import tensorflow as tf

DIM = 784


def _data(split, params):
    n = params.get("train_examples", 30000) if split == "train" else params.get("test_examples", 2000)
    rng = np.random.RandomState(0 if split == "train" else 1)
    centers = np.random.RandomState(7).normal(size=(10, DIM)).astype(np.float32)
    y = rng.randint(0, 10, size=n).astype(np.int32)
    x = centers[y] * 0.15 + rng.normal(size=(n, DIM)).astype(np.float32)
    return x, y


def num_examples(split, params):
    return params.get("train_examples", 30000) if split == "train" else params.get("test_examples", 2000)


def input_fn(split, batch_size, params):
    x, y = _data(split, params)
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    return (ds.shuffle(10000, seed=3).repeat() if split == "train" else ds).batch(batch_size)


def model_fn(features, labels, params, training):
    h = tf.keras.layers.Dense(64, activation="relu")(features)
    logits = tf.keras.layers.Dense(10)(h)
    loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))
    return {"loss": loss, "logits": logits}
