"""Each engine's real 2-worker run against its simulation under the real run's replayed step times, the workers
sharing one core as the run did under the test's CPU slot (the slice calibrated to the staleness the run
measured): the real final accuracy lies within the simulated seeds' spread (widened by the evaluation's noise)."""

from __future__ import annotations

import pytest

pytest.importorskip("tensorflow")

from syncswitch import spec as specmod
from syncswitch.cluster_manager import submission
from syncswitch.simulator.arrivals import arrival_model
from syncswitch.simulator.run import Options, Simulation

SEEDS = 5
NOISE = 0.03  # 360 test examples: one evaluation's standard error at 0.9 is about 0.016


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["bsp", "asp", "ssp", "dc-asgd", "fasgd", "b-fasgd", "specsync", "lookahead",
                                      "local-sgd"])
def test_a_real_run_lies_within_its_simulations_seed_spread(digits_job, tmp_path, no_leftovers, protocol):
    path = digits_job
    schedule = f"policy.schedule=[{{protocol: {protocol}}}]"
    guard_off = "policy.guard.enabled=false"
    real = submission.submit(specmod.load(path, [schedule, guard_off]), output_dir=str(tmp_path / "real"),
                             progress=False)
    assert real["status"] == "completed", real["message"]
    simulated = []
    for seed in range(SEEDS):
        job = specmod.load(path, [schedule, guard_off, f"seed={seed}"])
        arrivals = arrival_model(f"replay:{tmp_path / 'real'}+cores:1", 2, seed)
        summary = Simulation(job, Options(2, arrivals, seed, str(tmp_path / f"sim{seed}"))).run()
        simulated.append(summary["final_accuracy"])
    assert min(simulated) - NOISE <= real["final_accuracy"] <= max(simulated) + NOISE, (real["final_accuracy"],
                                                                                       simulated)
