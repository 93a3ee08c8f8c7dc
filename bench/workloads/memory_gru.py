"""A user's GRU text classifier on generated token sequences: the class is the first token's group, read
through a run of distractor tokens, so the model must learn to remember (a long plateau before it does).
Plain TensorFlow, written against the script contract."""
import numpy as np
import tensorflow as tf

VOCAB, LENGTH, CLASSES = 32, 10, 4


def _data(split):
    rng = np.random.RandomState(0 if split == "train" else 1)
    n = num_examples(split, {})
    x = rng.randint(CLASSES, VOCAB, size=(n, LENGTH))
    y = rng.randint(0, CLASSES, size=n)
    x[:, 0] = y  # the first token names the class; every other token is noise
    return x.astype(np.int32), y.astype(np.int64)


def num_examples(split, params):
    return 2000 if split == "train" else 500


def input_fn(split, batch_size, params):
    x, y = _data(split)
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    return (ds.shuffle(2000, seed=1).repeat().batch(batch_size, True) if split == "train" else ds.batch(batch_size))


def model_fn(features, labels, params, training):
    h = tf.keras.layers.Embedding(VOCAB, 16)(features)
    h = tf.keras.layers.GRU(32)(h)
    logits = tf.keras.layers.Dense(CLASSES)(h)
    loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))
    return {"loss": loss, "logits": logits}
