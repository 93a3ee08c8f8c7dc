"""Binary search on synthetic monotone accuracy curves: knee, M, beta, early stop, reuse, events."""

from __future__ import annotations

import pytest

from syncswitch.search.binary_search import (PilotResult, SearchError, binary_search, bisect, dyadic_grid, snap,
                                             within)
from syncswitch.search.store import JsonPilotCache

BSP_ACC = 0.92


def knee_curve(knee: float, drop: float = 0.05):
    """Accuracy rises linearly to BSP's level at `knee` and stays there (the paper's Fig. 5b shape)."""
    return lambda s: BSP_ACC - drop * max(0.0, knee - s) / knee


class Pilots:
    """Deterministic pilots: time grows with the BSP share (BSP is 6x slower than ASP here)."""

    def __init__(self, curve):
        self.curve = curve
        self.calls: list[tuple[float, int]] = []

    def __call__(self, s: float, repeat: int) -> PilotResult:
        self.calls.append((s, repeat))
        return PilotResult(self.curve(s), 100.0 + 500.0 * s, f"/runs/{s}-{repeat}")


def earliest_passing(grid, curve, beta):
    return min((g for g in grid if abs(curve(g) - BSP_ACC) <= beta + 1e-12), default=1.0)


@pytest.mark.parametrize("knee", [0.05, 0.1, 0.2, 0.33, 0.6])
def test_finds_the_knee_on_the_grid(knee):
    curve = knee_curve(knee)
    result = binary_search(Pilots(curve), max_settings=6, threshold=0.01, runs=1, bsp_runs=1)
    assert result.switch_at == earliest_passing(dyadic_grid(6), curve, 0.01)
    assert result.target_accuracy == pytest.approx(BSP_ACC)
    assert result.chosen is not None and result.chosen.accepted


def test_respects_max_settings_and_counts_every_pilot():
    pilots = Pilots(knee_curve(0.2))
    result = binary_search(pilots, max_settings=4, runs=3, bsp_runs=2)
    assert len(result.points) == 4
    assert result.stopped == "max-settings"
    assert result.runs == len(pilots.calls) == 2 + 4 * 3
    assert [p.switch_at for p in result.points][:2] == [0.5, 0.25]
    assert result.cost_s == pytest.approx(sum(100.0 + 500.0 * s for s, _ in pilots.calls))
    assert result.cost_bsp == pytest.approx(result.cost_s / 600.0)


def test_larger_beta_allows_an_earlier_switch():
    curve = knee_curve(0.3, drop=0.06)
    tight = binary_search(Pilots(curve), max_settings=7, threshold=0.005, bsp_runs=1)
    loose = binary_search(Pilots(curve), max_settings=7, threshold=0.03, bsp_runs=1)
    assert loose.switch_at < tight.switch_at
    for r, beta in ((tight, 0.005), (loose, 0.03)):
        assert all(p.accepted == (abs(p.mean_accuracy - BSP_ACC) <= beta) for p in r.points)


def test_no_switch_keeps_accuracy_returns_bsp():
    result = binary_search(Pilots(lambda s: 0.5 if s < 1 else BSP_ACC), max_settings=3, bsp_runs=1)
    assert result.switch_at == 1.0
    assert [p.switch_at for p in result.points] == [0.5, 0.75, 0.875]
    assert result.chosen is None


def test_stops_early_when_the_grid_is_exhausted():
    pilots = Pilots(knee_curve(0.1))
    result = binary_search(pilots, max_settings=10, grid=[0.25, 0.5, 0.75], bsp_runs=1)
    assert result.stopped == "grid-exhausted"
    assert [p.switch_at for p in result.points] == [0.5, 0.25]
    assert result.switch_at == 0.25
    assert len(pilots.calls) == 3


def test_snap_prefers_the_earlier_switch_on_a_tie():
    assert snap(0.0, 0.25, [0.1, 0.15, 0.2]) == 0.1  # midpoint 0.125 is equally far from 0.1 and 0.15
    assert snap(0.0, 0.1, [0.1, 0.2]) is None  # nothing strictly inside
    upper, tried, why = bisect([0.02, 0.05, 0.1, 0.25, 0.5], 5, lambda s: s >= 0.05)
    assert (upper, tried, why) == (0.05, [0.5, 0.25, 0.1, 0.05, 0.02], "max-settings")


def test_given_target_skips_bsp_references_and_cost_uses_given_bsp_time():
    pilots = Pilots(knee_curve(0.2))
    result = binary_search(pilots, max_settings=3, target_accuracy=BSP_ACC, bsp_runs=0, bsp_time_s=600.0)
    assert all(s != 1.0 for s, _ in pilots.calls)
    assert result.reference == ()
    assert result.cost_bsp == pytest.approx(result.cost_s / 600.0)


def test_reuses_cached_pilots_and_reports_progress():
    cache: dict = {}
    events: list[tuple[str, dict]] = []
    first = binary_search(Pilots(knee_curve(0.2)), max_settings=4, runs=2, bsp_runs=2, cache=cache)
    pilots = Pilots(knee_curve(0.2))
    second = binary_search(pilots, max_settings=4, runs=2, bsp_runs=2, cache=cache,
                           on_event=lambda kind, **info: events.append((kind, info)))
    assert pilots.calls == []
    assert second.new_runs == 0 and second.runs == first.runs
    assert second.switch_at == first.switch_at and second.cost_s == first.cost_s
    kinds = [k for k, _ in events]
    assert kinds.count("pilot_reused") == second.runs
    done = [i for k, i in events if k == "setting_done"]
    assert [d["switch_at"] for d in done] == [p.switch_at for p in second.points]
    assert all("mean_accuracy" in d and "accepted" in d for d in done)
    assert kinds[-1] == "done"


def test_more_candidate_runs_extend_a_cached_search(tmp_path):
    path = tmp_path / "pilots.json"
    binary_search(Pilots(knee_curve(0.2)), max_settings=3, runs=1, bsp_runs=1, cache=JsonPilotCache(path))
    pilots = Pilots(knee_curve(0.2))
    result = binary_search(pilots, max_settings=3, runs=2, bsp_runs=1, cache=JsonPilotCache(path))
    assert all(repeat == 1 for _, repeat in pilots.calls)  # only the new second run of each point
    assert result.new_runs == 3


def test_progress_events_name_the_running_point():
    events = []
    binary_search(Pilots(knee_curve(0.2)), max_settings=2, runs=1, bsp_runs=1,
                  on_event=lambda kind, **info: events.append((kind, info)))
    starts = [i for k, i in events if k == "pilot_start"]
    assert [(i["switch_at"], i["role"]) for i in starts] == [(1.0, "reference"), (0.5, "candidate"),
                                                              (0.25, "candidate")]


def test_a_failed_pilot_rejects_its_setting():
    def pilots(s, r):
        return PilotResult(None if s == 0.5 else BSP_ACC, 10.0)

    result = binary_search(pilots, max_settings=2, bsp_runs=1)
    assert not result.points[0].accepted and result.points[0].mean_accuracy is None
    assert result.switch_at == 0.75


def test_a_pilot_the_guard_rolled_back_fails_its_setting():
    # The guard fell back to BSP: the run's accuracy is BSP's, but the switch at 0.25 did not hold.
    def pilots(s, r):
        return PilotResult(BSP_ACC, 10.0, rolled_back=s < 0.5)

    events = []
    result = binary_search(pilots, max_settings=3, bsp_runs=1, on_event=lambda kind, **i: events.append((kind, i)))
    assert [(p.switch_at, p.accepted) for p in result.points] == [(0.5, True), (0.25, False), (0.375, False)]
    assert result.switch_at == 0.5
    done = [i for kind, i in events if kind == "pilot_done" and i["switch_at"] == 0.25]
    assert done and done[0]["rolled_back"] is True


def test_two_sided_margin_as_in_algorithm_1():
    assert within(0.92, 0.92, 0.01) and within(0.9101, 0.92, 0.01)
    assert not within(0.935, 0.92, 0.01)
    assert within(0.935, 0.92, 0.01, two_sided=False)
    assert not within(float("nan"), 0.92, 0.01)


@pytest.mark.parametrize("kwargs, field", [
    ({"max_settings": 0}, "max_settings"), ({"threshold": -0.1}, "threshold"), ({"runs": 0}, "runs"),
    ({"bsp_runs": 0}, "bsp_runs"), ({"grid": [0.0, 0.5]}, "grid"), ({"target_accuracy": 2.0}, "target_accuracy"),
])
def test_invalid_parameters_name_the_field(kwargs, field):
    with pytest.raises(SearchError, match=field):
        binary_search(Pilots(knee_curve(0.2)), **kwargs)


def test_all_reference_runs_failing_is_a_clear_error():
    with pytest.raises(SearchError, match="BSP reference"):
        binary_search(lambda s, r: PilotResult(None, 1.0), bsp_runs=2)


def test_bsp_references_that_did_not_train_set_no_target(tmp_path):
    # The quickstart at 32 workers as shipped: BSP completes at chance (0.10-0.18), the loss never falls; the search
    # had taken that as its target and accepted every switch point against it.
    def pilots(s, r):
        return PilotResult(0.14, 1.0, f"/runs/{s}-{r}", learned=False)

    with pytest.raises(SearchError, match=r"3 of 3 BSP reference run\(s\) did not train .*/runs/1.0-0/metrics.jsonl"):
        binary_search(pilots, bsp_runs=3)


def test_a_pilot_that_did_not_train_neither_sets_the_target_nor_vouches_for_a_point():
    def pilots(s, r):
        untrained = (s, r) == (1.0, 1) or s == 0.25
        return PilotResult(0.14 if untrained else BSP_ACC, 10.0, f"/runs/{s}-{r}", learned=not untrained)

    events = []
    result = binary_search(pilots, max_settings=3, bsp_runs=2, on_event=lambda kind, **i: events.append((kind, i)))
    assert result.target_accuracy == BSP_ACC and result.reference_runs == ("/runs/1.0-0",)
    assert [(p.switch_at, p.accepted) for p in result.points] == [(0.5, True), (0.25, False), (0.375, True)]
    assert [i["learned"] for kind, i in events if kind == "pilot_done" and i["switch_at"] == 0.25] == [False]
    unknown = PilotResult(BSP_ACC, 1.0)  # a folder without loss reports: not held against the pilot
    assert unknown.learned is None and unknown.ok


def test_the_completed_bsp_references_are_the_result_s_reference_runs():
    def pilots(s, r):
        return PilotResult(None if (s, r) == (1.0, 1) else BSP_ACC, 10.0, f"/runs/{s}-{r}")

    result = binary_search(pilots, max_settings=2, runs=1, bsp_runs=3)
    assert result.reference_runs == ("/runs/1.0-0", "/runs/1.0-2")  # the failed one is no reference
    assert binary_search(Pilots(knee_curve(0.2)), max_settings=2, target_accuracy=0.9).reference_runs == ()


def test_a_pilot_whose_target_was_slower_stops_the_search_at_bsp(tmp_path):
    calls = []

    def pilots(s, repeat):
        calls.append(s)
        # The BSP reference has nothing to switch; every switched pilot's trial finds the target slower.
        return PilotResult(BSP_ACC, 100.0, f"/runs/{s}-{repeat}", slower=s < 1.0)

    cache = JsonPilotCache(tmp_path / "pilots.json")
    result = binary_search(pilots, max_settings=5, threshold=0.01, runs=2, bsp_runs=1, cache=cache)
    assert result.switch_at == 1.0 and result.stopped == "target-slower"
    assert calls == [1.0, 0.5, 0.5]  # one setting is enough: the verdict holds at any switch point
    (point,) = result.points
    assert point.switch_at == 0.5 and not point.accepted
    assert JsonPilotCache(tmp_path / "pilots.json")[(0.5, 0)].slower  # and a cached search reads it back


def test_one_noisy_trial_that_went_back_fails_its_point_but_does_not_end_the_search():
    """Five trials measured the target faster, one (the 0.25 point's last pilot) slower: the target is not slower,
    but that pilot ran BSP from its trial's start, so its point cannot be accepted; the search goes on above it."""

    def pilots(s, repeat):
        if s == 1.0:
            return PilotResult(BSP_ACC, 100.0, f"/runs/{s}-{repeat}")
        return PilotResult(BSP_ACC, 80.0, f"/runs/{s}-{repeat}", slower=(s, repeat) == (0.25, 2), switched=True)

    result = binary_search(pilots, max_settings=3, threshold=0.01, runs=3, bsp_runs=1)
    assert result.stopped != "target-slower"
    accepted = {p.switch_at: p.accepted for p in result.points}
    assert accepted[0.5] and not accepted[0.25] and 0.25 < result.switch_at <= 0.5


def test_the_target_counts_as_slower_where_most_trials_so_far_found_it_so():
    def pilots(s, repeat):
        if s == 1.0:
            return PilotResult(BSP_ACC, 100.0, f"/runs/{s}-{repeat}")
        return PilotResult(BSP_ACC, 80.0, f"/runs/{s}-{repeat}", slower=repeat < 2, switched=True)

    result = binary_search(pilots, max_settings=3, threshold=0.01, runs=3, bsp_runs=1)
    assert result.switch_at == 1.0 and result.stopped == "target-slower" and len(result.points) == 1
