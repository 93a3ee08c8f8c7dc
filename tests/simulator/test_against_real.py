"""Each engine's real 2-worker run against its simulation under the real run's replayed step times: the real
final accuracy lies within the simulated seeds' spread (widened by the evaluation's own noise)."""

from __future__ import annotations

import pytest

pytest.importorskip("tensorflow")

from syncswitch import spec as specmod
from syncswitch.cluster_manager import submission
from syncswitch.simulator.arrivals import arrival_model
from syncswitch.simulator.run import Options, Simulation

JOB = """
name: digits
script: EXAMPLES/digits_mlp.py
hyperparameters: {batch_size: 16, learning_rate: 0.05, momentum: 0.9, lr_decay: {boundaries: [0.5], factors: [0.5]}}
workload: {epochs: 4}
cluster: {backend: local, workers: 2}
evaluation: {every: 0.25}
policy: {guard: {enabled: false}}
"""
SEEDS = 5
NOISE = 0.03  # 360 test examples: one evaluation's standard error at 0.9 is about 0.016


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["bsp", "asp", "ssp", "dc-asgd", "fasgd", "b-fasgd", "specsync", "lookahead",
                                      "local-sgd"])
def test_a_real_run_lies_within_its_simulations_seed_spread(write_spec, tmp_path, no_leftovers, protocol):
    path = write_spec(JOB)
    schedule = f"policy.schedule=[{{protocol: {protocol}}}]"
    real = submission.submit(specmod.load(path, [schedule]), output_dir=str(tmp_path / "real"), progress=False)
    assert real["status"] == "completed", real["message"]
    simulated = []
    for seed in range(SEEDS):
        job = specmod.load(path, [schedule, f"seed={seed}"])
        arrivals = arrival_model(f"replay:{tmp_path / 'real'}", 2, seed)
        summary = Simulation(job, Options(2, arrivals, seed, str(tmp_path / f"sim{seed}"))).run()
        simulated.append(summary["final_accuracy"])
    assert min(simulated) - NOISE <= real["final_accuracy"] <= max(simulated) + NOISE, (real["final_accuracy"],
                                                                                       simulated)
