"""The framework_overhead benchmark part: the bare loop's summary arithmetic, and the part end to end in quick mode."""

import json
import os
import subprocess
import sys

import pytest

from bench import bare_loop, framework_overhead
from tests.conftest import ROOT


def test_bare_summary_phases_and_times():
    plan = {"job": "j", "workers": 2, "ps": 1, "switch_at": 0.25}
    evals = [{"fraction": 1.0, "time": 30.0, "accuracy": 0.9}]
    reports = [
        {"first_step": 10.0, "switched": 14.0, "end": 30.0, "steps": 60, "total": 4000, "switch_samples": 1024,
         "evaluations": evals},
        {"first_step": 11.0, "switched": 15.0, "end": 29.0, "steps": 50, "total": 4000, "switch_samples": 1024,
         "evaluations": []},
    ]
    out = bare_loop.summarize(plan, reports, t_start=2.0)
    # from the last worker's first step: every worker trains
    assert out["init_time_s"] == 9.0 and out["total_time_s"] == 19.0 and out["final_accuracy"] == 0.9
    assert out["first_step_spread_s"] == 1.0
    bsp, asp = out["schedule"]
    assert (bsp["protocol"], bsp["samples"], bsp["wall_time_s"]) == ("bsp", 1024, 4.0)  # to the last switch
    assert (asp["protocol"], asp["samples"], asp["wall_time_s"]) == ("asp", 2976, 16.0)  # first switch to end
    assert framework_overhead.phase_rates(out) == {"bsp": 1024 / 4.0, "asp": 2976 / 16.0}


@pytest.mark.slow
@pytest.mark.cluster
def test_quick_mode_runs_both_sides(tmp_path, no_leftovers):
    out = tmp_path / "fo.json"
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, "-m", "bench", "framework-overhead", "--quick", "--job",
                           "quickstart", "--out", str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=900, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (comparison,) = json.loads(out.read_text())["comparisons"]
    pair = comparison["pairs"][0]
    assert pair["syncswitch"]["status"] == "completed"
    # Both sides trained. Their final accuracy can be chance: both switch to ASP unguarded, as the comparison needs,
    # and on 4 time-sliced workers ASP can collapse (the bare loop ended at 0.089 once).
    best_bare = max(e["accuracy"] for e in pair["bare"]["evaluations"])
    assert best_bare > 0.2 and pair["syncswitch"]["best_accuracy"] > 0.2
    assert pair["bare"]["final_accuracy"] is not None and pair["syncswitch"]["final_accuracy"] is not None
    for key in ("training_time", "bsp_throughput", "asp_throughput", "submit_to_first_step"):
        assert pair["ratios"][key] > 0
    assert pair["syncswitch"]["cpu_s"]["task"] > 0 and pair["bare"]["cpu_s"]["bare_worker"] > 0


def test_the_bare_loops_workers_are_counted_as_such():
    """The bare loop starts its workers as `python -m bench.bare_loop --worker I`: their CPU is the bare side's."""
    from bench import common

    assert common.role_of(["python", "-m", "bench.bare_loop", "--worker", "0"]) == "bare_worker"
    assert common.role_of(["python", "-m", "syncswitch.node.agent", "--host", "127.0.0.1"]) == "agent"
    assert common.role_of(["python", "-m", "something.else"]) == "other"


def test_syncswitch_side_switches_where_the_bare_loop_does():
    """Both sides switch to ASP at SWITCH_AT: the rules that could move or skip syncswitch's switch are off."""
    assert {"policy.switch_to=asp", "policy.switch_rule=fixed", "policy.switch_speed=false",
            "policy.guard.enabled=false"} <= set(framework_overhead.SYNCSWITCH_OVERRIDES)
