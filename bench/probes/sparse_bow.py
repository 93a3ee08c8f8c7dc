"""Bag-of-words text classifier fed SparseTensor features (as tf.io.parse_example's VarLenFeature gives them)."""
import numpy as np
import tensorflow as tf

VOCAB = 500


def _data(split):
    rng = np.random.RandomState(0 if split == "train" else 1)
    n = 2000 if split == "train" else 500
    y = rng.randint(0, 2, size=n).astype(np.int64)
    rows = []
    for label in y:
        k = rng.randint(3, 12)
        lo = 0 if label == 0 else VOCAB // 2
        ids = np.where(rng.rand(k) < 0.7, rng.randint(lo, lo + VOCAB // 2, size=k), rng.randint(0, VOCAB, size=k))
        rows.append(ids)
    return rows, y


def num_examples(split, params):
    return 2000 if split == "train" else 500


def input_fn(split, batch_size, params):
    rows, y = _data(split)
    ragged = tf.ragged.constant(rows, dtype=tf.int64)
    ds = tf.data.Dataset.from_tensor_slices((ragged, y))
    if split == "train":
        ds = ds.shuffle(2000, seed=1).repeat()
    ds = ds.batch(batch_size)
    return ds.map(lambda ids, label: ({"ids": ids.to_sparse()}, label))


def model_fn(features, labels, params, training):
    emb = tf.compat.v1.get_variable("emb", [VOCAB, 16], initializer=tf.compat.v1.glorot_uniform_initializer())
    h = tf.nn.embedding_lookup_sparse(emb, features["ids"], None, combiner="mean")
    logits = tf.keras.layers.Dense(2)(tf.nn.relu(h))
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
    return {"loss": loss, "logits": logits}
