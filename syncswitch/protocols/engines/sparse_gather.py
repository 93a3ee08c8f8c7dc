"""The group's mean of sparse gradients (an embedding's rows, as IndexedSlices) by all-gather, not all-reduce.

An embedding's gradient holds the rows its batch looked up; made dense it is the whole table. BSP's all-reduce
carried it dense: for a 50k x 64 table (12.8 MB) every worker ran a 12.8 MB ring all-reduce and a 12.8 MB momentum
update per step, 5.5x the time the parameter servers' sparse path took on 4 workers (bench/probes/big_vocab.py).
As TensorFlow's collective strategy does with IndexedSlices, each worker's rows and their indices are gathered
from every worker instead and applied as IndexedSlices: the v1 optimizer sums duplicated rows and moves only the
rows present (its sparse momentum update), so the step is one worker's at batch nB, as on the parameter servers.

Workers' row counts may differ (sparse or ragged features: a lookup of the batch's unique ids), and a gather
wants equal shapes: one small gather of every worker's counts comes first, each worker pads its rows to the
group's largest count, and the padding is cut out after the gather. Every sparse gradient travels in the same
three collectives (counts, indices, values), however many tables the model has.

Those three cost latency, which a small table's dense gradient does not: on 4 workers sharing 2 cores, about 5 ms
a step (a 300 x 16 table's BSP took 1.5x the time gathered), against about 20 ns per element of a dense all-reduce
and momentum update. A table under GATHER_FROM elements travels in the all-reduce's buffer instead, dense, with
a count per row of the workers that touched it, and is applied as IndexedSlices of the touched rows: the same
update, in one collective.
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.ops import collective_ops

from .base import dense
from .replica_training import GROUP_KEY


GATHER_FROM = 1 << 18  # elements (1 MiB of float32): a smaller table's gradient rides in the all-reduce, dense


class RowPlan:
    """A step's gradients sorted by how they travel: dense ones and small tables' in the all-reduce's buffer
    (`reduced`: a small table as its dense gradient and its per-row touch counts), large tables' rows gathered
    (`gathered`); `finish` turns the means back into (gradient, variable) pairs."""

    def __init__(self, grads_and_vars):
        rows = [(g, v) for g, v in grads_and_vars if isinstance(g, tf.IndexedSlices)]
        self.full = [(g, v) for g, v in grads_and_vars if not isinstance(g, tf.IndexedSlices)]
        self.small = [(g, v) for g, v in rows if v.shape.num_elements() < GATHER_FROM]
        self.large = [(g, v) for g, v in rows if v.shape.num_elements() >= GATHER_FROM]

    def reduced(self) -> list:
        out = [g for g, _ in self.full]
        for g, v in self.small:
            touched = tf.math.unsorted_segment_sum(tf.ones_like(g.indices, tf.float32), g.indices, v.shape[0])
            out += [dense(g), touched]
        return out

    def gathered(self) -> list:
        return [g for g, _ in self.large]

    def finish(self, means: list, gathered: list) -> list:
        """(gradient, variable) pairs from `means` (the mean of `reduced()`, in order) and `gathered`."""
        pairs = [(m, v) for m, (_, v) in zip(means, self.full)]
        at = len(self.full)
        for g, v in self.small:
            table, touched = means[at], means[at + 1]
            at += 2
            rows = tf.reshape(tf.where(touched > 0), [-1])
            pairs.append((tf.IndexedSlices(tf.gather(table, rows), tf.cast(rows, g.indices.dtype), g.dense_shape), v))
        return pairs + [(m, v) for m, (_, v) in zip(gathered, self.large)]


def gather_mean(slices: list, n: int, instance_key: int, name: str) -> list:
    """The group's mean of each of `slices` (IndexedSlices of float variables, static row shape), as IndexedSlices
    holding every worker's rows divided by n. Uses instance keys `instance_key` to `instance_key + 2`."""
    if not slices:
        return []
    widths = [_row_width(s) for s in slices]
    counts = tf.stack([tf.shape(s.indices, out_type=tf.int32)[0] for s in slices], name=f"{name}_sparse_counts")
    every = tf.reshape(collective_ops.all_gather(counts, n, GROUP_KEY, instance_key), [n, len(slices)])
    most = tf.unstack(tf.reduce_max(every, axis=0), num=len(slices))
    indices, values = [], []
    for s, width, top, count in zip(slices, widths, most, tf.unstack(counts, num=len(slices))):
        pad = top - count
        indices.append(tf.pad(tf.cast(s.indices, tf.int64), [[0, pad]]))
        rows = tf.reshape(tf.cast(s.values, tf.float32), [-1, width])
        values.append(tf.reshape(tf.pad(rows, [[0, pad], [0, 0]]), [-1]))
    all_indices = collective_ops.all_gather(tf.concat(indices, 0, name=f"{name}_sparse_indices"), n, GROUP_KEY,
                                            instance_key + 1)
    all_values = collective_ops.all_gather(tf.concat(values, 0, name=f"{name}_sparse_values"), n, GROUP_KEY,
                                           instance_key + 2)
    return _unpack(slices, widths, every, most, all_indices, all_values, n)


def _row_width(s) -> int:
    width = s.values.shape[1:].num_elements()
    if width is None:
        raise ValueError(f"sparse gradient {s.values.name}: its rows' shape {s.values.shape[1:]} is not static")
    return width


def _unpack(slices, widths, every, most, all_indices, all_values, n: int) -> list:
    """Each worker's block of the gathers holds, per gradient, its padded indices (and values); cut each block's
    padding out with the counts and divide by n."""
    block_indices = tf.reshape(all_indices, [n, -1])
    block_values = tf.reshape(all_values, [n, -1])
    out = []
    at_index = at_value = tf.constant(0, tf.int32)
    for j, (s, width, top) in enumerate(zip(slices, widths, most)):
        ids = block_indices[:, at_index:at_index + top]
        rows = tf.reshape(block_values[:, at_value:at_value + top * width], [n, top, width])
        real = tf.range(top)[None, :] < every[:, j:j + 1]
        picked = tf.boolean_mask(rows, real) / tf.cast(n, tf.float32)
        out.append(tf.IndexedSlices(tf.cast(tf.reshape(picked, [-1, *s.values.shape[1:]]), s.values.dtype),
                                    tf.cast(tf.boolean_mask(ids, real), s.indices.dtype), s.dense_shape))
        at_index += top
        at_value += top * width
    return out
