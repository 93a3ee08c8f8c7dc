"""The script contract as the nodes load it: the script's folder on the path, and num_examples' answer."""

import sys
import types

import numpy as np
import pytest

from syncswitch.errors import ScriptError
from syncswitch.node.script import load_script, num_train_examples


def _module(value):
    module = types.ModuleType("m")
    module.num_examples = lambda split, params: value
    return module


@pytest.mark.parametrize("value", [1300, np.int64(1300), np.int32(1300)])
def test_a_count_from_numpy_is_an_integer(value):
    n = num_train_examples(_module(value), "train.py", {})
    assert n == 1300 and type(n) is int


@pytest.mark.parametrize("value", [0, -3, 1.5, "10", True, np.float64(10.0)])
def test_anything_else_is_a_script_error_naming_the_value(value):
    with pytest.raises(ScriptError, match=r"script train.py: num_examples\('train', params\) returned .*positive int"):
        num_train_examples(_module(value), "train.py", {})


def test_a_script_imports_the_modules_beside_it(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "beside_helper", raising=False)
    (tmp_path / "beside_helper.py").write_text("WIDTH = 7\n")
    (tmp_path / "train.py").write_text("from beside_helper import WIDTH\n"
                                       "def input_fn(split, batch_size, params): pass\n"
                                       "def model_fn(features, labels, params, training): pass\n")
    assert load_script(str(tmp_path / "train.py")).WIDTH == 7
    assert sys.path[0] == str(tmp_path)


def test_a_repeated_test_set_is_cut_at_num_examples_or_refused():
    tf = pytest.importorskip("tensorflow")
    from syncswitch.node.script import finite_test_set

    forever = tf.data.Dataset.range(10).repeat().batch(4)
    cut = finite_test_set(forever, _module(10), "train.py", {}, 4)
    assert [b.numpy().tolist() for b in cut] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    with pytest.raises(ScriptError, match=r"script train.py: input_fn\('test', \.\.\.\) repeats forever.*"
                                          r"define num_examples\('test', params\)"):
        finite_test_set(forever, types.ModuleType("m"), "train.py", {}, 4)


def test_a_runtime_error_is_told_by_its_cause_not_by_the_task_that_raised_it():
    tf = pytest.importorskip("tensorflow")
    from syncswitch.errors import one_line

    exc = tf.errors.InvalidArgumentError(None, None, "From /job:worker/replica:0/task:1:\nValueError: corrupt "
                                                     "record 900\nTraceback (most recent call last):\n  ...")
    assert one_line(exc) == "InvalidArgumentError: ValueError: corrupt record 900"
    assert one_line(RuntimeError("plain\nsecond")) == "RuntimeError: plain"
    assert one_line(RuntimeError()) == "RuntimeError: "


def test_a_session_error_is_told_by_what_went_wrong_not_where_the_op_was_defined():
    tf = pytest.importorskip("tensorflow")
    from syncswitch.errors import one_line

    text = ("Graph execution error:\n\nDetected at node 'init/InitializeTable' defined at (most recent call last):\n"
            "  File \"train.py\", line 3, in input_fn\nNode: 'init/InitializeTable'\n"
            "missing_vocab.txt; No such file or directory\n\t [[{{node init/InitializeTable}}]]")
    assert one_line(tf.errors.NotFoundError(None, None, text)) == \
        "NotFoundError: missing_vocab.txt; No such file or directory"


ADAPTING = """
import os, sys
os.environ["TF_USE_LEGACY_KERAS"] = "1"  # as a node runs the script: tf-keras in a TF1 graph
import numpy as np
import tensorflow as tf
from syncswitch.errors import ScriptError
from syncswitch.node.script import call_input_fn
tf.compat.v1.disable_eager_execution()


class Script:
    @staticmethod
    def input_fn(split, batch_size, params):  # the Keras guides' way: adapt on the training texts
        vectorize = tf.keras.layers.TextVectorization(max_tokens=50, output_sequence_length=4)
        vectorize.adapt(np.array(["a b c", "b c d"]))
        return tf.data.Dataset.from_tensor_slices((["a b"], [0])).map(lambda t, y: (vectorize(t), y)).batch(1)


try:
    call_input_fn(Script, "train.py", "train", 1, {})
except ScriptError as exc:
    print("ERROR " + str(exc))
"""


def test_an_eager_only_call_in_a_tf1_graph_is_told_what_to_do_instead():
    pytest.importorskip("tensorflow")
    import os
    import subprocess

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run([sys.executable, "-c", ADAPTING], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": root, "TF_CPP_MIN_LOG_LEVEL": "3"}, check=False)
    (line,) = [x[len("ERROR "):] for x in done.stdout.splitlines() if x.startswith("ERROR ")] or [done.stderr[-2000:]]
    assert line.startswith("script train.py: input_fn('train', 1, params) raised RuntimeError: `adapt` is only "
                           "supported in tensorflow v2"), line
    assert line.endswith("(TextVectorization(vocabulary=...), StringLookup(vocabulary=...), "
                         "Normalization(mean=..., variance=...))"), line
