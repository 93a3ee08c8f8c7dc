"""A small Transformer encoder over token ids: Embedding, learned positions, MultiHeadAttention, LayerNormalization,
a feed-forward block, mean-pooled into a classifier (the shape of Keras' text classification with a Transformer)."""
import numpy as np
import tensorflow as tf

VOCAB, LENGTH, CLASSES = 200, 24, 4


def _data(split):
    rng = np.random.RandomState(0 if split == "train" else 1)
    n = 3000 if split == "train" else 600
    y = rng.randint(0, CLASSES, size=n).astype(np.int32)
    x = rng.randint(0, VOCAB, size=(n, LENGTH)).astype(np.int32)
    # A third of the tokens come from the class's own quarter of the vocabulary.
    topical = rng.rand(n, LENGTH) < 0.33
    x = np.where(topical, y[:, None] * (VOCAB // CLASSES) + x % (VOCAB // CLASSES), x).astype(np.int32)
    return x, y


def num_examples(split, params):
    return 3000 if split == "train" else 600


def input_fn(split, batch_size, params):
    x, y = _data(split)
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    if split == "train":
        ds = ds.shuffle(3000, seed=5)
    return ds.batch(batch_size).prefetch(tf.data.AUTOTUNE)


def model_fn(features, labels, params, training):
    tokens = tf.keras.layers.Embedding(VOCAB, 32)(features)
    positions = tf.keras.layers.Embedding(LENGTH, 32)(tf.range(LENGTH))
    h = tokens + positions
    # Pre-norm blocks (as GPT-2 and most encoders since): the residual stream trains under plain momentum SGD,
    # which the post-norm layout of the original Transformer does not in this budget.
    normed = tf.keras.layers.LayerNormalization(epsilon=1e-6)(h)
    attended = tf.keras.layers.MultiHeadAttention(num_heads=2, key_dim=16)(normed, normed, training=training)
    h = h + tf.keras.layers.Dropout(0.1)(attended, training=training)
    normed = tf.keras.layers.LayerNormalization(epsilon=1e-6)(h)
    h = h + tf.keras.layers.Dense(32)(tf.keras.layers.Dense(64, activation="relu")(normed))
    logits = tf.keras.layers.Dense(CLASSES)(tf.reduce_mean(h, axis=1))
    loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))
    return {"loss": loss, "logits": logits}
