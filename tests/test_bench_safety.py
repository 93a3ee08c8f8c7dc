"""bench/safety.py --add-to: a cell measured over several calls (seeds split) is counted as one."""

import json

import pytest

from bench import safety


def _result(tmp_path, seeds, first_seed=0):
    """A result file of one workload and two variants whose runs are folders with a summary.json each."""
    cell = {}
    for name, accuracy in (("bsp", 0.9), ("in-place+guard", 0.8)):
        dirs = []
        for seed in range(first_seed, first_seed + seeds):
            run_dir = tmp_path / f"{name}-s{seed}"
            run_dir.mkdir()
            (run_dir / "summary.json").write_text(json.dumps({"status": "completed", "final_accuracy": accuracy,
                                                              "total_time_s": 10.0 + seed}))
            dirs.append(str(run_dir))
        cell[name] = {"run_dirs": dirs}
    path = tmp_path / "earlier.json"
    path.write_text(json.dumps({"seeds": seeds, "first_seed": first_seed, "variants": list(cell),
                                "workloads": {"memory_gru-2": cell}}))
    return str(path)


def test_the_earlier_runs_are_read_back_from_their_folders(tmp_path):
    earlier = safety.earlier_runs(_result(tmp_path, 3), ["memory_gru-2"], {"bsp": 0, "in-place+guard": 0})
    assert earlier["seeds"] == 3 and earlier["first_seed"] == 0
    runs = earlier["runs"]["memory_gru-2"]
    assert [r["total_time_s"] for r in runs["bsp"]] == [10.0, 11.0, 12.0]
    assert all(r["run_dir"].endswith(f"s{i}") for i, r in enumerate(runs["in-place+guard"]))
    stats = safety._variant_stats(runs["bsp"])
    assert stats["final_accuracy"]["n"] == 3 and stats["total_time_s"]["median"] == 11.0


def test_another_cell_is_refused(tmp_path):
    path = _result(tmp_path, 2)
    with pytest.raises(SystemExit, match="--add-to"):
        safety.earlier_runs(path, ["plain_cnn-2"], {"bsp": 0, "in-place+guard": 0})
    with pytest.raises(SystemExit, match="--add-to"):
        safety.earlier_runs(path, ["memory_gru-2"], {"bsp": 0})


def test_no_file_no_runs():
    assert safety.earlier_runs(None, ["memory_gru-2"], {"bsp": 0}) == {}


def _run(seed, time_s, variant="in-place+guard", **summary):
    return {"status": "completed", "total_time_s": time_s, "run_dir": f"/runs/{variant}-s{seed}", **summary}


def test_times_are_paired_with_the_same_seeds_bsp_run_by_outcome():
    bsp = [_run(0, 10.0, "bsp"), _run(1, 20.0, "bsp"), _run(2, 10.0, "bsp")]
    back = {"reason": "slower", "action": "fall back at 52.0%, continue with bsp"}
    stay = {"decisions": [{"action": "stay", "reason": "staying synchronous: asp measured 0.55x"}]}
    runs = [_run(1, 18.0, switches=[{"at_fraction": 0.5}]),  # seed 1 first: pairing goes by seed, not by order
            _run(0, 12.0, switches=[{"at_fraction": 0.5}, {"at_fraction": 0.55}], guard_events=[back]),
            _run(2, 9.0, switch_rule=stay)]
    times = safety.same_seed_times(bsp, runs)
    assert times["all"]["runs"] == [0.9, 1.2, 0.9]
    assert times["switched"]["runs"] == [0.9] and times["went back"]["runs"] == [1.2]
    assert times["stayed"]["runs"] == [0.9] and "repaired" not in times
    assert [safety.outcome(r) for r in runs] == ["switched", "went back", "stayed"]
    assert safety.outcome(_run(3, 1.0, guard_events=[{"reason": "loss", "action": "rollback to 40.0%"}])) == "repaired"
    assert safety.outcome(_run(3, 1.0, guard_events=[{"reason": "slower", "action": "no action: no rung"}],
                               switches=[{"at_fraction": 0.5}])) == "switched"


def test_a_recurring_variant_runs_with_the_speed_its_twins_trials_measured(tmp_path):
    from bench import common

    spec = common.load_spec(safety.WORKLOADS["plain_cnn-2"][0])
    assert safety.stored_speed_spec(spec, []) is spec  # no trial yet: nothing stored, the spec as it is
    twins = []
    for seed, ratio in enumerate((0.6, 0.5, 0.7)):
        run_dir = tmp_path / f"in-place+guard-s{seed}"
        run_dir.mkdir()
        trial = {"action": "back", "values": {"source": "trial", "target": "lookahead", "ratio": ratio}}
        (run_dir / "summary.json").write_text(json.dumps({"switch_speed": {"decisions": [trial]}}))
        twins.append({"run_dir": str(run_dir)})
    stored = safety.stored_speed_spec(spec, twins)
    assert stored.policy.switch_speed.known == (("lookahead", 0.6, 3),)  # the store's median over the trials


def test_a_recurring_variant_needs_its_twin_before_it():
    chosen = {"bsp": 0, "in-place+guard": ("switch", [])}
    assert safety.recurring_variants(["bsp", "in-place+guard", "recurring+guard"], chosen) == {
        "recurring+guard": ("switch", [])}
    with pytest.raises(SystemExit, match="needs in-place\\+guard among the variants, before it"):
        safety.recurring_variants(["bsp", "recurring+guard", "in-place+guard"], chosen)
    with pytest.raises(SystemExit, match="needs in-place>asp\\+guard"):
        safety.recurring_variants(["bsp", "recurring>asp+guard"], chosen)
