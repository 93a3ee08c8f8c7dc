"""The training set's batches hold the batch_size syncswitch passed (node/batch_check.py): a script batching by a
constant of its own is a one-line ScriptError, a short last batch of an epoch is not."""

import numpy as np
import pytest

from syncswitch.errors import ScriptError
from syncswitch.node import batch_check

tf = pytest.importorskip("tensorflow")


def _pairs(n):
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    return tf.data.Dataset.from_tensor_slices((x, np.arange(n, dtype=np.int64)))


def _sizes(ds):
    return [int(labels.shape[0]) for _, labels in ds]


def test_a_static_batch_of_another_size_fails_at_once_naming_the_script_and_both_sizes():
    ds = _pairs(100).batch(64, drop_remainder=True)
    with pytest.raises(ScriptError, match=r"^script train\.py: input_fn\('train', 32, params\) gave a batch of 64 "
                                          r"examples: batch the training set by the batch_size argument"):
        batch_check.checked(ds, "train.py", 32, 100)


def test_a_static_batch_of_the_right_size_is_left_as_it_is():
    ds = _pairs(100).batch(32, drop_remainder=True)
    assert batch_check.checked(ds, "train.py", 32, 100) is ds


def test_batches_of_batch_size_with_a_short_last_one_pass_unchanged():
    ds = _pairs(100).batch(32)  # 32, 32, 32, 4: the end of an epoch
    assert _sizes(batch_check.checked(ds, "train.py", 32, 100)) == [32, 32, 32, 4]


@pytest.mark.parametrize("own", [64, 16])
def test_a_dynamic_batch_of_the_scripts_own_size_fails_on_its_first_batch(own):
    ds = batch_check.checked(_pairs(100).batch(own), "train.py", 32, 100)
    with pytest.raises(tf.errors.InvalidArgumentError) as failed:
        _sizes(ds)
    error = batch_check.from_error(failed.value, "/home/me/train.py")
    assert str(error) == batch_check.message("/home/me/train.py", 32, own)


def test_a_set_smaller_than_one_batch_or_of_unknown_size_may_start_short():
    # Fewer examples than a batch: the one-batch-per-worker error speaks for it (graph.py, task.py).
    assert _sizes(batch_check.checked(_pairs(20).batch(32), "train.py", 32, 20)) == [20]
    # No count (no num_examples, or a samples workload the task did not ask it for): a short first batch cannot be
    # told from a small set; only a larger one is an error.
    assert _sizes(batch_check.checked(_pairs(40).batch(16), "train.py", 32, None)) == [16, 16, 8]


def test_composite_features_and_dict_labels_are_checked_by_their_batch_dimension():
    ids = tf.ragged.constant([[1, 2], [3], [4, 5, 6]] * 20)
    ds = tf.data.Dataset.from_tensor_slices(({"ids": ids}, {"y": np.zeros(60, np.int64)})).batch(32)
    checked = batch_check.checked(ds, "train.py", 32, 60)  # counted through the labels' first tensor
    assert [int(labels["y"].shape[0]) for _, labels in checked] == [32, 28]
    with pytest.raises(tf.errors.InvalidArgumentError):
        list(batch_check.checked(ds, "train.py", 16, 60))


def test_other_errors_are_not_taken_for_the_check():
    assert batch_check.from_error(ValueError("assertion failed: [x] [64] [for] [32]"), "train.py") is None
