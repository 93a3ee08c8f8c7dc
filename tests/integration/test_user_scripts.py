"""Plain scripts written the way users write them, outside the shipped examples, on a real cluster: a text script
(vocabulary table in input_fn, embedding, one-hot labels, no `.repeat()`), a tf.compat.v1-layers script with labels
as a [batch, 1] column, and a training set smaller than one batch per worker (a one-line error)."""

import os

import pytest

from syncswitch import spec as specmod
from syncswitch.cluster_manager import submission
from syncswitch.errors import ScriptError
from tests.conftest import ROOT

pytestmark = pytest.mark.cluster

# The probe scripts BENCHMARKS.md measures.
SCRIPT = os.path.join(ROOT, "bench", "probes", "text_vocab.py")
COLUMN_SCRIPT = os.path.join(ROOT, "bench", "probes", "column_labels.py")
GRU_SCRIPT = os.path.join(ROOT, "bench", "probes", "gru_seq.py")
ARRAY_SCRIPT = os.path.join(ROOT, "bench", "probes", "array_in_memory.py")

JOB = """
name: text
script: SCRIPT
params: PARAMS
hyperparameters: {batch_size: 32, learning_rate: 0.05, momentum: 0.9}
# Six epochs, as the probe's own job: at three, BSP's half ends on the plateau (0.33-0.35 at 50%, seeds 0-3) and
# the final accuracy is whatever the asynchronous half makes of it alone: 0.75-0.98 by host and seed, and CI's
# run of 2026-11-27 scored 0.75. At six, BSP's half reaches 0.83-0.97 and the finals 0.948-0.965 (seeds 0-6,
# two runs at a time on 2 cores).
workload: {epochs: 6}
cluster: {backend: local, workers: 2}
# The switch where the schedule puts it: these tests drive the switch mechanics, not the switch rule.
policy: {switch_at: 0.5, switch_rule: fixed}
evaluation: {every: 0.5}
"""


def test_a_text_script_with_a_vocabulary_table_trains_through_a_switch(write_spec, tmp_path, no_leftovers):
    # Before: the one-shot iterator refused the table; then the unrepeated training set ended the workers.
    job = specmod.load(write_spec(JOB.replace("SCRIPT", SCRIPT).replace("PARAMS", "{}")))
    summary = submission.submit(job, output_dir=str(tmp_path / "run"), progress=False)
    assert summary["status"] == "completed", summary["message"]
    assert summary["failures"] == []  # no worker ran out of data and was restarted
    assert [p["protocol"] for p in summary["schedule"]] == ["bsp", "lookahead"]
    assert summary["total_samples"] >= 6 * 3000  # six passes over a set the script yields once
    assert summary["final_accuracy"] > 0.8  # chance is 1/3; evaluated through the evaluator's own table


def test_a_training_set_without_a_batch_per_worker_is_a_script_error(write_spec, tmp_path, no_leftovers):
    # 20 examples make one batch of 32: worker 1's shard is empty however often it is repeated.
    job = specmod.load(write_spec(JOB.replace("SCRIPT", SCRIPT).replace("PARAMS", "{train_examples: 20}")))
    with pytest.raises(ScriptError, match=r"text_vocab\.py: input_fn\('train', \.\.\.\) gave worker 1 no batch"):
        submission.submit(job, output_dir=str(tmp_path / "run"), progress=False)


def test_a_v1_layers_script_with_column_labels_is_scored_right(write_spec, tmp_path, no_leftovers):
    # Before: a forked task lost TF_USE_LEGACY_KERAS, so tf.compat.v1.layers resolved to Keras 3 and failed; and
    # the evaluator took [batch, 1] labels for one-hot rows (their argmax: all 0), scoring a 0.98 model at 0.07.
    body = JOB.replace("SCRIPT", COLUMN_SCRIPT).replace("PARAMS", "{task: multiclass}")
    summary = submission.submit(specmod.load(write_spec(body)), output_dir=str(tmp_path / "run"), progress=False)
    assert summary["status"] == "completed", summary["message"]
    assert summary["final_accuracy"] > 0.85  # ten classes: the old scoring gave about 0.07


def test_a_script_with_its_data_in_large_arrays_trains_and_is_scored_from_fed_arrays(write_spec, tmp_path,
                                                                                    no_leftovers):
    # 12.5 MB of training and 3 MB of test examples, over array_feeds.MIN_BYTES: both splits' arrays are placeholders
    # fed at each start of an iterator (session creation, the restart after warm-up, every scoring). At 94 MB on 4
    # workers, as constants in the graph, nodes took 25-30 s from launch to their first step, and 11 s fed.
    body = JOB.replace("SCRIPT", ARRAY_SCRIPT).replace("PARAMS", "{train_examples: 4000, test_examples: 1000}")
    body = body.replace("epochs: 6", "epochs: 2")
    summary = submission.submit(specmod.load(write_spec(body)), output_dir=str(tmp_path / "run"), progress=False)
    assert summary["status"] == "completed", summary["message"]
    assert [p["protocol"] for p in summary["schedule"]] == ["bsp", "lookahead"]
    assert summary["final_accuracy"] > 0.9  # ten classes; 0.97 at the probe's own size


def test_a_gru_script_trains_through_a_switch_to_a_parameter_server_protocol(write_spec, tmp_path, no_leftovers):
    # Before: every node failed its graph stage ("duplicate function ... definitions differ"): the replica's
    # gradient and the shared model's each rewrote the GRU's loop under one name (tests/node/test_graph.py).
    summary = submission.submit(specmod.load(write_spec(JOB.replace("SCRIPT", GRU_SCRIPT).replace("PARAMS", "{}"))),
                                output_dir=str(tmp_path / "run"), progress=False)
    assert summary["status"] == "completed", summary["message"]
    assert [p["protocol"] for p in summary["schedule"]][:2] == ["bsp", "lookahead"]
    assert summary["final_accuracy"] > 0.65  # two balanced classes


PROJECT_SCRIPT = '''
import numpy as np
import tensorflow as tf
from helpers import mlp  # a module beside the script

def _load():
    d = np.load("data/digits.npz")  # relative to the script's folder, as under `python train.py` there
    return d["x"], d["y"]

def num_examples(split, params):
    return 1300 if split == "train" else 497

def input_fn(split, batch_size, params):
    x, y = _load()
    part = slice(0, 1300) if split == "train" else slice(1300, None)
    ds = tf.data.Dataset.from_tensor_slices((x[part], y[part]))
    return (ds.shuffle(1300, seed=1) if split == "train" else ds).batch(batch_size)

def model_fn(features, labels, params, training):
    logits = mlp(features)
    loss = tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    return {"loss": tf.reduce_mean(loss), "logits": logits}
'''


def _project(root):
    import numpy as np
    from sklearn.datasets import load_digits

    (root / "data").mkdir(parents=True)
    digits = load_digits()
    np.savez(root / "data" / "digits.npz", x=(digits.data / 16).astype("float32"), y=digits.target)
    (root / "helpers.py").write_text("import tensorflow as tf\n\ndef mlp(x):\n"
                                     "    h = tf.keras.layers.Dense(32, activation='relu')(x)\n"
                                     "    return tf.keras.layers.Dense(10)(h)\n")
    (root / "train.py").write_text(PROJECT_SCRIPT)
    (root / "job.yaml").write_text("name: project\nscript: train.py\n"
                                   "hyperparameters: {batch_size: 32, learning_rate: 0.05, momentum: 0.9}\n"
                                   "workload: {epochs: 3}\ncluster: {backend: local, workers: 2}\n"
                                   "evaluation: {every: 0.5}\n")
    return str(root / "job.yaml")


def _with_input_fn(root, source: str) -> None:
    """Replace the project script's input_fn with `source`."""
    script = root / "train.py"
    text = script.read_text()
    start, end = text.index("def input_fn("), text.index("def model_fn(")
    script.write_text(text[:start] + source.strip() + "\n\n" + text[end:])


def test_a_script_finds_its_helper_module_and_data_files_on_every_node(tmp_path, monkeypatch, no_leftovers):
    # Before: only the script was shipped; its data file was looked for in the node's folder, and its helper
    # module was found only when the manager happened to start in the script's folder.
    job = _project(tmp_path / "proj")
    monkeypatch.chdir(tmp_path)  # not the script's folder
    summary = submission.submit(specmod.load(job), output_dir=str(tmp_path / "run"), progress=False)
    assert summary["status"] == "completed", summary["message"]
    assert summary["final_accuracy"] > 0.8
    assert os.path.isfile(tmp_path / "run" / "nodes" / "1" / "script" / "data" / "digits.npz")


def test_a_named_workdir_over_the_limit_fails_before_any_node_starts(tmp_path, monkeypatch, no_leftovers):
    from syncswitch.errors import SpecError
    from syncswitch.wire import bundle

    job = _project(tmp_path / "proj")
    monkeypatch.setattr(bundle, "LIMIT_BYTES", 1000)
    with pytest.raises(SpecError, match=r"workdir=.*proj': .* holds more than 0 MiB of files; name a smaller"):
        submission.submit(specmod.load(job, ["workdir=."]), output_dir=str(tmp_path / "run"), progress=False)
    assert not os.path.exists(tmp_path / "run" / "nodes")


def test_a_default_folder_over_the_limit_runs_in_place_on_a_shared_filesystem(tmp_path, monkeypatch, no_leftovers):
    from syncswitch.wire import bundle

    job = _project(tmp_path / "proj")
    monkeypatch.setattr(bundle, "LIMIT_BYTES", 1000)  # the digits file alone is larger
    summary = submission.submit(specmod.load(job), output_dir=str(tmp_path / "run"), progress=False)
    assert summary["status"] == "completed", summary["message"]
    assert not os.path.exists(tmp_path / "run" / "nodes" / "0" / "script")  # nothing was copied


def test_a_script_that_repeats_its_test_split_is_evaluated_once_over_it(tmp_path, no_leftovers):
    # Before: the evaluator read the repeated test split forever and the job hung at its end.
    job = _project(tmp_path / "proj")
    script = tmp_path / "proj" / "train.py"
    script.write_text(script.read_text().replace(
        "return (ds.shuffle(1300, seed=1) if split == \"train\" else ds).batch(batch_size)",
        "return ds.repeat().batch(batch_size)"))
    summary = submission.submit(specmod.load(job), output_dir=str(tmp_path / "run"), progress=False)
    assert summary["status"] == "completed", summary["message"]
    assert summary["final_accuracy"] > 0.8


NOISY_TEST_SET = """
def input_fn(split, batch_size, params):
    x, y = _load()
    if split == "test":
        def gen():
            for i in range(1300, len(y)):
                if i % 100 == 0:
                    print(".", end="")  # progress dots without a newline, on every evaluation
                yield x[i], y[i]
        spec = (tf.TensorSpec([64], tf.float32), tf.TensorSpec([], tf.int64))
        return tf.data.Dataset.from_generator(gen, output_signature=spec).batch(batch_size)
    return tf.data.Dataset.from_tensor_slices((x[:1300], y[:1300])).shuffle(1300, seed=1).batch(batch_size)
"""


def test_what_a_script_prints_while_evaluated_does_not_swallow_an_evaluation(tmp_path, no_leftovers):
    # Before: the dots went to the evaluator's event stream and ran into the next event line, which was lost; the
    # job then waited for its final evaluation until the 600 s limit.
    job = _project(tmp_path / "proj")
    _with_input_fn(tmp_path / "proj", NOISY_TEST_SET)
    summary = submission.submit(specmod.load(job), output_dir=str(tmp_path / "run"), progress=False)
    assert summary["status"] == "completed", summary["message"]
    fractions = [e["fraction"] for e in summary["evaluations"]]
    assert len(fractions) >= 2 and fractions[-1] >= 1.0  # every checkpoint scored, the final one too
    assert "." in (tmp_path / "run" / "evaluator.log").read_text()  # the prints went to the log


MISSING_VOCABULARY = """
def input_fn(split, batch_size, params):
    x, y = _load()
    if split == "test":  # a table the session fills from a file, missing here
        table = tf.lookup.StaticHashTable(tf.lookup.TextFileInitializer(
            "missing_vocab.txt", tf.string, tf.lookup.TextFileIndex.WHOLE_LINE, tf.int64,
            tf.lookup.TextFileIndex.LINE_NUMBER), -1)
        ds = tf.data.Dataset.from_tensor_slices((x[1300:], y[1300:]))
        return ds.map(lambda f, lab: (f + tf.cast(table.lookup(tf.constant("w")), tf.float32) * 0, lab)).batch(32)
    return tf.data.Dataset.from_tensor_slices((x[:1300], y[:1300])).shuffle(1300, seed=1).batch(batch_size)
"""


def test_an_evaluator_that_cannot_initialize_the_test_split_fails_the_run_in_one_line(tmp_path, no_leftovers):
    # Before: the evaluator died with a traceback in its log and the run "completed" with no accuracy (exit 0).
    job = _project(tmp_path / "proj")
    _with_input_fn(tmp_path / "proj", MISSING_VOCABULARY)
    with pytest.raises(ScriptError, match=r"train.py: the evaluator could not set up the test split and model: "
                                          r"NotFoundError: missing_vocab.txt; No such file or directory$"):
        submission.submit(specmod.load(job), output_dir=str(tmp_path / "run"), progress=False)


def test_an_empty_test_split_is_a_script_error_not_an_accuracy_of_zero(tmp_path, no_leftovers):
    job = _project(tmp_path / "proj")
    script = tmp_path / "proj" / "train.py"
    script.write_text(script.read_text().replace("part = slice(0, 1300) if split == \"train\" else slice(1300, None)",
                                                 "part = slice(0, 1300) if split == \"train\" else slice(0, 0)"))
    with pytest.raises(ScriptError, match=r"train.py: input_fn\('test', \.\.\.\) yielded no examples$"):
        submission.submit(specmod.load(job), output_dir=str(tmp_path / "run"), progress=False)


def test_a_script_batching_by_its_own_constant_fails_in_one_line_naming_the_users_file(tmp_path, no_leftovers):
    # Before: it trained at 64 a batch against a batch_size of 32 (twice the epochs asked for) without a word, and a
    # node's errors named its copy of the script (<run>/nodes/1/script/train.py).
    job = _project(tmp_path / "proj")
    script = tmp_path / "proj" / "train.py"
    script.write_text(script.read_text().replace("else ds).batch(batch_size)", "else ds).batch(64)"))
    with pytest.raises(ScriptError) as failed:
        submission.submit(specmod.load(job), output_dir=str(tmp_path / "run"), progress=False)
    assert str(failed.value) == (f"script {script}: input_fn('train', 32, params) gave a batch of 64 examples: batch "
                                 "the training set by the batch_size argument (syncswitch counts the examples "
                                 "trained, and sets each protocol's batch, by it)")
