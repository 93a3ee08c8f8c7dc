"""One process alone: the job's loop with no distribution (this machine's limit for the job). Plain TF2."""

import peer_common as pc
import tensorflow as tf


def main():
    a = pc.args()
    script = pc.user_script(a.script)
    steps = a.samples // a.batch
    train = iter(script.input_fn("train", a.batch, a.params))
    test = script.input_fn("test", 500, a.params)
    model = pc.mnist1d_cnn()
    opt = tf.keras.optimizers.SGD(pc.schedule(a.lr, steps), momentum=a.momentum)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    step(*next(train))  # trace before the clock starts, as the others' start-up is not training time
    clock, evals, every = pc.Clock(), [], steps // a.evals
    for k in range(1, steps):
        step(*next(train))
        if k % every == 0 or k == steps - 1:
            evals.append((clock.now(), clock.evaluate(lambda: pc.accuracy(model, test))))
    pc.report(train_time_s=clock.now(), evaluations=evals, final_accuracy=evals[-1][1],
              examples_per_s=a.samples / clock.now(), steps=steps)


if __name__ == "__main__":
    main()
