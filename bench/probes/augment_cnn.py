"""A CNN on scikit-learn's 8x8 digits with the input pipeline a user copies from TF's guides: decode in a parallel
map, cache, random shifts and noise per example, AUTOTUNE prefetch, a final partial batch each epoch (no repeat)."""
import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits


def _data(split):
    x, y = load_digits(return_X_y=True)
    x = x.reshape(-1, 8, 8, 1).astype(np.uint8)
    rng = np.random.RandomState(0)
    order = rng.permutation(len(x))
    x, y = x[order], y[order].astype(np.int64)
    return (x[:1500], y[:1500]) if split == "train" else (x[1500:], y[1500:])


def num_examples(split, params):
    return 1500 if split == "train" else 297


def _decode(image, label):
    return tf.cast(image, tf.float32) / 16.0, label


def _augment(image, label):
    # A one-pixel shift at random, and noise.
    image = tf.image.random_crop(tf.image.resize_with_crop_or_pad(image, 9, 9), [8, 8, 1])
    return image + tf.random.normal([8, 8, 1], stddev=0.05), label


def input_fn(split, batch_size, params):
    x, y = _data(split)
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    ds = ds.map(_decode, num_parallel_calls=tf.data.AUTOTUNE).cache()
    if split == "train":
        ds = ds.shuffle(1500, seed=4).map(_augment, num_parallel_calls=tf.data.AUTOTUNE)
    return ds.batch(batch_size).prefetch(tf.data.AUTOTUNE)


def model_fn(features, labels, params, training):
    h = tf.keras.layers.Conv2D(16, 3, padding="same", activation="relu")(features)
    h = tf.keras.layers.MaxPooling2D()(h)
    h = tf.keras.layers.Conv2D(32, 3, padding="same", activation="relu")(h)
    h = tf.keras.layers.GlobalAveragePooling2D()(h)
    logits = tf.keras.layers.Dense(10)(h)
    loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))
    return {"loss": loss, "logits": logits}
