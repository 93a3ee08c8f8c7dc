"""Variable-length token lists as RaggedTensor features into a Keras Embedding, mean-pooled."""
import numpy as np
import tensorflow as tf

VOCAB = 300


def _data(split):
    rng = np.random.RandomState(0 if split == "train" else 1)
    n = 2000 if split == "train" else 500
    y = rng.randint(0, 3, size=n).astype(np.int32)
    rows = [np.where(rng.rand(k) < 0.6, rng.randint(c * 100, c * 100 + 100, size=k), rng.randint(0, VOCAB, size=k))
            for c, k in zip(y, rng.randint(2, 15, size=n))]
    return rows, y


def num_examples(split, params):
    return 2000 if split == "train" else 500


def input_fn(split, batch_size, params):
    rows, y = _data(split)
    ds = tf.data.Dataset.from_tensor_slices((tf.ragged.constant(rows), y))
    if split == "train":
        ds = ds.shuffle(2000, seed=1).repeat()
    return ds.batch(batch_size)


def model_fn(features, labels, params, training):
    emb = tf.keras.layers.Embedding(VOCAB, 16)(features)
    h = tf.reduce_mean(emb, axis=1)
    logits = tf.keras.layers.Dense(3)(h)
    loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))
    return {"loss": loss, "logits": logits}
