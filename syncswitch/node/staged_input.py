"""A worker's input behind a one-batch stage, so that restarting the stream costs nothing inside training.

A worker restarts its input after the warm-up steps (`PhaseControl.at_start`): every run then reads the same
stream. A restarted iterator has lost what the user's pipeline had built (a `.cache()`, a shuffle buffer, the
`map` over the whole set that fills them), so the first training step after it paid the refill: 0.9 s against
0.085 s for the next steps on the synthetic ResNet (notebook 2026-11-27-engine-6), inside the training clock
wherever the workers start apart (the clock opens at the first worker's first step: a local SGD phase, whose
first step is each worker's own; not a BSP phase, whose first step ends in the group's all-reduce), where a
TensorFlow user's loop draws its first batch before its clock (`next(iterator)`). Here the step reads its batch
from a stage that already holds it, and puts the next one there in the same call; `start` (clear the stage,
restart the stream, stage its first batch) pays the refill before training.

Every call that computes on the features takes one batch out and puts one in, so the stage holds one batch
between calls. The put is a dependency of the features themselves, not of the loss: a call that fetches
anything computed from the batch keeps the stage full, whichever engine made it.
"""

from __future__ import annotations

import uuid

import tensorflow as tf

_CAPACITY = 2  # the one staged batch and the next one, put while the step takes the first


class StagedInput:
    """The batch a step computes on (`features`, `labels`) and `start(after)`: an op that clears the stage,
    restarts the stream and stages its first batch, after the ops `after` (the tables an input_fn looks up)."""

    def __init__(self, iterator, device: str):
        self._iterator, self._device = iterator, device
        element = iterator.get_next()
        flat = tf.nest.flatten(element)
        # A stage holds dense tensors: a stream of composite ones (sparse, ragged) is read directly.
        self._dtypes = [t.dtype for t in flat] if all(isinstance(t, tf.Tensor) for t in flat) else None
        if self._dtypes is None:
            self.features, self.labels = element
            return
        self._area = dict(capacity=_CAPACITY, memory_limit=0, container="",
                          shared_name=f"syncswitch_input_{uuid.uuid4().hex}")
        with tf.device(device):
            put = tf.raw_ops.Stage(values=flat, **self._area)
            taken = tf.raw_ops.Unstage(dtypes=self._dtypes, **self._area)
            with tf.control_dependencies([put]):  # one batch in for each one out, in the call that takes it
                # The graph's own shape (not only Python's): an unstaged tensor has none, and TensorFlow's graph
                # optimizer then chose other kernels for the model (the same training, other rounding).
                taken = [tf.ensure_shape(t, spec.shape) for t, spec in zip(taken, flat)]
        self.features, self.labels = tf.nest.pack_sequence_as(element, taken)

    def start(self, after=()) -> tf.Operation:
        with tf.control_dependencies(list(after)):
            if self._dtypes is None:
                return tf.group(self._iterator.initializer)
            with tf.device(self._device):
                clear = tf.raw_ops.StageClear(dtypes=self._dtypes, **self._area)
                with tf.control_dependencies([clear]):
                    restart = tf.group(self._iterator.initializer)
                with tf.control_dependencies([restart]):
                    return tf.raw_ops.Stage(values=tf.nest.flatten(self._iterator.get_next()), **self._area)
