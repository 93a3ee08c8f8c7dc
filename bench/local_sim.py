"""Local SGD in one process: n model copies that step on their own batches and are averaged every `period` steps.

No cluster and no runtime, so what it measures is the algorithm at a job's own hyperparameters: each copy
steps with the job's BSP configuration (rate n x eta, its own momentum buffer, batch B), as the `local`
protocol's workers do; averaging every step is exactly BSP (the momentum update is linear), so `period:1` is
the BSP reference. `post:F` runs period 1 until the fraction F of the workload, then the given period
(post-local SGD, Lin et al. 2020: the Sync-Switch schedule with local SGD as the second phase).

    python -m bench local-sim --job jobs/quickstart.yaml --workers 4 --periods 1,2,4,8 --seeds 3
"""

from __future__ import annotations

import collections
import sys

from bench import common  # first: it sets the TensorFlow environment (legacy Keras, quiet logs)

import tensorflow as tf

# Imported for their registrations: the backends, policies and protocols a spec names.
import syncswitch.backends
import syncswitch.policies  # noqa: F401
from bench.delay_sim import _model, add_run_args, test_accuracy
from syncswitch import spec as specmod
from syncswitch.node import script as scriptmod


def run(job, workers: int, period: int, post: float, average_momentum: bool, seed: int) -> dict:
    """One training run; its final test accuracy."""
    tf.keras.backend.clear_session()
    tf.random.set_seed(seed)
    hp, params = job.hyperparameters, dict(job.params)
    module = scriptmod.load_script(job.script)
    train = scriptmod.call_input_fn(module, job.script, "train", hp.batch_size, params).repeat()
    x_spec, y_spec = train.element_spec
    model = _model(module, job.script, params, x_spec, y_spec)
    weights = model.trainable_variables
    start = [w.numpy() for w in weights]
    copies = [[tf.Variable(s) for s in start] for _ in range(workers)]
    velocity = [[tf.Variable(tf.zeros_like(s)) for s in start] for _ in range(workers)]
    examples = scriptmod.num_train_examples(module, job.script, params)
    rounds = int(job.workload.samples or job.workload.epochs * examples) // (hp.batch_size * workers)

    @tf.function
    def local_step(copy, vel, x, y, lr, momentum):
        for w, c in zip(weights, copy):
            w.assign(c)
        with tf.GradientTape() as tape:
            loss = model([x, y], training=True)[1]
        grads = tape.gradient(loss, weights)
        for c, v, g in zip(copy, vel, grads):
            v.assign(momentum * v + g)
            c.assign_sub(lr * v)

    def average(groups):
        for parts in zip(*groups):
            mean = tf.add_n([p.read_value() for p in parts]) / float(len(parts))
            for p in parts:
                p.assign(mean)

    batches = iter(train)
    since = 0
    for r in range(rounds):
        fraction = r / rounds
        lr = hp.learning_rate * workers  # the BSP configuration (paper IV-C): rate n x eta
        for boundary, factor in zip(hp.lr_decay.boundaries, hp.lr_decay.factors):
            lr = hp.learning_rate * workers * factor if fraction >= boundary else lr
        for i in range(workers):
            x, y = next(batches)
            local_step(copies[i], velocity[i], x, y, tf.constant(lr, tf.float32),
                       tf.constant(hp.momentum, tf.float32))
        since += 1
        if since >= (1 if fraction < post else period):
            average(copies)
            if average_momentum:
                average(velocity)
            since = 0
    average(copies)
    for w, c in zip(weights, copies[0]):
        w.assign(c)
    return {"workers": workers, "period": period, "post": post, "average_momentum": average_momentum,
            "seed": seed, "accuracy": test_accuracy(module, job, params, model), "rounds": rounds}


RESULT_SCHEMA = {"job": "the job spec", "set": "its overrides", "workers": "model copies", "post": "BSP share",
                 "runs": "one row per (seed, period)",
                 "periods": "{period: final accuracy {median, min, max, n, runs}}"}


def add_options(parser) -> None:
    add_run_args(parser)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--periods", default="1,2,4,8")
    parser.add_argument("--post", type=float, default=0.0, help="period 1 until this fraction of the workload")
    parser.add_argument("--average-momentum", action="store_true")


def run_part(args, root) -> dict:
    job = specmod.load(args.job, args.set)
    rows = []
    for seed in range(args.seeds):
        for period in [int(p) for p in args.periods.split(",")]:
            rows.append(run(job, args.workers, period, args.post, args.average_momentum, seed))
            common.log(f"period {period} seed {seed}: accuracy {rows[-1]['accuracy']:.3f}")
    cells = collections.defaultdict(list)
    for r in rows:
        cells[str(r["period"])].append(r["accuracy"])
    return {"job": args.job, "set": args.set, "workers": args.workers, "post": args.post, "runs": rows,
            "periods": {key: common.spread(acc) for key, acc in cells.items()}}


if __name__ == "__main__":
    from bench import parts

    sys.exit(parts.main_of(__spec__.name))
