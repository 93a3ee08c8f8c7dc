"""Global-norm clipping (protocols/engines/clipping.py) against tf.clip_by_global_norm and a numpy reference."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
tf = pytest.importorskip("tensorflow")
v1 = tf.compat.v1

from syncswitch.protocols.engines.clipping import clipped  # noqa: E402


def _run(pairs):
    with v1.Session() as session:
        out = []
        for g, _ in pairs:
            out.append(session.run(tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g))
        return out


@pytest.mark.parametrize("clip_norm", [0.1, 1.0, 100.0])
def test_dense_gradients_clip_as_tensorflows_global_norm(clip_norm):
    with tf.Graph().as_default():
        a, b = tf.constant([[0.3, -0.4], [1.2, 0.0]]), tf.constant([2.0, -1.0, 0.5])
        expected, _ = tf.clip_by_global_norm([a, b], clip_norm)
        got = clipped([(a, "a"), (b, "b")], clip_norm)
        assert [v for _, v in got] == ["a", "b"]
        with v1.Session() as session:
            want = session.run(expected)
        for g, w in zip(_run(got), want):
            np.testing.assert_allclose(g, w, rtol=1e-6)


def test_an_embeddings_rows_count_by_their_dense_sum():
    """Row 1 looked up twice: its two rows add up before squaring, as the dense gradient's row does; the result is
    the dense gradient clipped, whatever the split of the rows."""
    values = np.array([[3.0, 0.0], [1.0, 1.0], [4.0, 0.0]], np.float32)
    indices = np.array([1, 0, 1], np.int64)
    dense = np.zeros([4, 2], np.float32)
    np.add.at(dense, indices, values)
    norm = np.linalg.norm(dense)  # sqrt(49 + 2), where squaring the rows apart gives sqrt(27)
    assert abs(norm - np.sqrt((values ** 2).sum())) > 0.1
    with tf.Graph().as_default():
        sparse = tf.IndexedSlices(tf.constant(values), tf.constant(indices), tf.constant([4, 2], tf.int64))
        got = clipped([(sparse, "table")], 1.0)
        assert isinstance(got[0][0], tf.IndexedSlices)  # applied as rows, not densified
        out = _run(got)[0]
    np.testing.assert_allclose(out, dense / norm, rtol=1e-6)


def test_no_clip_norm_leaves_the_pairs_and_a_zero_gradient_stays_zero():
    with tf.Graph().as_default():
        g = tf.zeros([3])
        assert clipped([(g, "w")], None) == [(g, "w")]
        assert clipped([(g, "w")], 0.0) == [(g, "w")]
        np.testing.assert_array_equal(_run(clipped([(g, "w")], 1.0))[0], np.zeros(3))


@pytest.mark.parametrize("dtype", [tf.float16, tf.float64])
def test_other_float_types_keep_their_type_and_do_not_overflow(dtype):
    """A float16 gradient whose squares overflow float16 (300^2 > 65504) is scaled by its true norm."""
    with tf.Graph().as_default():
        g = tf.constant([300.0, 400.0], dtype)
        out = clipped([(g, "w")], 5.0)
        assert out[0][0].dtype == dtype
        np.testing.assert_allclose(_run(out)[0].astype(np.float64), [3.0, 4.0], rtol=2e-3)


def test_a_gradient_on_another_device_is_squared_and_scaled_beside_it():
    """A gradient held on a parameter server (SyncReplicasOptimizer's aggregate) moves two scalars, not itself."""
    with tf.Graph().as_default():
        with tf.device("/job:ps/task:0"):
            g = tf.constant([3.0, 4.0])
        out, _ = clipped([(g, "w")], 1.0)[0]
        assert out.device == g.device
        square = [op for op in out.graph.get_operations() if op.type == "Sum"]
        assert square and all(op.device == g.device for op in square)
