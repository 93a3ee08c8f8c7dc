"""What the peer scripts share: the job's data (the example script's input_fn), its model, the loss, the rate
schedule, evaluation and the one JSON line each script prints. Plain TensorFlow; no syncswitch.

Models: `mnist1d_cnn` is the MNIST-1D script's layers as a Keras Sequential (its model_fn makes new layers at each
call, which a TF2 loop cannot reuse); `resnet` is the job script's own `ResNet` class, imported from the script as
a TF2 user would, with its model_fn's loss (mean cross-entropy plus weight decay on the kernels); `bag_of_words` is
the big-vocabulary probe's embedding model; `model_fn`, for any other job, is the script's own model_fn built once
as a Keras functional model (ScriptModelFn).
Keras is tf-keras (Keras 2), as syncswitch runs the user's script with, and as ParameterServerStrategy needs."""

import argparse
import importlib.util
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
import tensorflow as tf


def args(extra=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--script", required=True, help="the job's user script (input_fn)")
    parser.add_argument("--params", default="{}", help="the job's params, JSON")
    parser.add_argument("--batch", type=int, default=32, help="per-worker batch")
    parser.add_argument("--lr", type=float, required=True, help="the rate of one update (already scaled)")
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--samples", type=int, required=True, help="training samples in all")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads (syncswitch's default: 1)")
    parser.add_argument("--evals", type=int, default=10, help="evaluations during training")
    parser.add_argument("--model", default="mnist1d_cnn", choices=sorted(MODELS))
    parser.add_argument("--shard", type=int, default=0, help="which of --shards parts of the training set to read")
    parser.add_argument("--shards", type=int, default=1, help="parts the training set is split into")
    if extra:
        extra(parser)
    a = parser.parse_args()
    a.params = json.loads(a.params)
    tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    tf.config.threading.set_inter_op_parallelism_threads(2)
    tf.keras.utils.set_random_seed(a.seed)
    return a


def user_script(path):
    spec = importlib.util.spec_from_file_location("user_script", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def mnist1d_cnn(width=32):
    return tf.keras.Sequential([
        tf.keras.layers.Reshape((40, 1)),
        tf.keras.layers.Conv1D(width, 5, padding="same", activation="relu"),
        tf.keras.layers.Conv1D(width, 5, padding="same", activation="relu", strides=2),
        tf.keras.layers.Conv1D(width, 3, padding="same", activation="relu", strides=2),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(64, activation="relu"),
        tf.keras.layers.Dense(10),
    ])


class Mnist1dCnn:
    """The MNIST-1D script's layers as one Keras model; no regularization."""

    def __init__(self, script, params):
        self.net = mnist1d_cnn(int(params.get("width", 32)))

    def __call__(self, x, training):
        return self.net(x, training=training)

    def regularization(self):
        return tf.constant(0.0)


class ScriptResNet:
    """The job script's ResNet class, with the weight decay its model_fn adds to the loss."""

    def __init__(self, script, params):
        self.net = script.ResNet(int(params.get("blocks_per_stage", 1)), int(params.get("width", 16)))
        self.decay = float(params.get("weight_decay", 1e-4))

    def __call__(self, x, training):
        return self.net(x, training=training)

    def regularization(self):
        return self.decay * tf.add_n([tf.nn.l2_loss(k) for k in self.net.kernels()])


class BagOfWords:
    """The big-vocabulary probe's layers (bench/probes/big_vocab.py) as one Keras model: an embedding of the
    script's V words x D, mean-pooled, a 64-unit hidden layer and C logits; no regularization."""

    def __init__(self, script, params):
        self.net = tf.keras.Sequential([
            tf.keras.layers.Embedding(script.V, script.D),
            tf.keras.layers.Lambda(lambda e: tf.reduce_mean(e, axis=1)),
            tf.keras.layers.Dense(64, activation="relu"),
            tf.keras.layers.Dense(script.C),
        ])

    def __call__(self, x, training):
        return self.net(x, training=training)

    def regularization(self):
        return tf.constant(0.0)


class ScriptModelFn:
    """Any job's model_fn as one Keras functional model, for a script the peers have no model of their own for.

    model_fn is called once, on Keras inputs shaped as the test split's features and labels, with training=None:
    its Keras layers then take the phase from each call of the model (dropout and batch normalization train in a
    step, not in an evaluation). Its own loss comes with its logits, so the step minimizes what syncswitch's does
    (regularization it adds included). A model_fn that branches on `training` in Python builds its evaluation
    branch; variables it makes outside Keras layers (`tf.compat.v1.get_variable`) are trained too, since
    build_model's variable creator records them (Keras warns that its op layer does not track them)."""

    own_loss = True

    def __init__(self, script, params):
        features, labels = script.input_fn("test", 1, params).element_spec
        self.label_spec = labels
        x = tf.nest.map_structure(_keras_input, features)
        y = _keras_input(labels)
        try:
            out = script.model_fn(x, y, params, None)
            self.net = tf.keras.Model([x, y], [out["logits"], out["loss"]])
        except Exception as e:  # noqa: BLE001 - the peer's one line: which script, why its model_fn is no Keras model
            raise SystemExit(f"peer: {script.__file__}'s model_fn cannot be built as a Keras model "
                             f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})") from None

    def __call__(self, x, training, y=None):
        if y is None:  # an evaluation: labels the loss needs but the logits do not
            batch = tf.shape(tf.nest.flatten(x)[0])[0]
            y = tf.zeros(tf.concat([[batch], tf.constant(self.label_spec.shape[1:], tf.int32)], 0),
                         self.label_spec.dtype)
        return self.net([x, y], training=training)[0]

    def with_loss(self, x, y, training):
        """(logits, the script's mean loss over this batch)."""
        return self.net([x, y], training=training)


def _keras_input(spec):
    return tf.keras.Input(shape=spec.shape[1:], dtype=spec.dtype)


MODELS = {"mnist1d_cnn": Mnist1dCnn, "resnet": ScriptResNet, "bag_of_words": BagOfWords, "model_fn": ScriptModelFn}


def sample(dataset):
    """A batch of one zero example shaped as the dataset's features: enough to make the model's variables."""
    return tf.nest.map_structure(lambda spec: tf.zeros([1, *spec.shape[1:]], spec.dtype), dataset.element_spec[0])


def build_model(a, script, example, local_statistics=False):
    """(model, its trainable variables), its variables made now (under the caller's strategy scope).

    The variables are those the first call creates (a variable creator records them: the ResNet is a plain class).
    local_statistics: non-trainable variables (batch-norm moving statistics) become per-replica (ON_READ) and read
    from this process's own replica, so that MultiWorkerMirroredStrategy updates them inside a replica step and the
    chief evaluates alone without a collective."""
    created = []

    def record(next_creator, **kwargs):
        if local_statistics and not kwargs.get("trainable", True):
            kwargs.update(synchronization=tf.VariableSynchronization.ON_READ,
                          aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        variable = next_creator(**kwargs)
        created.append(variable)
        return variable

    with tf.variable_creator_scope(record):
        model = MODELS[a.model](script, a.params)
        model(example, training=False)
    return model, [v for v in created if v.trainable]


def replica_step(model, variables, opt, global_batch):
    """One replica's step: the mean loss over the global batch (plus the model's regularization, split over the
    replicas in sync), its gradients applied by `opt`."""

    def step(x, y):
        with tf.GradientTape() as tape:
            if getattr(model, "own_loss", False):  # the script's mean over this replica's batch: its global share
                logits, mean = model.with_loss(x, y, training=True)
                loss = mean * tf.cast(tf.shape(logits)[0], mean.dtype) / global_batch
            else:
                logits = model(x, training=True)
                per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.cast(y, tf.int64),
                                                                             logits=logits)
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
                loss += tf.nn.scale_regularization_loss(model.regularization())
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    return step


def schedule(lr, total_steps):
    """x0.1 at half the steps, x0.01 at three quarters (the quickstart's lr_decay)."""
    return tf.keras.optimizers.schedules.PiecewiseConstantDecay(
        [int(0.5 * total_steps), int(0.75 * total_steps)], [lr, lr * 0.1, lr * 0.01])


class Momentum:
    """SGD with momentum in TensorFlow's own form, `tf.compat.v1.train.MomentumOptimizer` (accumulator = m x
    accumulator + g; w -= rate x accumulator), on the rate schedule: the update rule syncswitch's engines apply.
    Keras' SGD keeps velocity = m x velocity - rate x g instead: the same steps at a constant rate, but after a
    drop of the rate its velocity still carries about 1/(1 - m) steps taken at the old rate. On the ResNet job
    (93 updates of 128, rate x0.1 at 50% and x0.01 at 75%) that alone cost one process 0.03-0.08 accuracy.
    Make it under the strategy's scope; the v1 optimizer sums the replicas' gradients as Keras' does."""

    def __init__(self, lr, total_steps, momentum):
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
        rates = schedule(lr, total_steps)
        self.optimizer = tf.compat.v1.train.MomentumOptimizer(lambda: rates(self.step), momentum)

    def apply_gradients(self, grads_and_vars):
        return self.optimizer.apply_gradients(list(grads_and_vars), global_step=self.step)


def accuracy(model, test_ds):
    right = total = 0
    for x, y in test_ds:
        pred, truth = classes(model(x, training=False), y)
        right += int(tf.reduce_sum(tf.cast(pred == truth, tf.int64)))
        total += int(tf.shape(truth)[0])
    return right / max(total, 1)


def classes(logits, labels):
    """(predicted, true) class ids for the label forms the script contract allows: ids ([batch] or a [batch, 1]
    column) or one-hot rows; one logit per example is a binary model (class 1 where it is positive)."""
    if logits.shape.rank == 2 and logits.shape[-1] == 1:
        logits = tf.squeeze(logits, -1)
    if logits.shape.rank == 1:
        pred = tf.cast(logits > 0, tf.int64)
    else:
        pred = tf.argmax(logits, -1)
    if labels.shape.rank == 2 and labels.shape[-1] > 1:
        truth = tf.argmax(labels, -1)
    else:
        truth = tf.cast(tf.reshape(labels, [-1]), tf.int64)
    return pred, truth


class Clock:
    """Training time: evaluations are taken off it, as syncswitch's evaluator runs beside training."""

    def __init__(self):
        self.start = time.perf_counter()
        self.paused = 0.0

    def now(self):
        return time.perf_counter() - self.start - self.paused

    def evaluate(self, fn):
        t0 = time.perf_counter()
        value = fn()
        self.paused += time.perf_counter() - t0
        return value


def report(**fields):
    print("PEER_RESULT " + json.dumps(fields), flush=True)
