"""Moving a worker's copies of the model to and from the parameter servers as one flat tensor per server and dtype.

A small model's variables one by one cost a dozen round trips per transfer; concatenated, each direction is one
send per parameter server. Items are tuples whose first member is the shared variable and the rest its
worker-local counterparts (a copy, an anchor).
"""

from __future__ import annotations

import tensorflow as tf


def size(variable) -> int:
    return int(variable.shape.num_elements())


def by_server(items, protocol: str) -> dict:
    """`items` grouped by their shared variable's device and dtype, in order."""
    groups: dict = {}
    for item in items:
        shared = item[0]
        if not shared.shape.is_fully_defined():
            raise ValueError(f"{protocol} needs variables of a fixed shape; {shared.op.name} has {shared.shape}")
        groups.setdefault((shared.device, shared.dtype.base_dtype), []).append(item)
    return groups


def push_add(groups, device: str, delta) -> list:
    """Add `delta(item)` (a tensor computed on `device`) to each item's shared variable: one send per group."""
    adds = []
    for where, items in groups.items():
        with tf.device(device):
            flat = tf.concat([tf.reshape(delta(item), [-1]) for item in items], 0)
        with tf.device(where[0]):
            parts = tf.split(flat, [size(item[0]) for item in items])
            adds += [item[0].assign_add(tf.reshape(part, item[0].shape), read_value=False)
                     for item, part in zip(items, parts)]
    return adds


def pull(groups, device: str) -> list:
    """Assign each item's shared value to every local counterpart it has: one receive per group."""
    assigns = []
    for where, items in groups.items():
        with tf.device(where[0]):
            flat = tf.concat([tf.reshape(item[0].read_value(), [-1]) for item in items], 0)
        with tf.device(device):
            parts = tf.split(flat, [size(item[0]) for item in items])
            for item, part in zip(items, parts):
                value = tf.reshape(part, item[0].shape)
                assigns += [local.assign(value, read_value=False) for local in item[1:]]
    return assigns


def push_assign(groups, device: str) -> list:
    """Assign each item's first local counterpart (computed on `device`) to its shared variable: one send per
    group."""
    assigns = []
    for where, items in groups.items():
        with tf.device(device):
            flat = tf.concat([tf.reshape(item[1].read_value(), [-1]) for item in items], 0)
        with tf.device(where[0]):
            parts = tf.split(flat, [size(item[0]) for item in items])
            assigns += [item[0].assign(tf.reshape(part, item[0].shape), read_value=False)
                        for item, part in zip(items, parts)]
    return assigns
