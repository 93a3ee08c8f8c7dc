"""A plain script with Keras' BatchNormalization: its moving statistics train on a real cluster and are checkpointed."""

import glob
import os

import numpy as np
import pytest

from syncswitch import spec as specmod
from syncswitch.cluster_manager import submission
from tests.conftest import ROOT

pytestmark = pytest.mark.cluster

# The probe script BENCHMARKS.md measures (a Dense-BatchNormalization-Dropout MLP on scikit-learn's digits).
SCRIPT = os.path.join(ROOT, "bench", "probes", "keras_bn_mlp.py")

JOB = """
name: keras-bn
script: SCRIPT
hyperparameters: {batch_size: 16, learning_rate: 0.05, momentum: 0.9}
workload: {epochs: 3}
cluster: {backend: local, workers: 2}
policy: {schedule: [{protocol: bsp}]}
evaluation: {every: 0.5}
"""


def test_keras_batch_norm_statistics_move_and_the_model_evaluates_well(write_spec, tmp_path, no_leftovers):
    import tensorflow as tf

    job = specmod.load(write_spec(JOB.replace("SCRIPT", SCRIPT)))
    summary = submission.submit(job, output_dir=str(tmp_path / "run"), progress=False)
    assert summary["status"] == "completed", summary["message"]
    reader = tf.train.load_checkpoint(str(tmp_path / "run" / "checkpoints"))
    mean = reader.get_tensor("batch_normalization/moving_mean")
    assert np.abs(mean).mean() > 0.05  # it never moved from 0 before (evaluation normalised with 0 and 1)
    # Evaluated with the moving statistics (training=False): a well-trained model, not one normalised by 0 and 1.
    assert summary["final_accuracy"] > 0.85
    logs = glob.glob(os.path.join(str(tmp_path / "run"), "nodes", "*", "task-*.log"))
    assert any("update op(s) outside UPDATE_OPS" in open(p, encoding="utf-8").read() for p in logs)
