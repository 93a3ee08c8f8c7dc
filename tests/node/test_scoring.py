"""The evaluator's classes from a script's logits and labels, for every shape a script may use, against numpy."""

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from syncswitch.node.scoring import correct_count, predicted_classes, true_classes  # noqa: E402

RNG = np.random.RandomState(0)
MULTI = RNG.randn(50, 4).astype(np.float32)
IDS = RNG.randint(0, 4, size=50)
ONE = RNG.randn(50).astype(np.float32)
BITS = RNG.randint(0, 2, size=50)


@pytest.mark.parametrize("logits, labels, expected", [
    (MULTI, IDS, (MULTI.argmax(1) == IDS).sum()),                                     # integer ids
    (MULTI, IDS[:, None], (MULTI.argmax(1) == IDS).sum()),                            # ids as a column
    (MULTI, np.eye(4, dtype=np.float32)[IDS], (MULTI.argmax(1) == IDS).sum()),        # one-hot rows
    (ONE[:, None], BITS[:, None].astype(np.float32), ((ONE > 0) == BITS).sum()),      # one sigmoid logit, a column
    (ONE, BITS, ((ONE > 0) == BITS).sum()),                                           # [batch] logits, int labels
    (ONE[:, None], np.where(BITS, 0.9, 0.1).astype(np.float32), ((ONE > 0) == BITS).sum()),  # soft targets
])
def test_correct_count_matches_numpy(logits, labels, expected):
    assert int(correct_count(tf.constant(logits), tf.constant(labels))) == expected


def test_a_single_logit_column_is_not_an_argmax():
    # The defect: argmax over one column calls every example class 0, so a binary model scored 1.0 against
    # column labels (themselves argmaxed to 0) whatever it predicted.
    logits = tf.constant([[2.0], [-1.0], [0.5]])
    assert predicted_classes(logits).numpy().tolist() == [1, 0, 1]
    assert true_classes(tf.constant([[1.0], [1.0], [0.0]]), binary=True).numpy().tolist() == [1, 1, 0]
    assert int(correct_count(logits, tf.constant([[1.0], [1.0], [0.0]]))) == 1


def test_labels_of_unknown_width_are_told_apart_when_they_arrive():
    column = tf.function(lambda t: true_classes(t, binary=False),
                         input_signature=[tf.TensorSpec([None, None], tf.int64)])
    assert column(tf.constant([[2], [0]], tf.int64)).numpy().tolist() == [2, 0]
    assert column(tf.constant([[0, 0, 1], [1, 0, 0]], tf.int64)).numpy().tolist() == [2, 0]
