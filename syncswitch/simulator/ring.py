"""The group mean as TensorFlow's ring all-reduce computes it, rounding for rounding.

The all-reduce engines (protocols/engines/allreduce.py, localsgd_collective.py) average one flat float32 buffer
per collective: the gradients (or copies) of the variables sorted by name (replica_training.py), then the loss and
the stop flag. TensorFlow's ring reducer
(`collective_ops.all_reduce`, "Add" then "Div") cuts the buffer into one chunk per member, each of
`aligned_chunk` elements (RingAlg::AlignedChunkElts: ceil(size / n), padded to 64 bytes), and chunk c's sum
travels the ring from member c: ((x_c + x_c+1) + x_c+2) + ... in float32, then is divided by n. A float64 mean
rounds once; at 2 members the two agree (a sum of two float32 is rounded once either way), from 3 on they
differ in the last bit of about a third of the elements, which a training run of hundreds of steps turns into a
different model (0.001-0.008 of the quickstart's accuracy at 4 workers). The sum's order, not its value,
is what this module copies, so it holds for buffers of up to 4 MiB a member (one subdivision of the ring;
above that TensorFlow splits each chunk again).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

# The shared optimizer's name (node/graph.py: MomentumOptimizer's default), the suffix of its momentum slots
# names: local SGD's buffer holds every variable and its slot, sorted by the shared names (replica_training.py).
SLOT = "Momentum"
ALIGN_BYTES = 64  # EIGEN_MAX_ALIGN_BYTES of TensorFlow's x86-64 builds
MAX_CHUNK_BYTES = 4 * 1024 * 1024  # RingAlg's kMaxChunkSizeBytes: one subdivision up to this chunk size
# hyperparameters.compression: the type the buffer travels and is summed in (protocols/engines/compression.py)
WIRE_TYPES = {"fp16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16)}


def wire_dtype(compression: str | None):
    """The numpy type `compression` sends in; None for float32."""
    return WIRE_TYPES[compression] if compression else None


def aligned_chunk(size: int, members: int, item_bytes: int = 4) -> int:
    """Elements of each member's chunk of a `size`-element buffer (the last one holds what is left)."""
    base = -(-size // members)
    chunk_bytes = base * item_bytes
    pad = ALIGN_BYTES - chunk_bytes if chunk_bytes < ALIGN_BYTES else ALIGN_BYTES - chunk_bytes % ALIGN_BYTES
    return base + pad // item_bytes


def buffer_order(names: list[str], sizes: list[int]) -> np.ndarray:
    """The flat vector's indices (variables in `names` order, of `sizes` elements) in the engines' buffer order:
    the variables sorted by name."""
    starts = np.cumsum([0, *sizes])
    return np.concatenate([np.arange(starts[i], starts[i + 1]) for i in sorted(range(len(names)),
                                                                              key=lambda i: names[i])])


def slot_order(names: list[str], sizes: list[int]) -> np.ndarray:
    """`buffer_order` of the parameters' momentum slots (`var/Momentum`, sorted by that name): local SGD's average of
    the workers' momenta when its phase ends."""
    return buffer_order([f"{n}/{SLOT}" for n in names], sizes)


def ring_mean(vectors: list[np.ndarray], trailing: int = 0, order: np.ndarray | None = None,
              wire=None) -> np.ndarray:
    """The float32 mean of `vectors` (member i's buffer first in the ring at chunk i) as the ring all-reduce
    returns it; `trailing`: elements the real buffer carries after these (the loss and the stop flag), which move
    the chunks' boundaries but are not returned; `order`: where each buffer element sits in the vectors
    (`buffer_order`; None: in place); `wire`: the type (`wire_dtype`) the buffer is cast to, summed and divided
    in, then cast back to float32 (None: float32 throughout)."""
    n, size = len(vectors), vectors[0].size
    kind = np.dtype(np.float32) if wire is None else wire
    if n == 1:
        return vectors[0] if wire is None else vectors[0].astype(wire).astype(np.float32)
    if order is not None:
        mean = ring_mean([v[order] for v in vectors], trailing, wire=wire)
        out = np.empty_like(mean)
        out[order] = mean
        return out
    total = size + trailing
    if total * kind.itemsize > MAX_CHUNK_BYTES * n:
        raise ValueError(f"a {total}-element buffer is over one ring subdivision "
                         f"({MAX_CHUNK_BYTES * n // kind.itemsize})")
    chunk, out = aligned_chunk(total, n, kind.itemsize), np.empty(size, np.float32)
    for c in range(n):
        lo, hi = min(c * chunk, size), min((c + 1) * chunk, size)
        acc = vectors[c][lo:hi].astype(kind)
        for k in range(1, n):
            acc = acc + vectors[(c + k) % n][lo:hi].astype(kind)
        out[lo:hi] = (acc / kind.type(n)).astype(np.float32)
    return out
