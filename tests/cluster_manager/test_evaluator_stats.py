"""Converged accuracy (paper: no change over 0.1% across five evaluations) and time-to-accuracy."""

import pytest

from syncswitch.cluster_manager.evaluator import converged_accuracy, time_to_accuracy


def test_first_stable_window_defines_converged_accuracy():
    accs = [0.5, 0.7, 0.80, 0.8005, 0.801, 0.8008, 0.8002, 0.85]
    value, index = converged_accuracy(accs)
    assert (value, index) == (0.8002, 6)


def test_never_stable_falls_back_to_mean_of_last_five():
    accs = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]
    value, index = converged_accuracy(accs)
    assert index is None and value == pytest.approx(0.5)
    assert converged_accuracy([]) == (None, None)


def test_time_to_accuracy():
    evals = [{"time_s": 1.0, "accuracy": 0.3}, {"time_s": 2.0, "accuracy": 0.81}, {"time_s": 3.0, "accuracy": 0.9}]
    assert time_to_accuracy(evals, 0.8) == 2.0
    assert time_to_accuracy(evals, 0.95) is None
    assert time_to_accuracy(evals, None) is None
