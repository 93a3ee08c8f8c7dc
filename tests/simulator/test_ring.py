"""The simulator's ring mean against TensorFlow's own collective all-reduce, rounding for rounding."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from syncswitch.simulator.ring import aligned_chunk, buffer_order, ring_mean, wire_dtype

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# n logical CPU devices in a fresh process (their count is fixed before TensorFlow starts), each a member of one
# collective group: the ring reducer the engines' all_reduce runs, on the same buffers.
REDUCE = """
import json, sys
import numpy as np
import tensorflow as tf
from tensorflow.python.ops import collective_ops
n, sizes = int(sys.argv[1]), json.loads(sys.argv[2])
tf.config.set_logical_device_configuration(tf.config.list_physical_devices("CPU")[0],
                                           [tf.config.LogicalDeviceConfiguration()] * n)
out = {}
for key, size in enumerate(sizes):
    rng = np.random.default_rng(size)
    xs = [(rng.standard_normal(size) * 10 ** rng.uniform(-4, 0, size)).astype(np.float32) for _ in range(n)]
    @tf.function
    def reduce(*inputs):
        res = []
        for i in range(n):
            with tf.device(f"/CPU:{i}"):
                res.append(collective_ops.all_reduce(tf.identity(inputs[i]), n, 1, 1 + key, "Add", "Div"))
        return res
    out[size] = reduce(*xs)[0].numpy().tobytes().hex()
print(json.dumps(out))
"""


@pytest.mark.parametrize("n", [3, 4])
def test_the_ring_mean_is_tensorflows_all_reduce_bit_for_bit_where_a_float64_mean_is_not(n):
    pytest.importorskip("tensorflow")
    sizes = [7, 64, 1000, 29644]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    done = subprocess.run([sys.executable, "-c", REDUCE, str(n), json.dumps(sizes)], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=300, check=True)
    reduced = json.loads(done.stdout.strip().splitlines()[-1])
    rounded_once = 0
    for size in sizes:
        rng = np.random.default_rng(size)
        xs = [(rng.standard_normal(size) * 10 ** rng.uniform(-4, 0, size)).astype(np.float32) for _ in range(n)]
        real = np.frombuffer(bytes.fromhex(reduced[str(size)]), np.float32)
        np.testing.assert_array_equal(ring_mean(xs), real, err_msg=f"{n} members, {size} elements")
        if size >= 64:  # (7 elements may all round alike)
            rounded_once += np.array_equal((np.sum(xs, 0, dtype=np.float64) / n).astype(np.float32), real)
    assert rounded_once == 0  # the order matters at these sizes: the test can tell a float64 mean from the ring


# The same reducer on buffers cast to a 16-bit type (hyperparameters.compression), the result cast back.
REDUCE_WIRE = REDUCE.replace("collective_ops.all_reduce(tf.identity(inputs[i]), n, 1, 1 + key, \"Add\", \"Div\")",
                             "tf.cast(collective_ops.all_reduce(tf.cast(inputs[i], WIRE), n, 1, 1 + key, \"Add\", "
                             "\"Div\"), tf.float32)").replace("out = {}", "WIRE = getattr(tf, sys.argv[3])\nout = {}")
assert "WIRE = getattr" in REDUCE_WIRE and "tf.cast(inputs[i], WIRE)" in REDUCE_WIRE


@pytest.mark.parametrize("compression,tf_name", [("fp16", "float16"), ("bf16", "bfloat16")])
def test_a_compressed_ring_mean_is_tensorflows_all_reduce_in_that_type_bit_for_bit(compression, tf_name):
    """Cast, summed in the ring's order and divided in the wire type, as TensorFlow's reducer does on 16-bit
    buffers (chunks padded to 64 bytes of 2-byte elements): 4 members, values down to fp16's flush to zero."""
    pytest.importorskip("tensorflow")
    n, sizes = 4, [7, 64, 1000, 29644]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    done = subprocess.run([sys.executable, "-c", REDUCE_WIRE, str(n), json.dumps(sizes), tf_name],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=300, check=True)
    reduced = json.loads(done.stdout.strip().splitlines()[-1])
    wire, differs = wire_dtype(compression), 0
    for size in sizes:
        rng = np.random.default_rng(size)
        xs = [(rng.standard_normal(size) * 10 ** rng.uniform(-4, 0, size)).astype(np.float32) for _ in range(n)]
        real = np.frombuffer(bytes.fromhex(reduced[str(size)]), np.float32)
        np.testing.assert_array_equal(ring_mean(xs, wire=wire), real, err_msg=f"{compression}, {size} elements")
        differs += not np.array_equal(ring_mean(xs), real)
    assert differs == len(sizes)  # 16 bits are not 32: the test can tell the wire type was used


def test_chunks_are_padded_to_64_bytes_and_the_buffer_order_sorts_the_variables_by_name():
    assert aligned_chunk(29644, 4) == 7424 and aligned_chunk(7, 4) == 16 and aligned_chunk(29642, 2) == 14832
    order = buffer_order(["dense/kernel", "conv/bias", "conv/kernel"], [3, 1, 2])
    assert order.tolist() == [3, 4, 5, 0, 1, 2]  # conv/bias, conv/kernel, dense/kernel
    rng = np.random.default_rng(0)
    vectors = [(rng.standard_normal(6) * 10 ** rng.uniform(-4, 0, 6)).astype(np.float32) for _ in range(4)]
    # The mean of the buffer in the engine's order, each element back at its place in the flat vector.
    np.testing.assert_array_equal(ring_mean(vectors, order=order)[order], ring_mean([v[order] for v in vectors]))


def test_two_members_round_once_as_a_float64_mean_does():
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(1000).astype(np.float32) for _ in range(2))
    np.testing.assert_array_equal(ring_mean([a, b], trailing=2), ((a.astype(np.float64) + b) / 2).astype(np.float32))
