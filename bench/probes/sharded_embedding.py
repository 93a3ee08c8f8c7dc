"""The big-vocabulary classifier (big_vocab.py) as a TF1 parameter-server user writes it: the 50k x 64 embedding is
one `get_variable` split in two by `fixed_size_partitioner`, a part on each parameter server, looked up with
`tf.nn.embedding_lookup`. Sentences are generated (Zipf-distributed words, each class with its own cue words).
Plain TensorFlow."""
import numpy as np
import tensorflow as tf

V, L, D, C = 50_000, 24, 64, 4


def _data(split, params):
    rng = np.random.RandomState(0 if split == "train" else 1)
    n = num_examples(split, params)
    y = rng.randint(0, C, size=n)
    ids = np.minimum(rng.zipf(1.3, size=(n, L)), V - 1)
    # each class has 300 cue words spread over the vocabulary; a third of a sentence's words are cues
    cue_words = np.random.RandomState(7).permutation(V)[: 300 * C].reshape(C, 300)
    cues = cue_words[y[:, None], rng.randint(0, 300, size=(n, L))]
    ids = np.where(rng.rand(n, L) < 0.33, cues, ids)
    return ids.astype(np.int64), y.astype(np.int64)


def num_examples(split, params):
    return int(params.get("train_examples", 20000)) if split == "train" else 2000


def input_fn(split, batch_size, params):
    ids, y = _data(split, params)
    ds = tf.data.Dataset.from_tensor_slices((ids, y))
    if split == "train":
        ds = ds.shuffle(20000, seed=1).repeat()
    return ds.batch(batch_size)


def model_fn(features, labels, params, training):
    table = tf.compat.v1.get_variable("table", [V, D], partitioner=tf.compat.v1.fixed_size_partitioner(2),
                                      initializer=tf.compat.v1.random_uniform_initializer(-0.05, 0.05))
    h = tf.reduce_mean(tf.nn.embedding_lookup(table, features), axis=1)
    h = tf.keras.layers.Dense(64, activation="relu")(h)
    logits = tf.keras.layers.Dense(C)(h)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
    return {"loss": loss, "logits": logits}
