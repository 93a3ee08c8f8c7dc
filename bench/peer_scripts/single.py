"""One process alone: the job's loop with no distribution (this machine's limit for the job). Plain TF2.

With --shards n it reads only its --shard of the training set: n such processes side by side are MWMS's workers
with no all-reduce, each training its own model (bench peers' `tf-no-sync`)."""

import peer_common as pc
import tensorflow as tf


def main():
    a = pc.args()
    script = pc.user_script(a.script)
    steps = a.samples // a.batch
    train = script.input_fn("train", a.batch, a.params)
    train = iter(train.shard(a.shards, a.shard) if a.shards > 1 else train)
    test = script.input_fn("test", 500, a.params)
    first = next(train)
    model, variables = pc.build_model(a, script, pc.sample(test))
    opt = pc.Momentum(a.lr, steps, a.momentum)
    step = tf.function(pc.replica_step(model, variables, opt, a.batch))

    step(*first)  # trace before the clock starts, as the others' start-up is not training time
    clock, evals, every = pc.Clock(), [], steps // a.evals
    for k in range(1, steps):
        step(*next(train))
        if k % every == 0 or k == steps - 1:
            evals.append((clock.now(), clock.evaluate(lambda: pc.accuracy(model, test))))
    pc.report(train_time_s=clock.now(), evaluations=evals, final_accuracy=evals[-1][1],
              examples_per_s=a.samples / clock.now(), steps=steps)


if __name__ == "__main__":
    main()
