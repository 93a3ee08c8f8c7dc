"""What the peer scripts share: the job's data (the example script's input_fn), its model as a Keras model, the
rate schedule, evaluation and the one JSON line each script prints. Plain TensorFlow; no syncswitch."""

import argparse
import importlib.util
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
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
    parser.add_argument("--model", default="mnist1d_cnn", choices=["mnist1d_cnn", "resnet"])
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


def schedule(lr, total_steps):
    """x0.1 at half the steps, x0.01 at three quarters (the quickstart's lr_decay)."""
    return tf.keras.optimizers.schedules.PiecewiseConstantDecay(
        [int(0.5 * total_steps), int(0.75 * total_steps)], [lr, lr * 0.1, lr * 0.01])


def accuracy(model, test_ds):
    right = total = 0
    for x, y in test_ds:
        pred = tf.argmax(model(x, training=False), -1)
        right += int(tf.reduce_sum(tf.cast(pred == y, tf.int64)))
        total += int(tf.shape(y)[0])
    return right / max(total, 1)


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
