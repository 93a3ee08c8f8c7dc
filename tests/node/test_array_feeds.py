"""Large arrays an input_fn gives tf.data stay out of the graph: placeholders, fed when the iterator starts, read
the same batches the constants would."""

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from syncswitch.node import array_feeds  # noqa: E402
from syncswitch.node import script as scriptmod  # noqa: E402

v1 = tf.compat.v1
BIG = array_feeds.MIN_BYTES // 4 + 16  # float32 elements: just over the threshold


def _batches(ds, feeds, count):
    iterator = v1.data.make_initializable_iterator(ds)
    batch = iterator.get_next()
    with v1.Session() as session:
        session.run(iterator.initializer, feed_dict=feeds or None)
        return [session.run(batch) for _ in range(count)]


def _input_fn(x, y, names):
    def input_fn(split, batch_size, params):
        ds = tf.data.Dataset.from_tensor_slices(({"x": x, "name": names}, y))
        return ds.shuffle(64, seed=3).batch(batch_size)
    return input_fn


def test_a_large_array_is_fed_and_reads_the_same_batches():
    rng = np.random.RandomState(0)
    x = rng.normal(size=(BIG // 4, 4)).astype(np.float32)   # over the threshold: fed
    y = rng.randint(0, 10, size=BIG // 4).astype(np.int64)   # under it: a constant
    names = np.array([b"a", b"b"] * (BIG // 8))               # strings: a constant
    module = type("M", (), {"input_fn": staticmethod(_input_fn(x, y, names))})
    results, sizes = [], []
    for feeds in (None, {}):
        with tf.Graph().as_default() as graph:
            ds = scriptmod.call_input_fn(module, "s.py", "train", 32, {}, feeds)
            sizes.append(graph.as_graph_def().ByteSize())
            results.append(_batches(ds, feeds, 3))
        if feeds is not None:
            assert [a is x for a in feeds.values()] == [True]
    assert sizes[0] - sizes[1] >= x.nbytes  # the array is not in the graph; the labels and names are
    for (features0, labels0), (features1, labels1) in zip(*results):
        np.testing.assert_array_equal(features0["x"], features1["x"])
        np.testing.assert_array_equal(features0["name"], features1["name"])
        np.testing.assert_array_equal(labels0, labels1)


def test_from_tensors_and_the_v1_constructor_are_lifted_too_and_small_arrays_are_not():
    big = np.arange(BIG, dtype=np.float32)
    small = np.arange(10, dtype=np.float32)
    feeds = {}
    with tf.Graph().as_default(), array_feeds.lifted(feeds):
        tf.data.Dataset.from_tensors(big)
        v1.data.Dataset.from_tensor_slices((big.astype(np.int32), big < 5))
        tf.data.Dataset.from_tensor_slices(small)
        tf.data.Dataset.from_tensor_slices(big.astype(np.float64).tolist()[:10])  # a list: left as it is
    assert sorted(str(p.dtype.name) for p in feeds) == ["float32", "int32"]


def test_the_constructors_are_restored_even_when_the_input_fn_raises():
    before = (tf.data.Dataset.__dict__["from_tensor_slices"], tf.data.Dataset.__dict__["from_tensors"])

    def failing(split, batch_size, params):
        tf.data.Dataset.from_tensor_slices(np.zeros(BIG, np.float32))
        raise ValueError("no such column")

    module = type("M", (), {"input_fn": staticmethod(failing)})
    with tf.Graph().as_default(), pytest.raises(scriptmod.ScriptError, match="no such column"):
        scriptmod.call_input_fn(module, "s.py", "train", 32, {}, {})
    assert (tf.data.Dataset.__dict__["from_tensor_slices"], tf.data.Dataset.__dict__["from_tensors"]) == before
    with tf.Graph().as_default() as graph:
        tf.data.Dataset.from_tensor_slices(np.zeros(BIG, np.float32))
        assert not [op for op in graph.get_operations() if op.type == "Placeholder"]


def test_input_fns_on_two_threads_each_feed_their_own_arrays_and_leave_the_constructors_as_they_were():
    # The evaluator builds its extra scorers on threads, each calling the script's input_fn.
    import threading

    before = tf.data.Dataset.__dict__["from_tensor_slices"]
    results, errors = {}, []

    def build(k):
        try:
            feeds = {}
            with tf.Graph().as_default():
                module = type("M", (), {"input_fn": staticmethod(
                    lambda split, batch_size, params: tf.data.Dataset.from_tensor_slices(
                        (np.full(BIG, k, np.float32), np.zeros(BIG, np.int32))).batch(batch_size))})
                ds = scriptmod.call_input_fn(module, "s.py", "test", 8, {}, feeds)
                results[k] = (feeds, _batches(ds, feeds, 1)[0][0][0])
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=build, args=(k,)) for k in (1, 2, 3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for k, (feeds, first) in results.items():
        assert len(feeds) == 2 and all(a.flat[0] == k for a in feeds.values() if a.dtype == np.float32)
        assert first == k
    assert tf.data.Dataset.__dict__["from_tensor_slices"] is before
