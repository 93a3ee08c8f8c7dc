"""The guard's rung in the plan: after a synchronous phase diverged it runs at a backed-off rate, which a resumed
manager keeps; after an asynchronous one, or another verdict, at the protocol's own."""

import pytest

from syncswitch import spec as specmod
from syncswitch.cluster_manager.plan import RunPlan

JOB = """
name: p
script: EXAMPLES/digits_mlp.py
hyperparameters: {batch_size: 16, learning_rate: 0.05}
workload: {epochs: 1}
cluster: {workers: 4}
policy: {schedule: SCHEDULE}
"""


def _plan(write_spec, schedule):
    return RunPlan(specmod.load(write_spec(JOB.replace("SCHEDULE", schedule))), ("bsp",))


def test_a_diverged_bsp_phase_falls_back_at_half_its_rate_on_4_workers_and_a_resume_keeps_it(write_spec):
    plan = _plan(write_spec, "[{protocol: bsp}]")
    assert plan[0].config.learning_rate == pytest.approx(0.2)
    assert plan.fall_back(1, "bsp", diverged=True).learning_rate == pytest.approx(0.1)
    assert plan.fall_back(2, "bsp", diverged=True).learning_rate == pytest.approx(0.05)
    assert plan.fall_back(3, "bsp", diverged=True).learning_rate == pytest.approx(0.05)  # never below the user's
    resumed = _plan(write_spec, "[{protocol: bsp}]")
    resumed.restore(plan.describe_phases())
    assert [p.config.learning_rate for p in resumed] == pytest.approx([0.2, 0.1, 0.05, 0.05])


def test_other_rungs_run_at_their_protocols_own_rate(write_spec):
    plan = _plan(write_spec, "[{protocol: bsp, until: 0.5}, {protocol: asp}]")
    assert plan.fall_back(2, "bsp", diverged=True).learning_rate == pytest.approx(0.2)  # ASP diverged, not BSP
    plan = _plan(write_spec, "[{protocol: bsp}]")
    assert plan.fall_back(1, "bsp").learning_rate == pytest.approx(0.2)  # an accuracy verdict
    assert "learning_rate" not in plan.describe_phases()[1]
