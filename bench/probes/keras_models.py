"""A user-style script, written outside the shipped examples: a small CNN with BatchNormalization on scikit-learn's
digits as a Keras model. `params.style`: `sequential` (a Sequential given input_shape), `functional` (tf.keras.Input
and tf.keras.Model) or `subclass` (a tf.keras.Model subclass). Plain TensorFlow."""
import numpy as np
import tensorflow as tf

def _data(split):
    from sklearn.datasets import load_digits
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32).reshape(-1, 8, 8, 1)
    y = d.target.astype(np.int32)
    o = np.random.RandomState(1).permutation(len(x))
    c = 1300
    return (x[o[:c]], y[o[:c]]) if split == "train" else (x[o[c:]], y[o[c:]])

def num_examples(split, params):
    return len(_data(split)[1])

def input_fn(split, batch_size, params):
    x, y = _data(split)
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    return (ds.shuffle(2000, seed=3).repeat() if split == "train" else ds).batch(batch_size)

class Net(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.c = tf.keras.layers.Conv2D(16, 3, padding="same")
        self.bn = tf.keras.layers.BatchNormalization()
        self.f = tf.keras.layers.Flatten()
        self.d = tf.keras.layers.Dense(10)
    def call(self, x, training=False):
        return self.d(self.f(tf.nn.relu(self.bn(self.c(x), training=training))))

def model_fn(features, labels, params, training):
    if params.get("style") == "functional":
        inp = tf.keras.Input(shape=(8, 8, 1))
        h = tf.keras.layers.Conv2D(16, 3, padding="same")(inp)
        h = tf.keras.layers.BatchNormalization()(h)
        h = tf.keras.layers.Flatten()(tf.keras.layers.ReLU()(h))
        model = tf.keras.Model(inp, tf.keras.layers.Dense(10)(h))
    elif params.get("style") == "sequential":
        model = tf.keras.Sequential([tf.keras.layers.Conv2D(16, 3, padding="same", input_shape=(8, 8, 1)),
                                     tf.keras.layers.BatchNormalization(), tf.keras.layers.ReLU(),
                                     tf.keras.layers.Flatten(), tf.keras.layers.Dense(10)])
    else:
        model = Net()
    logits = model(features, training=training)
    loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))
    return {"loss": loss + tf.add_n(model.losses) if model.losses else loss, "logits": logits}
