"""A small CIFAR-shaped ResNet (ResNet-8 by default) on seeded synthetic 32x32x3 images with learnable labels.

A plain TensorFlow script (no download, no files): syncswitch calls input_fn, model_fn and num_examples.
Each image mixes ten fixed colour gratings with random non-negative weights plus noise; its label is
the argmax of the image's projection on those gratings, a deterministic function of the pixels, so
test accuracy measures learning (chance is 0.1). params:
  train_examples / test_examples   split sizes (default 3000 / 500)
  data_seed          seed of the gratings and the samples (default 0)
  noise              per-pixel Gaussian noise (default 0.5)
  blocks_per_stage   residual blocks per stage: 1 is ResNet-8, 2 ResNet-14, 3 ResNet-20 (default 1)
  width              filters of the first stage, doubled per stage (default 16)
  weight_decay       L2 factor on the kernels (default 1e-4)
"""

import functools
import weakref

import numpy as np
import tensorflow as tf

SIZE, CHANNELS, CLASSES = 32, 3, 10


def _gratings(rng):
    """Ten unit-norm colour gratings, each the sum of two oriented sinusoids with its own colours."""
    yy, xx = np.mgrid[0:SIZE, 0:SIZE].astype(np.float64) / SIZE
    out = np.zeros((CLASSES, SIZE, SIZE, CHANNELS))
    for k in range(CLASSES):
        for _ in range(2):
            theta, freq, phase = rng.uniform(0, np.pi), rng.uniform(2, 8), rng.uniform(0, 2 * np.pi)
            wave = np.cos(2 * np.pi * freq * (xx * np.cos(theta) + yy * np.sin(theta)) + phase)
            out[k] += wave[..., None] * rng.normal(size=CHANNELS)
    out = out.reshape(CLASSES, -1)
    return out / np.linalg.norm(out, axis=1, keepdims=True)


@functools.lru_cache(maxsize=None)
def _projection(seed):
    return _gratings(np.random.RandomState(seed)).astype(np.float32)


def num_examples(split, params):
    return int(params.get("train_examples", 3000) if split == "train" else params.get("test_examples", 500))


def _dataset(split, params):
    """Example i of a split, generated in the graph from a stateless seed: the same pixels in every process,
    and no image constants in the graph (a few MB of them would slow every node's start)."""
    seed = int(params.get("data_seed", 0))
    projection = tf.constant(_projection(seed))  # [classes, pixels]: the fixed projection that defines the labels
    noise = float(params.get("noise", 0.5))
    offset = 0 if split == "train" else 1 << 20  # train and test draw different images
    scale = float(np.sqrt(SIZE * SIZE * CHANNELS / 20.0))  # about unit pixel scale

    def make(i):
        key = tf.stack([tf.cast(i, tf.int32) + offset, seed])
        weights = -tf.math.log(tf.random.stateless_uniform([CLASSES], key, minval=1e-6, maxval=1.0))  # Exp(1)
        pixels = tf.linalg.matvec(projection, weights, transpose_a=True) * scale
        pixels += noise * tf.random.stateless_normal([SIZE * SIZE * CHANNELS], key + tf.constant([0, 1 << 16]))
        label = tf.argmax(tf.linalg.matvec(projection, pixels), output_type=tf.int64)
        return tf.reshape(pixels, [SIZE, SIZE, CHANNELS]), label

    return tf.data.Dataset.range(num_examples(split, params)).map(make).cache()


def input_fn(split, batch_size, params):
    ds = _dataset(split, params)
    if split == "train":
        ds = ds.shuffle(num_examples(split, params), seed=int(params.get("shuffle_seed", 1)))
        return ds.repeat().batch(batch_size, drop_remainder=True)
    return ds.batch(batch_size)


class BatchNorm(tf.keras.layers.Layer):
    """Batch normalization whose moving-average updates join tf.compat.v1's UPDATE_OPS (syncswitch runs them)."""

    def __init__(self, momentum=0.9, epsilon=1e-5, **kwargs):
        super().__init__(**kwargs)
        self.momentum, self.epsilon = momentum, epsilon

    def build(self, input_shape):
        channels = int(input_shape[-1])
        self.gamma = self.add_weight(name="gamma", shape=[channels], initializer="ones")
        self.beta = self.add_weight(name="beta", shape=[channels], initializer="zeros")
        self.moving_mean = self.add_weight(name="moving_mean", shape=[channels], initializer="zeros",
                                           trainable=False)
        self.moving_variance = self.add_weight(name="moving_variance", shape=[channels], initializer="ones",
                                               trainable=False)
        super().build(input_shape)

    def call(self, x, training=False):
        if training:
            mean, variance = tf.nn.moments(x, axes=[0, 1, 2])
            rate = 1.0 - self.momentum
            updates = [self.moving_mean.assign_sub((self.moving_mean - mean) * rate),
                       self.moving_variance.assign_sub((self.moving_variance - variance) * rate)]
            if not tf.executing_eagerly():
                for update in updates:
                    tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.UPDATE_OPS, update)
        else:
            mean, variance = self.moving_mean, self.moving_variance
        return tf.nn.batch_normalization(x, mean, variance, self.beta, self.gamma, self.epsilon)


def _conv(filters, stride, name, kernel=3):
    return tf.keras.layers.Conv2D(filters, kernel, strides=stride, padding="same", use_bias=False,
                                  kernel_initializer="he_normal", name=name)


class ResNet:
    """He et al.'s CIFAR ResNet, depth 6n+2: three stages of n basic blocks, projection shortcuts."""

    def __init__(self, blocks_per_stage, width):
        self.stem, self.stem_bn = _conv(width, 1, "stem_conv"), BatchNorm(name="stem_bn")
        self.blocks = []
        for stage in range(3):
            filters = width * 2 ** stage
            for block in range(blocks_per_stage):
                stride = 2 if stage > 0 and block == 0 else 1
                prefix = f"stage{stage}_block{block}"
                layers = {"conv1": _conv(filters, stride, f"{prefix}_conv1"), "bn1": BatchNorm(name=f"{prefix}_bn1"),
                          "conv2": _conv(filters, 1, f"{prefix}_conv2"), "bn2": BatchNorm(name=f"{prefix}_bn2")}
                if stride != 1:
                    layers["proj"] = _conv(filters, stride, f"{prefix}_proj", kernel=1)
                    layers["proj_bn"] = BatchNorm(name=f"{prefix}_proj_bn")
                self.blocks.append(layers)
        self.head = tf.keras.layers.Dense(CLASSES, kernel_initializer="he_normal", name="logits")

    def kernels(self):
        convs = [self.stem] + [layer for b in self.blocks for key, layer in b.items()
                               if key in ("conv1", "conv2", "proj")]
        return [layer.kernel for layer in convs] + [self.head.kernel]

    def __call__(self, images, training):
        x = tf.nn.relu(self.stem_bn(self.stem(images), training=training))
        for b in self.blocks:
            shortcut = b["proj_bn"](b["proj"](x), training=training) if "proj" in b else x
            y = tf.nn.relu(b["bn1"](b["conv1"](x), training=training))
            x = tf.nn.relu(b["bn2"](b["conv2"](y), training=training) + shortcut)
        return self.head(tf.reduce_mean(x, axis=[1, 2]))  # global average pooling


# One model per graph: every model_fn call while one graph is built must share the same variables.
_MODELS = weakref.WeakKeyDictionary()
_EAGER = {}


def _model(params):
    key = (int(params.get("blocks_per_stage", 1)), int(params.get("width", 16)))
    if tf.executing_eagerly():
        return _EAGER.setdefault(key, ResNet(*key))
    graph = tf.compat.v1.get_default_graph()
    if graph not in _MODELS:
        _MODELS[graph] = ResNet(*key)
    return _MODELS[graph]


def model_fn(features, labels, params, training):
    model = _model(params)
    logits = model(features, training=training)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.cast(labels, tf.int64),
                                                                         logits=logits))
    loss += float(params.get("weight_decay", 1e-4)) * tf.add_n([tf.nn.l2_loss(k) for k in model.kernels()])
    return {"loss": loss, "logits": logits}
