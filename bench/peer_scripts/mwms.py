"""MultiWorkerMirroredStrategy: n worker processes, a TF2 custom loop with strategy.run inside a tf.function,
each worker reading every n-th batch of the job's input_fn. Plain TF2; TF_CONFIG names the cluster."""

import json
import os

import peer_common as pc
import tensorflow as tf


def main():
    a = pc.args()
    config = json.loads(os.environ["TF_CONFIG"])
    n, index = len(config["cluster"]["worker"]), config["task"]["index"]
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    script = pc.user_script(a.script)
    global_batch = a.batch * n
    steps = a.samples // global_batch

    def dataset_fn(context):
        return script.input_fn("train", a.batch, a.params).shard(n, index)

    train = iter(strategy.distribute_datasets_from_function(dataset_fn))
    sample = pc.sample(script.input_fn("test", a.batch, a.params))
    with strategy.scope():
        model, variables = pc.build_model(a, script, sample, local_statistics=True)
        opt = pc.Momentum(a.lr, steps, a.momentum)
    replica_step = pc.replica_step(model, variables, opt, global_batch)

    @tf.function
    def step(batch):
        return strategy.run(replica_step, args=batch)

    test = script.input_fn("test", 500, a.params)
    step(next(train))  # trace and build the collectives before the clock starts
    clock, evals, every = pc.Clock(), [], steps // a.evals
    for k in range(1, steps):
        step(next(train))
        if index == 0 and (k % every == 0 or k == steps - 1):
            evals.append((clock.now(), clock.evaluate(lambda: pc.accuracy(model, test))))
    if index == 0:
        pc.report(train_time_s=clock.now(), evaluations=evals, final_accuracy=evals[-1][1],
                  examples_per_s=a.samples / clock.now(), steps=steps)


if __name__ == "__main__":
    main()
