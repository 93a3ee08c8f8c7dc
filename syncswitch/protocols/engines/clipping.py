"""Gradient clipping by global norm (`hyperparameters.clip_norm`), the rule of Keras' `global_clipnorm` and
`tf.clip_by_global_norm`: every gradient of one update is scaled by clip_norm / max(norm, clip_norm), where norm is
the L2 norm of all of the update's gradients together.

Which gradient is "the update's" follows what one process would apply. Where an update combines the workers'
gradients (BSP, by all-reduce or on the parameter servers), the combined gradient is clipped, as Keras clips after
MultiWorkerMirroredStrategy aggregates: n workers at batch B then take the steps one worker takes at batch nB. Where
an update is one worker's gradient (the asynchronous protocols, local SGD's local steps), that gradient is clipped,
before any rule of the protocol's own scales it (FASGD's staleness, DC-ASGD's compensation): a clip after those
would undo them.

An embedding's gradient (IndexedSlices) counts by its dense value: rows looked up more than once are summed before
they are squared (tf.clip_by_global_norm squares each looked-up row apart), so the norm does not depend on how a
batch's rows are split among workers, gathered or densified. Each variable's sum of squares is computed beside its
gradient and the scale is applied there: clipping a gradient held on a parameter server moves two scalars, not the
gradient.
"""

from __future__ import annotations

import tensorflow as tf

v1 = tf.compat.v1


def clipped(grads_and_vars, clip_norm: float | None) -> list:
    """`grads_and_vars` with their global norm clipped to `clip_norm`; unchanged where clip_norm is None or 0. A
    NaN or infinite norm gives NaN gradients (as tf.clip_by_global_norm): the step diverges where it would have."""
    pairs = list(grads_and_vars)
    if not clip_norm or not pairs:
        return pairs
    squares = []
    for g, _ in pairs:
        with v1.colocate_with(_values(g)):
            squares.append(_square_sum(g))
    with tf.name_scope("clip_by_global_norm"):
        norm = tf.sqrt(tf.add_n(squares), name="global_norm")
        # clip_norm / norm is inf at a zero norm: the minimum keeps such a step as it is.
        scale = tf.minimum(1.0, float(clip_norm) / norm, name="scale")
    out = []
    for g, v in pairs:
        with v1.colocate_with(_values(g)):
            out.append((_scaled(g, scale), v))
    return out


def _values(g):
    return g.values if isinstance(g, tf.IndexedSlices) else g


def _square_sum(g) -> tf.Tensor:
    """The squared L2 norm of `g`'s dense value, as float32 (a float16 gradient's squares overflow in its own type)."""
    values = g
    if isinstance(g, tf.IndexedSlices):
        unique, position = tf.unique(g.indices)
        values = tf.math.unsorted_segment_sum(g.values, position, tf.size(unique))
    wide = tf.float64 if values.dtype.base_dtype == tf.float64 else tf.float32
    return tf.cast(tf.reduce_sum(tf.square(tf.cast(values, wide))), tf.float32)


def _scaled(g, scale):
    if isinstance(g, tf.IndexedSlices):
        return tf.IndexedSlices(g.values * tf.cast(scale, g.values.dtype), g.indices, g.dense_shape)
    return g * tf.cast(scale, g.dtype)
