"""Staleness alone, in one process: a job's model trained by momentum SGD whose gradients arrive late.

No cluster, no runtime: each update applies a gradient computed on the parameters of `delay` updates ago,
exactly as an asynchronous worker's gradient lands after `delay` others. What this costs a job at its own
hyperparameters is the part of ASP's accuracy loss that no runtime fix can remove; `--rules lookahead`
measures what computing the gradient at the look-ahead point (the `lookahead` protocol) wins back.

    python -m bench delay-sim --job jobs/quickstart.yaml --delays fixed:0,fixed:1,fixed:2,rr:4 --seeds 3

Delays: `fixed:K` (every gradient K updates late), `poisson:M` (random, mean M), `rr:N` (N workers, a random
one applies next; its gradient is as old as its last read).
"""

from __future__ import annotations

import collections
import statistics
import sys

from bench import common  # first: it sets the TensorFlow environment (legacy Keras, quiet logs)

import numpy as np
import tensorflow as tf

# Imported for their registrations: the backends, policies and protocols a spec names.
import syncswitch.backends
import syncswitch.policies  # noqa: F401
from syncswitch import spec as specmod
from syncswitch.node import script as scriptmod
from syncswitch.protocols.engines.lookahead import lookahead_factor


def _model(module, path, params, x_spec, y_spec):
    features = tf.keras.Input(x_spec.shape[1:], dtype=x_spec.dtype)
    labels = tf.keras.Input(y_spec.shape[1:], dtype=y_spec.dtype)
    out = scriptmod.call_model_fn(module, path, features, labels, params, True)
    return tf.keras.Model([features, labels], [out["logits"], out["loss"]])


def test_accuracy(module, job, params, model) -> float:
    """The model's accuracy on the job's test split (the model returns [logits, loss])."""
    correct = total = 0
    for x, y in scriptmod.call_input_fn(module, job.script, "test", 256, params):
        logits = model([x, y], training=False)[0]
        correct += int(np.sum(np.argmax(logits.numpy(), -1) == y.numpy()))
        total += len(y)
    return correct / total


def add_run_args(parser) -> None:
    """The arguments every one-process simulation takes beside its own: seeds and spec overrides."""
    parser.add_argument("--job", required=True)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")


def run(job, delay: str, rule: str, seed: int) -> dict:
    """One training run; its final test accuracy and mean delay."""
    tf.keras.backend.clear_session()
    tf.random.set_seed(seed)
    rng = np.random.RandomState(seed)
    hp, params = job.hyperparameters, dict(job.params)
    module = scriptmod.load_script(job.script)
    train = scriptmod.call_input_fn(module, job.script, "train", hp.batch_size, params)
    x_spec, y_spec = train.element_spec
    model = _model(module, job.script, params, x_spec, y_spec)
    weights = model.trainable_variables
    velocity = [tf.Variable(tf.zeros_like(w)) for w in weights]
    examples = scriptmod.num_train_examples(module, job.script, params)
    steps = int(job.workload.samples or job.workload.epochs * examples) // hp.batch_size
    gradient_at, apply = _update_fns(model, weights, velocity)
    delays = _train(hp, delay, rule, rng, iter(train), steps, (weights, velocity), (gradient_at, apply))
    return {"delay": delay, "rule": rule, "seed": seed, "accuracy": test_accuracy(module, job, params, model),
            "mean_delay": float(np.mean(delays)), "steps": steps}


def _update_fns(model, weights, velocity):
    """The gradient at given parameters (the current ones restored after), and the momentum update applying one."""

    @tf.function
    def gradient_at(point, x, y):
        saved = [w.read_value() for w in weights]
        for w, p in zip(weights, point):
            w.assign(p)
        with tf.GradientTape() as tape:
            loss = model([x, y], training=True)[1]
        grads = tape.gradient(loss, weights)
        for w, s in zip(weights, saved):
            w.assign(s)
        return grads

    @tf.function
    def apply(grads, lr, momentum):
        for v, w, g in zip(velocity, weights, grads):
            v.assign(momentum * v + g)
            w.assign_sub(lr * v)

    return gradient_at, apply


def _learning_rate(hp, fraction: float) -> float:
    lr = hp.learning_rate
    for boundary, factor in zip(hp.lr_decay.boundaries, hp.lr_decay.factors):
        lr = hp.learning_rate * factor if fraction >= boundary else lr
    return lr


def _snapshot(weights, velocity) -> tuple:
    return [w.read_value() for w in weights], [v.read_value() for v in velocity]


def _stale_read(kind: str, size: float, step: int, history, readers, rng) -> tuple:
    """The (parameters, velocity) the applied gradient was computed at, how many updates late it is, and under
    `rr` the worker whose read it was."""
    if kind == "rr":
        worker = rng.randint(len(readers))
        (point, v_read), read_at = readers[worker]
        return point, v_read, step - read_at, worker
    late = int(size) if kind == "fixed" else rng.poisson(size)
    late = min(late, len(history) - 1)
    point, v_read = history[-1 - late]
    return point, v_read, late, None


def _train(hp, delay: str, rule: str, rng, batches, steps: int, variables, update_fns) -> list:
    """`steps` momentum updates, each applying a gradient `delay` late; the delay of each."""
    weights, velocity = variables
    gradient_at, apply = update_fns
    kind, size = delay.split(":")
    size = float(size)
    mean_delay = {"fixed": size, "poisson": size, "rr": size - 1}[kind]
    history = collections.deque(maxlen=256)
    readers = None  # rr: each worker's last read and the step it was read at
    delays = []
    for step in range(steps):
        lr = _learning_rate(hp, step / steps)
        now = _snapshot(weights, velocity)
        history.append(now)
        if kind == "rr":
            readers = readers or [(now, step)] * int(size)
        point, v_read, late, worker = _stale_read(kind, size, step, history, readers, rng)
        delays.append(late)
        if rule == "lookahead":
            f = lookahead_factor(hp.momentum, mean_delay)
            point = [p - lr * f * v for p, v in zip(point, v_read)]
        x, y = next(batches)
        apply(gradient_at(point, x, y), tf.constant(lr, tf.float32), tf.constant(hp.momentum, tf.float32))
        if kind == "rr":
            readers[worker] = (_snapshot(weights, velocity), step + 1)
    return delays


RESULT_SCHEMA = {"job": "the job spec", "set": "its overrides", "runs": "one row per (seed, delay, rule)",
                 "cells": "{delay rule: final accuracy {median, min, max, n, runs}}"}


def add_options(parser) -> None:
    add_run_args(parser)
    parser.add_argument("--delays", default="fixed:0,fixed:1,fixed:2")
    parser.add_argument("--rules", default="none,lookahead")


def run_part(args, root) -> dict:
    job = specmod.load(args.job, args.set)
    rows = []
    for seed in range(args.seeds):  # seeds outermost: every cell sees the same machine drift
        for delay in args.delays.split(","):
            for rule in args.rules.split(","):
                if rule == "lookahead" and delay in ("fixed:0", "rr:1"):
                    continue  # nothing to look ahead over
                rows.append(run(job, delay, rule, seed))
                common.log(f"{delay} {rule} seed {seed}: accuracy {rows[-1]['accuracy']:.3f}")
    cells, delays = collections.defaultdict(list), collections.defaultdict(list)
    for r in rows:
        cells[f"{r['delay']} {r['rule']}"].append(r["accuracy"])
        delays[f"{r['delay']} {r['rule']}"].append(r["mean_delay"])
    return {"job": args.job, "set": args.set, "runs": rows,
            "cells": {key: common.spread(acc) for key, acc in cells.items()},
            "mean_delay": {key: statistics.mean(d) for key, d in delays.items()}}

if __name__ == "__main__":
    from bench import parts

    sys.exit(parts.main_of(__spec__.name))
