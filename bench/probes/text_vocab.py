"""A user-style text script, written outside the shipped examples: a bag-of-words classifier on generated sentences,
with a vocabulary lookup table in input_fn, dict features, an embedding (sparse gradients), one-hot labels, and a
training set that is not repeated. Plain TensorFlow."""
import numpy as np
import tensorflow as tf

V, L = 300, 12


def _data(split, params):
    rng = np.random.RandomState(0 if split == "train" else 1)
    n = num_examples(split, params)
    y = rng.randint(0, 3, size=n)
    ids = rng.randint(0, V, size=(n, L))
    # class-c sentences draw half their words from the c-th third of the vocabulary
    cue = rng.randint(0, V // 3, size=(n, L)) + (V // 3) * y[:, None]
    mask = rng.rand(n, L) < 0.5
    ids = np.where(mask, cue, ids)
    words = np.array([[f"w{t}" for t in row] for row in ids])
    return words, y


def num_examples(split, params):
    return int(params.get("train_examples", 3000)) if split == "train" else 600


def input_fn(split, batch_size, params):
    words, y = _data(split, params)
    keys = tf.constant([f"w{i}" for i in range(V)])
    table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(keys, tf.range(V, dtype=tf.int64)), -1)
    ds = tf.data.Dataset.from_tensor_slices(({"words": words}, tf.one_hot(y, 3)))
    ds = ds.map(lambda f, lab: ({"ids": table.lookup(f["words"]) + 1}, lab))
    if split == "train":
        ds = ds.shuffle(3000, seed=1)
    return ds.batch(batch_size)


def model_fn(features, labels, params, training):
    emb = tf.keras.layers.Embedding(V + 1, 16)(features["ids"])
    h = tf.reduce_mean(emb, axis=1)
    h = tf.keras.layers.Dense(32, activation="relu")(h)
    logits = tf.keras.layers.Dense(3)(h)
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits))
    return {"loss": loss, "logits": logits}
