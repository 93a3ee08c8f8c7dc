"""The training set's batches hold `batch_size` examples: what syncswitch counts and scales is checked, not assumed.

syncswitch counts a step as the batch_size it passed to input_fn (the workload's epochs, the switch point, the
rate schedule, evaluation times) and sets each protocol's batch through it (BSP's global batch n x B). A script
that batches by a constant of its own (`ds.batch(64)`) trained on at another size without a word: 64 against a
batch_size of 32 ran twice the epochs asked for, BSP at twice the global batch its rate was scaled for. So each
training batch must hold at most batch_size examples, and the first a full batch_size (a later one may be short:
the end of an epoch of a set that is not batched with drop_remainder). A static batch dimension is checked while
the graph is built; a dynamic one by an assertion on the input pipeline's thread, which the task turns into the
same one-line ScriptError.
"""

from __future__ import annotations

import re

from syncswitch.errors import ScriptError

MARK = "syncswitch batch check"


def message(path: str, batch_size: int, size: int) -> str:
    return (f"script {path}: input_fn('train', {batch_size}, params) gave a batch of {size} examples: batch the "
            "training set by the batch_size argument (syncswitch counts the examples trained, and sets each "
            "protocol's batch, by it)")


def checked(ds, path: str, batch_size: int, train_examples: int | None):
    """`ds` (the training set as input_fn gave it), its batches checked to hold batch_size examples: none more, and
    the first no fewer where `train_examples` (the script's num_examples('train'), as the task asked it) says there
    are that many (a set smaller than one batch gives a short first batch: the check then leaves it to the
    one-batch-per-worker error)."""
    import tensorflow as tf

    shape = getattr(_leaf(ds.element_spec), "shape", None)
    if shape is None or shape.rank in (None, 0):  # no batch dimension to read (a scalar; an unknown rank)
        return ds
    if shape[0] is not None:
        if shape[0] != batch_size:
            raise ScriptError(message(path, batch_size, shape[0]))
        return ds
    full_first = (train_examples or 0) >= batch_size

    @tf.autograph.experimental.do_not_convert  # plain graph code: converting it cost 0.2-0.3 s of a node's start-up
    def check(i, element):
        n = tf.cast(_size(element), tf.int64)
        ok = n <= batch_size
        if full_first:
            ok = tf.logical_and(ok, tf.logical_or(i > 0, tf.equal(n, batch_size)))
        assertion = tf.debugging.Assert(ok, [MARK, n, "for", tf.constant(batch_size, tf.int64)])
        with tf.control_dependencies([assertion]):
            return tf.nest.map_structure(tf.identity, element, expand_composites=True)

    return ds.enumerate().map(check)


def from_error(exc: Exception, path: str) -> ScriptError | None:
    """The ScriptError a failed check raised as `exc` (an InvalidArgumentError from a step) says; None for others."""
    text = str(exc)
    if MARK not in text:
        return None
    numbers = [int(x) for x in re.findall(r"\[(\d+)\]", text.split(MARK, 1)[1])[:2]]
    if len(numbers) < 2:
        return ScriptError(f"script {path}: input_fn('train', ...) gave a batch other than batch_size examples")
    return ScriptError(message(path, numbers[1], numbers[0]))


def _leaf(element):
    """The labels' first tensor (the features' where labels are empty): its first dimension is the batch's."""
    import tensorflow as tf

    leaves = tf.nest.flatten(element[1]) or tf.nest.flatten(element[0])
    return leaves[0] if leaves else None


def _size(element):
    import tensorflow as tf

    leaf = _leaf(element)
    if isinstance(leaf, tf.SparseTensor):
        return leaf.dense_shape[0]
    if isinstance(leaf, tf.RaggedTensor):
        return leaf.nrows()
    return tf.shape(leaf, out_type=tf.int64)[0]
