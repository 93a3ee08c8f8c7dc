"""Batch normalization's moving averages in the simulator: scored as the evaluator scores them, and moved by the
workers whose copy they are (the chief's alone under a replica protocol, every worker's under a parameter server).
A small ResNet of the shipped example, real data, one process."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
pytest.importorskip("tensorflow")

import tensorflow as tf
from syncswitch import spec as specmod
from syncswitch.simulator.arrivals import arrival_model
from syncswitch.simulator.model import GradientModel, random_state_kept
from syncswitch.simulator.run import Options, Simulation

RESNET = """
name: bn
script: EXAMPLES/resnet_synthetic.py
params: {train_examples: 128, test_examples: 64, blocks_per_stage: 1, width: 4, noise: 0.5, data_seed: 0}
hyperparameters: {batch_size: 8, learning_rate: 0.05, momentum: 0.9}
workload: {epochs: 1}
cluster: {backend: local, workers: 4}
evaluation: {every: 0.5}
"""


@pytest.fixture
def resnet_job(write_spec):
    return write_spec(RESNET, "bn.yaml")


def test_drawing_inside_random_state_kept_leaves_the_draws_after_it_alone():
    """Python's and numpy's draws, and the initial weights of a layer built after it (Keras seeds its
    initializers from a generator of its own)."""
    def draws():
        layer = tf.keras.layers.Dense(3)
        layer.build((None, 2))
        return random.random(), float(np.random.uniform()), layer.kernel.numpy().tolist()

    tf.keras.utils.set_random_seed(5)
    plain = draws()
    tf.keras.utils.set_random_seed(5)
    with random_state_kept():
        draws()
    assert draws() == plain


def test_a_model_with_moving_averages_is_scored_with_them(resnet_job):
    model = GradientModel(specmod.load(resnet_job, []), seed=0)
    assert model.state_variables and model.scorer is not model.model
    w = model.initial()
    fresh = model.evaluate(w)
    model.set_state(tuple(np.full_like(v, 50.0) for v in model.state()))  # means and variances far off
    assert model.evaluate(w) != fresh  # a model scored in training mode would not see them


def _bsp(resnet_job, tmp_path, name):
    job = specmod.load(resnet_job, ["policy.schedule=[{protocol: bsp}]"])
    sim = Simulation(job, Options(4, arrival_model("round-robin", 4, 0), 0, str(tmp_path / name)))
    sim.run()
    return sim


def test_under_bsp_by_all_reduce_each_worker_moves_its_own_copy_and_the_chiefs_is_the_models(resnet_job, tmp_path,
                                                                                             monkeypatch):
    seen = {}
    original = Simulation.gradient

    def gradient(self, point, batch, worker=0):
        out = original(self, point, batch, worker)
        if self.state.copies is not None:
            seen[worker] = self.state.copies[worker]
        return out

    monkeypatch.setattr(Simulation, "gradient", gradient)
    sim = _bsp(resnet_job, tmp_path, "replicas")
    assert sorted(seen) == [0, 1, 2, 3]
    assert not np.array_equal(seen[0][0], seen[1][0])  # each worker's own batches moved its copy
    for ours, chiefs in zip(sim.state.shared, seen[0]):  # the phase's end published the chief's
        np.testing.assert_array_equal(ours, chiefs)
    monkeypatch.setattr(Simulation, "gradient", original)
    # Every worker's steps moving one copy (a parameter server's) is another model: the evaluator would see it.
    monkeypatch.setattr("syncswitch.simulator.model_state.ModelState.enter",
                        lambda self, replicas, workers, _enter=type(sim.state).enter: _enter(self, False, workers))
    shared = _bsp(resnet_job, tmp_path, "shared")
    np.testing.assert_array_equal(shared.final.w, sim.final.w)  # the same training
    assert not np.array_equal(shared.state.shared[0], sim.state.shared[0])


def test_local_sgd_averages_the_moving_averages_with_the_copies(resnet_job, tmp_path, monkeypatch):
    from syncswitch.simulator.model_state import ModelState

    before, after = [], []
    average = ModelState.average

    def recorded(self):
        before.append(list(self.copies))  # the list is written in place by the next steps
        average(self)
        after.append(list(self.copies))

    monkeypatch.setattr(ModelState, "average", recorded)
    job = specmod.load(resnet_job, ["policy.schedule=[{protocol: local-sgd, period: 2}]"])
    Simulation(job, Options(4, arrival_model("round-robin", 4, 0), 0, str(tmp_path / "run"))).run()
    assert len(after) == 2  # 128 examples, 4 workers at batch 8: 4 steps, an average every 2
    for copies, averaged in zip(before, after):
        assert not np.array_equal(copies[0][0], copies[1][0])
        mean = np.mean([c[0] for c in copies], axis=0, dtype=np.float64).astype(np.float32)
        for copy in averaged:
            np.testing.assert_array_equal(copy[0], mean)
