"""The scale part's ways to grow the cluster, and the simulated-vs-real statistics."""

from __future__ import annotations

import argparse
import itertools
import json
import math

import pytest

from bench import scale, scale_vs_real
from bench.common import spread
from syncswitch.errors import SpecError


class _Hp:
    batch_size, learning_rate = 32, 0.02


def test_a_fixed_global_batch_splits_the_batch_and_scales_the_rate_with_it():
    assert scale.fixed_global_batch(_Hp, 64, 8) == ["hyperparameters.batch_size=8",
                                                    "hyperparameters.learning_rate=0.005"]
    assert scale.fixed_global_batch(_Hp, 64, 2) == ["hyperparameters.batch_size=32",
                                                    "hyperparameters.learning_rate=0.02"]
    with pytest.raises(SpecError, match="not a multiple of 3 workers"):
        scale.fixed_global_batch(_Hp, 64, 3)


def test_at_a_fixed_global_batch_bsp_runs_the_same_updates_at_every_size(digits_job, tmp_path):
    """BSP at 2 and 4 workers with global batch 8: the same global batch, rate and number of updates."""
    configs = []
    for n in (2, 4):
        scale.run_one(digits_job, "bsp", n, 0, "speeds:0.2", str(tmp_path / f"{n}"), ["workload.epochs=1"], 1.0, 8)
        phase = json.load(open(tmp_path / f"{n}" / "summary.json"))["schedule"][0]
        configs.append((phase["config"]["global_batch"], phase["config"]["learning_rate"], phase["steps"]))
        assert phase["config"]["per_worker_batch"] == 8 // n
    assert configs[0] == configs[1] and configs[0][:2] == (8, pytest.approx(0.05 * 8 / 16))


def _args(tmp_path, **kw):
    parser = argparse.ArgumentParser()
    scale.add_options(parser)
    parser.add_argument("--out")
    return parser.parse_args([f"--{k.replace('_', '-')}={v}" for k, v in kw.items()])


def test_the_scale_part_refuses_a_global_batch_that_does_not_split_and_a_mixed_add_to(tmp_path):
    with pytest.raises(SpecError, match="--global-batch 64 is not a multiple of --workers 3"):
        scale.run_part(_args(tmp_path, workers="2,3", global_batch=64), str(tmp_path))
    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps({"args": {"weak": False}, "jobs": {}}))
    with pytest.raises(SpecError, match="grew the cluster as"):
        scale.run_part(_args(tmp_path, global_batch=64, add_to=earlier), str(tmp_path))
    assert "fixed global batch 64" in scale.mode_text({"global_batch": 64}) and "as shipped" in scale.mode_text({})


def test_the_chance_of_a_median_outside_the_others_spread_is_one_in_six_at_five_seeds_each():
    """Counted over every order of 5 + 5 runs: the simulated median (3rd simulated) below all real or above."""
    out = 0
    for sim in itertools.combinations(range(10), 5):
        real = [i for i in range(10) if i not in sim]
        out += not (min(real) <= sim[2] <= max(real))
    assert scale_vs_real.chance_miss(5, 5) == pytest.approx(out / math.comb(10, 5)) == pytest.approx(1 / 6)
    assert scale_vs_real.chance_miss(5, 10) < scale_vs_real.chance_miss(5, 5)


def test_the_rank_sum_p_is_exact_and_counts_ties_as_midranks():
    assert scale_vs_real.rank_p([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) == pytest.approx(2 / 252)
    assert scale_vs_real.rank_p([1, 2, 3], [1, 2, 3]) == 1.0
    assert scale_vs_real.rank_p([0.5, 0.6, 0.7, 0.9, 1.0], [0.55, 0.65, 0.75, 0.8, 0.95]) > 0.5
    # The test is discrete: at 5 + 5 its real level under "no difference" is below the nominal 0.05.
    assert 0.0 < scale_vs_real.rank_false_alarm(list(range(5)), list(range(5, 10))) < 0.05


def test_restat_adds_the_p_and_the_chance_counts_to_each_row():
    rows = [{"sim": {"runs": [1, 2, 3, 4, 5]}, "real": {"runs": [6, 7, 8, 9, 10]}},
            {"sim": {"runs": [1, 3, 5, 7, 9]}, "real": {"runs": [2, 4, 6, 8, 10]}}]
    stats = scale_vs_real.restat(rows)
    assert stats["rank_p_under_0_05"] == 1 and stats["expected_misses_by_chance"] == pytest.approx(1 / 3, abs=0.01)
    assert rows[1]["rank_p"] > 0.5


def _protocols_result(path, accuracies):
    runs = [{"seed": s, "status": "completed", "final_accuracy": a, "staleness_mean": None}
            for s, a in enumerate(accuracies)]
    path.write_text(json.dumps({"workers": 4, "jobs": {"quickstart": {"job": "jobs/quickstart.yaml", "variants": {
        "bsp": {"runs": runs}}}}}))
    return str(path)


def test_restat_with_real_records_the_committed_copies_only_when_every_row_is_theirs(tmp_path):
    """A comparison read /tmp copies of protocols results; --restat FILE --real COPY names the copies instead once
    each row's real runs are theirs, and refuses (one line, exit 2, the file unchanged) a file whose runs differ."""
    row = {"job": "quickstart", "workers": 4, "protocol": "bsp", "cores": "shared", "sim_staleness": None,
           "real_staleness": None, "within_real_spread": True, "sim": spread([0.7, 0.8, 0.9]),
           "real": spread([0.71, 0.81, 0.91])}
    result = tmp_path / "cmp.json"
    result.write_text(json.dumps({"real": ["/tmp/x.json"], "rows": [row]}))
    same, other = _protocols_result(tmp_path / "same.json", [0.71, 0.81, 0.91]), _protocols_result(
        tmp_path / "other.json", [0.71, 0.81, 0.92])
    with pytest.raises(SystemExit) as stop:
        scale_vs_real.main(["--restat", str(result), "--real", other])
    assert stop.value.code == 2 and json.loads(result.read_text())["real"] == ["/tmp/x.json"]
    assert scale_vs_real.main(["--restat", str(result), "--real", same]) == 0
    doc = json.loads(result.read_text())
    assert doc["real"] == [same] and doc["real_was"] == ["/tmp/x.json"] and "rank_p" in doc["rows"][0]


def test_a_bad_arrival_model_is_named_before_anything_runs(tmp_path, capsys):
    real = _protocols_result(tmp_path / "real.json", [0.71, 0.81, 0.91])
    with pytest.raises(SystemExit) as stop:
        scale_vs_real.main(["--real", real, "--arrivals", "speeds:0.1:block=0", "--runs-dir", str(tmp_path / "r")])
    assert stop.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "scale-vs-real: --arrivals speeds:0.1:block=0: jitter must be between 0 and 3 and block a whole number >= 1"]
    assert not (tmp_path / "r").exists()


def _run(variant, workers, seed, accuracy):
    return {"variant": variant, "workers": workers, "seed": seed, "final_accuracy": accuracy, "guard_events": []}


def test_at_a_fixed_global_batch_the_bsp_reference_pools_every_size():
    """BSP's runs at 2 and 4 workers are one training: the reference is their pooled median (0.80), so ASP at 0.785
    falls below it from 4 workers even where BSP's 4-worker seeds alone happen to sit at 0.79."""
    runs = [_run("bsp", 2, s, a) for s, a in enumerate([0.80, 0.81, 0.82])]
    runs += [_run("bsp", 4, s, a) for s, a in enumerate([0.78, 0.79, 0.80])]
    runs += [_run("asp", 2, s, 0.80) for s in range(3)] + [_run("asp", 4, s, 0.785) for s in range(2)]
    text, per_size = scale.table("j", runs, [2, 4])
    assert per_size["below_bsp_from"]["asp"] is None and per_size["bsp_reference"] is None
    text, pooled = scale.table("j", runs, [2, 4], pooled=True)
    assert pooled["below_bsp_from"]["asp"] == 4 and pooled["bsp_reference"] == pytest.approx(0.80)
    assert "over all its 6 runs at every size, 0.800" in text and "0.785 [0.785-0.785] (2 seeds)" in text


def test_a_run_that_would_end_past_the_budget_is_left_for_the_next_call(tmp_path, capsys):
    """--budget-s: a run whose size and variant took longer before than the budget leaves is not started (no child
    process, nothing run); one never seen is tried; no budget, no limit."""
    earlier = tmp_path / "earlier.json"
    runs = [{**_run("bsp", 2, 0, 0.8), "host_s": 400.0}, {**_run("switch", 2, 0, 0.8), "host_s": 20.0}]
    earlier.write_text(json.dumps({"args": {"global_batch": 64}, "jobs": {"quickstart": {"runs": runs}}}))
    result = scale.run_part(_args(tmp_path, jobs="quickstart", workers="2", variants="bsp", global_batch=64,
                                  first_seed=1, seeds=1, add_to=earlier, budget_s=300), str(tmp_path))
    assert result["jobs"]["quickstart"]["runs"] == runs
    assert "bsp at 2 workers, seed 1: skipped" in capsys.readouterr().err
    assert not scale.fits(300, 0, runs, "bsp", 2) and scale.fits(300, 0, runs, "switch", 2)
    assert not scale.fits(300, 270, runs, "switch", 2)  # 270 + 20 + a child's start is past 300
    assert scale.fits(300, 0, runs, "asp", 2) and scale.fits(0, 1e9, runs, "bsp", 2)


def test_the_comparisons_default_model_has_the_real_runs_tail():
    # Two instrumented batches of real 4-worker ASP runs (quickstart and digits CNN, 5 seeds each) put 2-4% of their
    # updates 6 or more steps stale at mean 1.72-1.76 (notebook 2026-11-27-simulator-10); the cores alone, 0.3%.
    from syncswitch.simulator.staleness_fit import model_staleness, shape

    model = scale_vs_real.shared_model(scale_vs_real.SIGMA, 1, 1.74)
    assert model == f"speeds:0.2+cores:1:staleness=1.7400:stall={scale_vs_real.STALL}+call:0.19"
    fitted = shape(model_staleness(model, 4, range(2), 1250))
    plain = shape(model_staleness(scale_vs_real.shared_model(scale_vs_real.SIGMA, 1, 1.74, stall=""), 4, range(2),
                                  1250))
    assert fitted["mean"] == pytest.approx(1.74, abs=0.05) and plain["mean"] == pytest.approx(1.74, abs=0.05)
    assert 0.019 <= fitted["p_ge6"] <= 0.044 and plain["p_ge6"] < 0.01


def test_each_worker_count_takes_the_stall_fitted_nearest_it():
    # 2 and 4 workers were fitted apart (notebook 2026-11-28-simulator-11): 2 workers' real runs have fewer, shorter
    # holds. A count not fitted takes the nearest fitted one's, a tie the larger's.
    stalls = scale_vs_real.STALLS
    assert stalls[2] != stalls[4] and scale_vs_real.STALL == stalls[4]
    assert [scale_vs_real.stall_for(n) for n in (1, 2, 3, 4, 8)] == [stalls[2], stalls[2], stalls[4], stalls[4],
                                                                     stalls[4]]


def test_the_two_worker_stall_has_the_two_worker_runs_short_tail():
    # Three instrumented batches of real 2-worker ASP runs (two of the quickstart, one of the digits CNN) put 0.2-0.8%
    # of their updates 4 or more steps stale at mean 0.58 (notebook 2026-11-28-simulator-11); 4 workers' stall puts
    # 2.8% there, the cores alone none.
    from syncswitch.simulator.staleness_fit import model_staleness, shape

    own, four = (shape(model_staleness(scale_vs_real.shared_model(scale_vs_real.SIGMA, 1, 0.58, stall=s), 2,
                                       range(2), 1250)) for s in (scale_vs_real.stall_for(2), scale_vs_real.STALL))
    assert own["mean"] == pytest.approx(0.58, abs=0.03) and four["mean"] == pytest.approx(0.58, abs=0.03)
    assert 0.002 <= own["p_ge4"] <= 0.012 < 0.02 <= four["p_ge4"]
