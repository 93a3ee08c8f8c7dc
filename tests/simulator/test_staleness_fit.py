"""An arrival model's per-update staleness against a real run's record: the record read, the model's updates, the
chi-square and the shape."""

from __future__ import annotations

import numpy as np
import pytest

from syncswitch.simulator.arrivals import arrival_model
from syncswitch.simulator.cores import asp_staleness, simulated_staleness
from syncswitch.simulator.staleness_fit import chi_square, counted_staleness, counts, model_staleness, shape


def test_the_counted_staleness_is_the_updates_between_the_read_and_the_landing():
    log = {"read": [0, 3, 7, 9], "arrival": [2, 3, 8, 9], "landed": [2, 6, 9, 8], "worker": [1, 0, 1, 0]}
    assert counted_staleness({"update_log": log}).tolist() == [2, 3, 2, 0]


def test_a_phase_without_the_record_is_a_clear_error():
    with pytest.raises(ValueError, match="SYNCSWITCH_UPDATE_LOG=1"):
        counted_staleness({"staleness_mean": 1.7, "updates": 900})


def test_the_per_update_staleness_is_what_the_calibration_averages():
    model = arrival_model("speeds:0.2+cores:1:q=0.5", 4, 3)
    stale = asp_staleness(model, 4, 1, 0.5, 1000)
    assert len(stale) == 1000 and min(stale) >= 0
    assert np.mean(stale) == simulated_staleness(model, 4, 1, 0.5, 1000)


def test_counts_put_the_tail_in_the_last_bin():
    assert counts([0, 1, 1, 10, 37], bins=11).tolist() == [1, 2] + [0] * 8 + [2]


def test_chi_square_is_zero_for_the_same_pmf_and_grows_with_the_difference():
    real = [0, 1, 1, 2, 2, 2, 3, 12]
    assert chi_square(real, real * 3) == 0.0
    near, far = real[:-1] + [3], [0] * 8
    assert 0 < chi_square(real, near * 3) < chi_square(real, far)


def test_a_stall_model_at_the_same_mean_has_the_longer_tail():
    plain = model_staleness("speeds:0.2+cores:1:staleness=1.7", 4, range(2), 1000)
    held = model_staleness("speeds:0.2+cores:1:staleness=1.7:stall=0.16/1.5", 4, range(2), 1000)
    assert len(plain) == len(held) == 2000
    assert plain.mean() == pytest.approx(1.7, abs=0.1) and held.mean() == pytest.approx(1.7, abs=0.1)
    assert shape(held)["p_ge6"] > shape(plain)["p_ge6"] and held.max() > plain.max()
    again = model_staleness("speeds:0.2+cores:1:staleness=1.7:stall=0.16/1.5", 4, range(2), 1000)
    assert np.array_equal(held, again)  # the seed fixes it


def test_shape_reports_the_bins_the_notebooks_compare():
    s = shape([0, 1, 1, 2, 4, 6])
    assert (s["updates"], s["max"], s["p1"], s["p_ge4"], s["p_ge6"]) == (6, 6, round(2 / 6, 4), round(2 / 6, 4),
                                                                         round(1 / 6, 4))
