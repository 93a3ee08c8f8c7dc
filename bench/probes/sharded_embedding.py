"""The big-vocabulary classifier (big_vocab.py) as a TF1 parameter-server user writes it: the 50k x 64 embedding is
one `get_variable` split in two by `fixed_size_partitioner`, a part on each parameter server, looked up with
`tf.nn.embedding_lookup`. Its data come from big_vocab.py, imported from beside it. Plain TensorFlow."""
import tensorflow as tf
from big_vocab import C, D, V, input_fn, num_examples  # noqa: F401 - the same data, from the script beside it


def model_fn(features, labels, params, training):
    table = tf.compat.v1.get_variable("table", [V, D], partitioner=tf.compat.v1.fixed_size_partitioner(2),
                                      initializer=tf.compat.v1.random_uniform_initializer(-0.05, 0.05))
    h = tf.reduce_mean(tf.nn.embedding_lookup(table, features), axis=1)
    h = tf.keras.layers.Dense(64, activation="relu")(h)
    logits = tf.keras.layers.Dense(C)(h)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
    return {"loss": loss, "logits": logits}
