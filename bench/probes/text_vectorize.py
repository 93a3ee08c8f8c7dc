"""Text classification with a Keras TextVectorization layer applied in a map, given its vocabulary (computed with
numpy: syncswitch builds TF1 graphs, where `adapt` cannot run), and a model_fn that returns more than loss and logits
(probabilities). Plain TensorFlow."""
import numpy as np
import tensorflow as tf

WORDS = [f"w{i}" for i in range(300)]


def _texts(split):
    rng = np.random.RandomState(0 if split == "train" else 1)
    n = 3000 if split == "train" else 600
    y = rng.randint(0, 3, size=n)
    rows = []
    for label in y:
        cue = rng.randint(100 * label, 100 * label + 100, size=6)
        noise = rng.randint(0, 300, size=6)
        rows.append(" ".join(WORDS[i] for i in np.concatenate([cue, noise])))
    return np.array(rows), y.astype(np.int64)


def num_examples(split, params):
    return 3000 if split == "train" else 600


def input_fn(split, batch_size, params):
    texts, y = _texts(split)
    vocabulary = sorted({w for t in _texts("train")[0] for w in t.split()})
    vectorize = tf.keras.layers.TextVectorization(vocabulary=vocabulary, output_sequence_length=12)
    ds = tf.data.Dataset.from_tensor_slices((texts, y)).batch(batch_size)
    ds = ds.map(lambda t, lab: (vectorize(t), lab))
    return ds.shuffle(200, seed=1).repeat() if split == "train" else ds


def model_fn(features, labels, params, training):
    h = tf.keras.layers.Embedding(401, 16)(features)
    h = tf.keras.layers.GlobalAveragePooling1D()(h)
    logits = tf.keras.layers.Dense(3)(h)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
    return {"loss": loss, "logits": logits, "probabilities": tf.nn.softmax(logits)}
