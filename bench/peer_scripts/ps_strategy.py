"""ParameterServerStrategy with a ClusterCoordinator: asynchronous parameter-server training as TensorFlow's
tutorial writes it. TF_CONFIG names this process's task: `worker` and `ps` tasks run a tf.distribute.Server and
wait; the `chief` builds the model's variables on the parameter servers and schedules one step per closure on
whichever worker is free, each worker reading every n-th batch of the job's input_fn. Plain TF2."""

import peer_common as pc
import tensorflow as tf


def serve(a):
    """A worker or parameter server: a gRPC server that runs what the chief sends until it is stopped."""
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=a.threads, inter_op_parallelism_threads=2)
    server = tf.distribute.Server(resolver.cluster_spec(), job_name=resolver.task_type,
                                  task_index=resolver.task_id, protocol="grpc", config=config, start=True)
    server.join()


def coordinate(a, resolver):
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    n = resolver.cluster_spec().num_tasks("worker")
    script = pc.user_script(a.script)
    steps = a.samples // a.batch  # one worker's batch per update

    def dataset_fn(context):
        index = tf.distribute.coordinator.experimental_get_current_worker_index()
        return script.input_fn("train", a.batch, a.params).shard(n, index)

    train = iter(coordinator.create_per_worker_dataset(strategy.distribute_datasets_from_function(dataset_fn)))
    sample = pc.sample(script.input_fn("test", a.batch, a.params))
    with strategy.scope():
        model, variables = pc.build_model(a, script, sample)
        opt = tf.keras.optimizers.SGD(pc.schedule(a.lr, steps), momentum=a.momentum)
    replica_step = pc.replica_step(model, variables, opt, a.batch)

    @tf.function
    def step(iterator):
        return strategy.run(replica_step, args=next(iterator))

    test = script.input_fn("test", 500, a.params)
    coordinator.schedule(step, args=(train,))
    coordinator.join()  # trace, send and run once before the clock starts
    clock, evals, every = pc.Clock(), [], steps // a.evals
    done = 1
    while done < steps:
        chunk = min(every, steps - done)
        for _ in range(chunk):
            coordinator.schedule(step, args=(train,))
        coordinator.join()  # the tutorial's loop: schedule a stretch, wait for it, evaluate
        done += chunk
        evals.append((clock.now(), clock.evaluate(lambda: pc.accuracy(model, test))))
    pc.report(train_time_s=clock.now(), evaluations=evals, final_accuracy=evals[-1][1],
              examples_per_s=a.samples / clock.now(), steps=steps)


def main():
    a = pc.args()
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if resolver.task_type in ("worker", "ps"):
        serve(a)
    else:
        coordinate(a, resolver)


if __name__ == "__main__":
    main()
