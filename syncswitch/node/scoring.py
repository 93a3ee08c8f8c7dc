"""How a script's logits and labels become predicted and true classes, whatever shapes the script uses."""

from __future__ import annotations

import tensorflow as tf


def _column(t):
    """A [batch, 1] tensor as [batch]; anything else as it is."""
    return tf.reshape(t, [-1]) if t.shape.rank == 2 and t.shape[1] == 1 else t


def predicted_classes(logits):
    """[batch, classes] logits: the argmax. One logit per example ([batch] or [batch, 1]): binary, class 1 where the
    logit is positive (a sigmoid above 0.5); an argmax over one column would call every example class 0."""
    logits = _column(logits)
    if logits.shape.rank == 1:
        return tf.cast(logits > 0, tf.int64)
    return tf.argmax(logits, axis=1, output_type=tf.int64)


def true_classes(labels, binary: bool):
    """Labels as class indices: integer ids as [batch] or a [batch, 1] column, or one-hot / probability rows
    ([batch, classes], their argmax). For a binary model, float labels are targets in [0, 1]: class 1 above 0.5."""
    labels = _column(labels)
    if labels.shape.rank == 2 and labels.shape[1] is None:  # a generator's labels: one column or one-hot, at run time
        return tf.cond(tf.shape(labels)[1] == 1, lambda: true_classes(tf.reshape(labels, [-1]), binary),
                       lambda: tf.argmax(labels, axis=1, output_type=tf.int64))
    if labels.shape.rank == 2:
        return tf.argmax(labels, axis=1, output_type=tf.int64)
    if binary and labels.dtype.is_floating:
        return tf.cast(labels > 0.5, tf.int64)
    return tf.cast(labels, tf.int64)


def correct_count(logits, labels):
    """How many examples of the batch the model classifies right."""
    predictions = predicted_classes(logits)
    truth = true_classes(labels, binary=_column(logits).shape.rank == 1)
    return tf.reduce_sum(tf.cast(tf.equal(predictions, truth), tf.int64))
