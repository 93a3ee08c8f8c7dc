"""The longest local-SGD period a job keeps its accuracy with (search/period_search.py), on deterministic pilots."""

from __future__ import annotations

import pytest

from syncswitch.search.binary_search import PilotResult, SearchError, cache_key
from syncswitch.search.period_search import check_periods, longest_period

# Accuracy and seconds per period, as MNIST-1D's measured shape: longer periods train faster; past some period the
# copies drift too far apart.
SHAPE = {2: (0.965, 26.7), 4: (0.966, 20.0), 8: (0.940, 17.5), 16: (0.930, 16.0)}


def pilots(shape, ran):
    def pilots_for(period):
        def run_pilot(switch_at, repeat):
            ran.append((period, switch_at, repeat))
            accuracy, seconds = shape[period]
            return PilotResult(accuracy + 0.001 * repeat, seconds, f"p{period}-{repeat}", switched=True)

        return run_pilot, caches.setdefault(period, {})

    caches: dict = {}
    return pilots_for, caches


def search(shape, periods, ran, base_times=(26.7, 26.7), runs=2, **kw):
    pilots_for, caches = pilots(shape, ran)
    return longest_period(pilots_for, 0.25, 2, list(base_times), periods, runs=runs, target=0.965, threshold=0.01,
                          **kw), caches


def test_it_keeps_the_longest_period_within_the_margin_and_stops_at_the_first_outside():
    ran: list = []
    found, caches = search(SHAPE, [16, 4, 8], ran)
    assert found.period == 4
    assert [(t.period, t.accepted, t.why) for t in found.trials] == [(4, True, "kept"), (8, False, "accuracy")]
    assert {p for p, _, _ in ran} == {4, 8}  # 16 never ran: a longer period only drifts further
    assert all(s == 0.25 for _, s, _ in ran) and found.new_runs == 4
    assert found.cost_s == pytest.approx(2 * 20.0 + 2 * 17.5)


def test_a_period_no_faster_than_the_last_kept_is_not_kept():
    flat = {**SHAPE, 4: (0.966, 27.0)}  # averages cost nothing on this cluster: no speed to buy with the risk
    found, _ = search(flat, [4, 8], [])
    assert found.period == 2 and [(t.period, t.why) for t in found.trials] == [(4, "slower")]


def test_a_failed_or_rolled_back_pilot_fails_its_period():
    ran: list = []
    pilots_for, caches = pilots(SHAPE, ran)
    caches[4] = {cache_key(0.25, 0): PilotResult(0.97, 20.0, "x", rolled_back=True)}
    found = longest_period(pilots_for, 0.25, 2, [26.7], [4], runs=2, target=0.965, threshold=0.01)
    assert found.period == 2 and found.trials[0].accuracies[0] is None and found.trials[0].why == "accuracy"
    assert ran == [(4, 0.25, 1)]  # the cached pilot was reused, not run again


def test_a_pilot_sent_back_to_bsp_by_its_speed_trial_stops_the_periods():
    pilots_for, caches = pilots(SHAPE, [])
    caches[4] = {cache_key(0.25, 0): PilotResult(0.966, 20.0, "x", slower=True)}
    found = longest_period(pilots_for, 0.25, 2, [26.7], [4, 8], runs=1, target=0.965, threshold=0.01)
    assert found.period == 2 and [(t.period, t.why) for t in found.trials] == [(4, "slower")]


def test_one_noisy_trial_fails_its_period_but_the_search_goes_on_to_the_next():
    # A 4-worker MLP's local SGD measured 1.15-1.47x BSP in five trials and 0.91x in a sixth: one trial is noise.
    shape = {**SHAPE, 8: (0.965, 17.5)}
    ran: list = []
    pilots_for, caches = pilots(shape, ran)
    caches[4] = {cache_key(0.25, 1): PilotResult(0.966, 20.0, "x", slower=True, switched=True)}
    found = longest_period(pilots_for, 0.25, 2, [26.7], [4, 8], runs=3, target=0.965, threshold=0.01)
    assert [(t.period, t.accepted, t.why) for t in found.trials] == [(4, False, "went back"), (8, True, "kept")]
    assert found.period == 8 and {p for p, _, _ in ran} == {4, 8}


def test_the_periods_stop_where_most_trials_so_far_went_back():
    shape = {**SHAPE, 8: (0.965, 17.5), 16: (0.965, 16.0)}
    back = PilotResult(0.966, 20.0, "x", slower=True, switched=True)

    def periods(went_back_at_8):
        pilots_for, caches = pilots(shape, [])
        caches[4] = {cache_key(0.25, 1): back}
        caches[8] = {cache_key(0.25, r): back for r in went_back_at_8}
        found = longest_period(pilots_for, 0.25, 2, [26.7], [4, 8, 16], runs=3, target=0.965, threshold=0.01)
        return found.period, [(t.period, t.why) for t in found.trials]

    # 2 of 6 trials went back by period 8: noise; period 16's clean pilots keep it.
    assert periods([0]) == (16, [(4, "went back"), (8, "went back"), (16, "kept")])
    # 4 of 6: the target is slower at these periods; nothing longer is tried.
    assert periods([0, 1, 2]) == (2, [(4, "went back"), (8, "slower")])


def test_only_periods_longer_than_the_jobs_own_are_tried_and_bad_ones_are_named():
    assert check_periods([8, 1, 2, 4, 4], 2) == (4, 8)
    with pytest.raises(SearchError, match="--periods: 0 is not a local-SGD period"):
        check_periods([4, 0], 2)
    found, _ = search(SHAPE, [1, 2], [])
    assert found.period == 2 and found.trials == ()


def test_a_period_whose_pilot_never_left_bsp_is_not_kept():
    # The speed rule kept a pilot synchronous (the quickstart's: a trial would cost more than it could win back): it
    # ran no local SGD, so its accuracy and time say nothing of the period.
    pilots_for, caches = pilots(SHAPE, [])
    caches[4] = {cache_key(0.25, 0): PilotResult(0.966, 20.0, "x", switched=False)}
    found = longest_period(pilots_for, 0.25, 2, [26.7], [4, 8], runs=1, target=0.965, threshold=0.01)
    assert found.period == 2 and [(t.period, t.why) for t in found.trials] == [(4, "stayed on BSP")]
