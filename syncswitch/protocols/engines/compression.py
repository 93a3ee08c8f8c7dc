"""`hyperparameters.compression`: the all-reduce's wire type, as Horovod's `Compression.fp16` and DDP's
`fp16_compress_hook` / `bf16_compress_hook` make it.

Where the network is the step's cost, half the bytes is nearly half the time: BSP's gradients (allreduce.py) and
local SGD's averages (localsgd_collective.py) travel, and are summed around the ring, as float16 or bfloat16, and
come back as float32. What is averaged must be small and centred for a 16-bit type to hold it: a gradient is;
a model's copy is not (bfloat16 keeps 8 bits of a weight), so local SGD sends each copy's move since the last
average (the copy less an anchor every worker holds equal), and adds the mean move to the anchor in float32.
float16 keeps 11 bits but flushes values under 6e-8 to zero and overflows past 65504; bfloat16 keeps float32's
range with 8 bits. The group's loss and stop flag travel beside, in a float32 collective of their own in the same
call: a loss must not round (the switch rule and the guard read its changes) nor overflow. Momentum's average at
a phase's end, embeddings' gathered rows and everything through the parameter servers stay float32.
"""

from __future__ import annotations

import tensorflow as tf

from .replica_training import mean

WIRE_TYPES = {"fp16": tf.float16, "bf16": tf.bfloat16}
CONTROL_OFFSET = 50  # the loss-and-flag collective's instance key: the engine's own plus this


def wire_type(compression: str | None):
    """The tf.DType `compression` sends in; None for float32 (no compression)."""
    if not compression:
        return None
    if compression not in WIRE_TYPES:
        raise ValueError(f"unknown compression {compression!r}; valid: {', '.join(sorted(WIRE_TYPES))}")
    return WIRE_TYPES[compression]


def mean_with_control(values, control, n: int, instance_key: int, name: str, wire=None):
    """(the group's mean of each of `values`, of each of `control`, the seconds the values' all-reduce took):
    one float32 collective without `wire` (or without values to send in it); with it, `values` in `wire` and
    `control` in float32 beside."""
    if wire is None or not values:
        means, waited = mean([*values, *control], n, instance_key, name)
        return means[:len(values)], means[len(values):], waited
    means, waited = mean(values, n, instance_key, name, wire)
    controls, _ = mean(control, n, instance_key + CONTROL_OFFSET, f"{name}_control")
    return means, controls, waited
