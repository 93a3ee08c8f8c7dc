"""Large arrays an input_fn hands to tf.data, kept out of the graph and fed when the iterator starts.

In a v1 graph, `tf.data.Dataset.from_tensor_slices(x)` on a numpy array embeds the array in the graph as a
constant, and a distributed session pays for it again and again: the graph goes to the worker's master, and each
new set of fetches is pruned and partitioned with the constant in it. A 60 000 x 784 float32 training set (190 MB,
as `np.load` gives it) took a node 31 s from launch to its first step against 3 s for a small one; an array
of 1.5 GB took a minute to become a constant, and one over 2 GB cannot (a tensor proto's limit), while fed it
reaches a gRPC session's first batch in 5-8 s. TensorFlow's own guide for v1 graphs: define the
dataset on placeholders and feed the arrays when the iterator is initialized. This module does that for the user:
while their input_fn runs, the two dataset constructors that take arrays take each large numeric array as a
placeholder, recorded with its array in a feed dictionary; whoever initializes the iterator passes it.
"""

from __future__ import annotations

import contextlib
import threading

import numpy as np

# Arrays below this stay constants: the graph's other constants are of this size, and one feed per array per
# iterator start is not worth it for a few hundred kilobytes.
MIN_BYTES = 1 << 20
_CONSTRUCTORS = ("from_tensor_slices", "from_tensors")
# The evaluator builds extra scorers on threads: one input_fn at a time in here, or a second thread would save the
# first's wrappers as the originals and leave them in place.
_PATCHING = threading.Lock()


def _as_array(value):
    """`value` as a numeric numpy array worth feeding, else None (strings, objects and small arrays stay constants)."""
    if not isinstance(value, np.ndarray) and hasattr(value, "to_numpy"):  # a pandas Series or DataFrame
        value = value.to_numpy()
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "biufc" or value.nbytes < MIN_BYTES:
        return None
    return value


@contextlib.contextmanager
def lifted(feeds: dict):
    """While inside, large numeric arrays given to `tf.data.Dataset.from_tensor_slices` or `from_tensors` become
    placeholders; `feeds` gains {placeholder: array} for each. The constructors are restored on the way out."""
    import tensorflow as tf

    v1 = tf.compat.v1
    dataset = tf.data.Dataset  # tf.compat.v1.data.Dataset's constructors call these
    owner = threading.get_ident()

    def lift(value):
        array = _as_array(value)
        if array is None:
            return value
        placeholder = v1.placeholder(tf.as_dtype(array.dtype), array.shape, name="input_array")
        feeds[placeholder] = array
        return placeholder

    def wrap(original):
        def constructor(tensors, name=None):
            if threading.get_ident() == owner:  # another thread's datasets are not this input_fn's
                tensors = tf.nest.map_structure(lift, tensors)
            return original(tensors, name=name)
        return staticmethod(constructor)

    with _PATCHING:
        saved = {name: dataset.__dict__[name] for name in _CONSTRUCTORS}
        for name, original in saved.items():
            setattr(dataset, name, wrap(original.__func__))
        try:
            yield feeds
        finally:
            for name, original in saved.items():
                setattr(dataset, name, original)
