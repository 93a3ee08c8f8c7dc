"""Converged accuracy (paper: no change over 0.1% across five evaluations; one definition for runs and traces)
and TTA."""

import pytest

from syncswitch.metrics import converged_accuracy, time_to_accuracy


def test_final_plateau_defines_converged_accuracy():
    # A plateau before an LR decay that the run later leaves is not convergence.
    accs = [0.5, 0.70, 0.7002, 0.7001, 0.7003, 0.7, 0.80, 0.8005, 0.801, 0.8008, 0.8002, 0.8004]
    assert converged_accuracy(accs) == (0.8002, True)


def test_never_stable_falls_back_to_the_final_evaluation():
    assert converged_accuracy([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]) == (0.7, False)
    assert converged_accuracy([]) == (None, False)


def test_time_to_accuracy():
    evals = [{"time_s": 1.0, "accuracy": 0.3}, {"time_s": 2.0, "accuracy": 0.81}, {"time_s": 3.0, "accuracy": 0.9}]
    assert time_to_accuracy(evals, 0.8) == 2.0
    assert time_to_accuracy(evals, 0.95) is None
    assert time_to_accuracy(evals, None) is None


def test_time_to_accuracy_takes_the_earliest_whatever_the_order():
    # the evaluator scores the newest checkpoint first: the list may be out of order
    evals = [{"time_s": 3.0, "accuracy": 0.9}, {"time_s": 1.0, "accuracy": 0.3}, {"time_s": 2.0, "accuracy": 0.81}]
    assert time_to_accuracy(evals, 0.8) == 2.0


def test_reference_target_is_the_median_less_the_margin():
    from syncswitch.metrics import TARGET_MARGIN, reference_target

    # one collapsed reference run does not move the bar (a mean would drop it by 20 points)
    assert reference_target([0.9, 0.92, 0.3]) == pytest.approx(0.9 - TARGET_MARGIN)
    assert reference_target([None]) is None and reference_target([]) is None


def test_median_time_to_accuracy_counts_misses_as_late():
    from syncswitch.metrics import median_time_to_accuracy

    assert median_time_to_accuracy([10.0, None, 20.0]) == 20.0
    assert median_time_to_accuracy([10.0, None, None]) is None
    assert median_time_to_accuracy([10.0, 30.0]) == 20.0
    assert median_time_to_accuracy([]) is None
