"""ResNet-32 on CIFAR-10 (the paper's setup 1): binary or TFRecord files from params["data_dir"], gs:// included.

A plain TensorFlow script: syncswitch calls input_fn, model_fn and num_examples; nothing here knows
about clusters. params:
  data_dir           folder with the CIFAR-10 binary files (data_batch_1..5.bin, test_batch.bin, possibly
                     inside cifar-10-batches-bin/) or TFRecords (train*.tfrecord*, test*.tfrecord*, or
                     tensorflow-datasets' cifar10-train.tfrecord-*); gs:// works
  data_format        auto (default) | binary | tfrecord
  synthetic          true: random CIFAR-shaped images and labels, no files (smoke tests, benchmarks)
  weight_decay       L2 factor on conv and dense kernels (default 2e-4)
  shuffle_buffer     training shuffle buffer (default 10000); shuffle_seed (default 1)
  train_examples / eval_examples   split sizes (default: counted from the binary files' sizes, else
                     50000 / 10000, CIFAR-10's)
"""

import os
import weakref

import tensorflow as tf

HEIGHT, WIDTH, CHANNELS, CLASSES = 32, 32, 3, 10
RECORD_BYTES = 1 + HEIGHT * WIDTH * CHANNELS  # label byte + CHW image
MEAN = (0.4914, 0.4822, 0.4465)  # CIFAR-10 per-channel statistics
STD = (0.2470, 0.2435, 0.2616)
BLOCKS_PER_STAGE = 5  # depth 6n + 2 = 32


def num_examples(split, params):
    key, default = ("train_examples", 50000) if split == "train" else ("eval_examples", 10000)
    if params.get(key):
        return int(params[key])
    if not params.get("synthetic") and params.get("data_dir") and params.get("data_format", "auto") != "tfrecord":
        # Binary files are fixed-length records: their sizes give the count without reading them.
        files = _binary_files(params["data_dir"], split)
        if files:
            total = 0
            for path in files:
                size = tf.io.gfile.stat(path).length
                if size % RECORD_BYTES:
                    raise ValueError(f"{path}: {size} bytes is not a whole number of {RECORD_BYTES}-byte "
                                     "CIFAR-10 records (label byte + 32x32x3 image)")
                total += size // RECORD_BYTES
            return total
    return default


# ----------------------------------------------------------------------------- input


def _glob(data_dir, patterns):
    for sub in ("", "cifar-10-batches-bin"):
        for pattern in patterns:
            files = sorted(tf.io.gfile.glob(os.path.join(data_dir, sub, pattern)))
            if files:
                return files
    return []


def _binary_files(data_dir, split):
    return _glob(data_dir, ["data_batch_*.bin"] if split == "train" else ["test_batch.bin"])


def _tfrecord_files(data_dir, split):
    # tensorflow-datasets names its shards cifar10-train.tfrecord-00000-of-00001, hence the leading *.
    if split == "train":
        return _glob(data_dir, ["*train*.tfrecord*", "train-*"])
    return _glob(data_dir, ["*test*.tfrecord*", "*eval*.tfrecord*", "*validation*.tfrecord*", "test-*"])


def _parse_binary(record):
    raw = tf.io.decode_raw(record, tf.uint8)
    label = tf.cast(raw[0], tf.int64)
    image = tf.transpose(tf.reshape(raw[1:], [CHANNELS, HEIGHT, WIDTH]), [1, 2, 0])  # CHW -> HWC
    return image, label


def _parse_tfrecord(record):
    features = tf.io.parse_single_example(record, {
        "image": tf.io.FixedLenFeature([], tf.string, default_value=""),
        "image/encoded": tf.io.FixedLenFeature([], tf.string, default_value=""),
        "label": tf.io.FixedLenFeature([], tf.int64, default_value=-1),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64, default_value=-1),
    })
    data = tf.where(tf.strings.length(features["image"]) > 0, features["image"], features["image/encoded"])
    # Raw HWC bytes (exactly 32*32*3) or an encoded PNG/JPEG, as tensorflow-datasets writes them; a
    # PNG or JPEG signature wins, since a compressed 32x32 image can be 3072 bytes long too.
    encoded = tf.logical_or(tf.equal(tf.strings.substr(data, 0, 8), b"\x89PNG\r\n\x1a\n"),
                            tf.equal(tf.strings.substr(data, 0, 3), b"\xff\xd8\xff"))
    image = tf.cond(
        tf.logical_and(tf.equal(tf.strings.length(data), HEIGHT * WIDTH * CHANNELS), tf.logical_not(encoded)),
        lambda: tf.reshape(tf.io.decode_raw(data, tf.uint8), [HEIGHT, WIDTH, CHANNELS]),
        lambda: tf.reshape(tf.io.decode_image(data, channels=CHANNELS, expand_animations=False),
                           [HEIGHT, WIDTH, CHANNELS]))
    label = tf.maximum(features["label"], features["image/class/label"])
    return image, label


def _records(split, params):
    data_dir = params.get("data_dir")
    if not data_dir:
        raise ValueError("params.data_dir is required (a folder of CIFAR-10 files, gs:// allowed) "
                         "unless params.synthetic is true")
    fmt = params.get("data_format", "auto")
    if fmt not in ("auto", "binary", "tfrecord"):
        raise ValueError(f"params.data_format={fmt!r}: use auto, binary or tfrecord")
    if fmt in ("auto", "binary"):
        files = _binary_files(data_dir, split)
        if files:
            return tf.data.FixedLengthRecordDataset(files, RECORD_BYTES).map(_parse_binary, tf.data.AUTOTUNE)
        if fmt == "binary":
            raise ValueError(f"no CIFAR-10 binary files for split {split!r} in {data_dir}")
    files = _tfrecord_files(data_dir, split)
    if not files:
        raise ValueError(f"no CIFAR-10 files for split {split!r} in {data_dir}: expected data_batch_*.bin / "
                         f"test_batch.bin or train*.tfrecord* / test*.tfrecord*")
    return tf.data.TFRecordDataset(files).map(_parse_tfrecord, tf.data.AUTOTUNE)


def _synthetic(split, params):
    n = num_examples(split, params)
    offset = 0 if split == "train" else 1 << 20  # train and test draw different images

    def make(i):
        seed = tf.stack([tf.cast(i, tf.int32) + offset, 7])
        image = tf.random.stateless_uniform([HEIGHT, WIDTH, CHANNELS], seed, 0, 256, dtype=tf.int32)
        label = tf.random.stateless_uniform([], seed + 1, 0, CLASSES, dtype=tf.int32)
        return tf.cast(image, tf.uint8), tf.cast(label, tf.int64)

    return tf.data.Dataset.range(n).map(make, tf.data.AUTOTUNE)


def _standardize(image):
    return (tf.cast(image, tf.float32) / 255.0 - MEAN) / STD


def _augment(image, label):
    # The standard CIFAR recipe: pad by 4, random 32x32 crop, random horizontal flip.
    image = tf.image.resize_with_crop_or_pad(image, HEIGHT + 8, WIDTH + 8)
    image = tf.image.random_crop(image, [HEIGHT, WIDTH, CHANNELS])
    image = tf.image.random_flip_left_right(image)
    return _standardize(image), label


def input_fn(split, batch_size, params):
    ds = _synthetic(split, params) if params.get("synthetic") else _records(split, params)
    if split == "train":
        ds = ds.shuffle(int(params.get("shuffle_buffer", 10000)), seed=params.get("shuffle_seed", 1))
        ds = ds.repeat().map(_augment, tf.data.AUTOTUNE)
        return ds.batch(batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
    ds = ds.map(lambda image, label: (_standardize(image), label), tf.data.AUTOTUNE)
    return ds.batch(batch_size).prefetch(tf.data.AUTOTUNE)


# ----------------------------------------------------------------------------- model


class BatchNorm(tf.keras.layers.Layer):
    """Batch normalization whose moving-average updates join tf.compat.v1's UPDATE_OPS collection.

    Any tf.compat.v1 training loop runs UPDATE_OPS with every step; Keras' own layer creates its update ops
    outside any collection there (syncswitch finds and runs those too, but a hand-written loop would not).
    """

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


class ResNet32:
    """He et al.'s CIFAR ResNet (6n+2 layers, n=5): 16/32/64 filters, projection shortcuts on downsampling."""

    def __init__(self):
        self.stem = _conv(16, 1, "stem_conv")
        self.stem_bn = BatchNorm(name="stem_bn")
        self.blocks = []
        for stage, filters in enumerate((16, 32, 64)):
            for block in range(BLOCKS_PER_STAGE):
                stride = 2 if stage > 0 and block == 0 else 1
                prefix = f"stage{stage}_block{block}"
                layers = {"conv1": _conv(filters, stride, f"{prefix}_conv1"),
                          "bn1": BatchNorm(name=f"{prefix}_bn1"),
                          "conv2": _conv(filters, 1, f"{prefix}_conv2"),
                          "bn2": BatchNorm(name=f"{prefix}_bn2")}
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
            y = b["bn2"](b["conv2"](y), training=training)
            x = tf.nn.relu(y + shortcut)
        x = tf.reduce_mean(x, axis=[1, 2])  # global average pooling
        return self.head(x)


# One model per graph: model_fn may be called more than once while one graph is built (one input
# pipeline per batch size), and every call must share the same variables.
_MODELS = weakref.WeakKeyDictionary()
_EAGER_MODEL = []


def _model():
    if tf.executing_eagerly():
        if not _EAGER_MODEL:
            _EAGER_MODEL.append(ResNet32())
        return _EAGER_MODEL[0]
    graph = tf.compat.v1.get_default_graph()
    if graph not in _MODELS:
        _MODELS[graph] = ResNet32()
    return _MODELS[graph]


def model_fn(features, labels, params, training):
    model = _model()
    logits = model(features, training=training)
    cross_entropy = tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.cast(labels, tf.int64), logits=logits))
    decay = float(params.get("weight_decay", 2e-4))
    loss = cross_entropy + decay * tf.add_n([tf.nn.l2_loss(k) for k in model.kernels()])
    return {"loss": loss, "logits": logits}
