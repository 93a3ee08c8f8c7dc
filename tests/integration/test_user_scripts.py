"""Plain scripts written the way users write them, outside the shipped examples, on a real cluster: a text script
(vocabulary table in input_fn, embedding, one-hot labels, no `.repeat()`), a tf.compat.v1-layers script with labels
as a [batch, 1] column, and a training set smaller than one batch per worker (a one-line error)."""

import os

import pytest

from syncswitch import spec as specmod
from syncswitch.cluster_manager import manager
from syncswitch.errors import ScriptError
from tests.conftest import ROOT

pytestmark = pytest.mark.cluster

# The probe scripts BENCHMARKS.md measures.
SCRIPT = os.path.join(ROOT, "bench", "probes", "text_vocab.py")
COLUMN_SCRIPT = os.path.join(ROOT, "bench", "probes", "column_labels.py")

JOB = """
name: text
script: SCRIPT
params: PARAMS
hyperparameters: {batch_size: 32, learning_rate: 0.05, momentum: 0.9}
workload: {epochs: 3}
cluster: {backend: local, workers: 2}
policy: {switch_at: 0.5}
evaluation: {every: 0.5}
"""


def test_a_text_script_with_a_vocabulary_table_trains_through_a_switch(write_spec, tmp_path, no_leftovers):
    # Before: the one-shot iterator refused the table; then the unrepeated training set ended the workers.
    job = specmod.load(write_spec(JOB.replace("SCRIPT", SCRIPT).replace("PARAMS", "{}")))
    summary = manager.submit(job, output_dir=str(tmp_path / "run"), progress=False)
    assert summary["status"] == "completed", summary["message"]
    assert summary["failures"] == []  # no worker ran out of data and was restarted
    assert [p["protocol"] for p in summary["schedule"]] == ["bsp", "lookahead"]
    assert summary["total_samples"] >= 3 * 3000  # three passes over a set the script yields once
    assert summary["final_accuracy"] > 0.8  # chance is 1/3; evaluated through the evaluator's own table


def test_a_training_set_without_a_batch_per_worker_is_a_script_error(write_spec, tmp_path, no_leftovers):
    # 20 examples make one batch of 32: worker 1's shard is empty however often it is repeated.
    job = specmod.load(write_spec(JOB.replace("SCRIPT", SCRIPT).replace("PARAMS", "{train_examples: 20}")))
    with pytest.raises(ScriptError, match=r"text_vocab\.py: input_fn\('train', \.\.\.\) gave worker 1 no batch"):
        manager.submit(job, output_dir=str(tmp_path / "run"), progress=False)


def test_a_v1_layers_script_with_column_labels_is_scored_right(write_spec, tmp_path, no_leftovers):
    # Before: a forked task lost TF_USE_LEGACY_KERAS, so tf.compat.v1.layers resolved to Keras 3 and failed; and
    # the evaluator took [batch, 1] labels for one-hot rows (their argmax: all 0), scoring a 0.98 model at 0.07.
    body = JOB.replace("SCRIPT", COLUMN_SCRIPT).replace("PARAMS", "{task: multiclass}").replace("epochs: 3", "epochs: 6")
    summary = manager.submit(specmod.load(write_spec(body)), output_dir=str(tmp_path / "run"), progress=False)
    assert summary["status"] == "completed", summary["message"]
    assert summary["final_accuracy"] > 0.85  # ten classes: the old scoring gave about 0.07
