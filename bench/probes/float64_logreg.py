"""A user's float64 logistic regression on digits (their data is float64 and they kept it)."""
import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits


def _data(split):
    d = load_digits()
    x, y = d.data / 16.0, d.target.astype(np.int64)
    return (x[:1400], y[:1400]) if split == "train" else (x[1400:], y[1400:])


def num_examples(split, params):
    return len(_data(split)[0])


def input_fn(split, batch_size, params):
    x, y = _data(split)
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    return (ds.shuffle(1400, seed=3).repeat() if split == "train" else ds).batch(batch_size)


def model_fn(features, labels, params, training):
    w = tf.Variable(tf.zeros([64, 10], tf.float64), name="w")
    b = tf.Variable(tf.zeros([10], tf.float64), name="b")
    logits = tf.matmul(features, w) + b
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
    return {"loss": loss, "logits": logits}
