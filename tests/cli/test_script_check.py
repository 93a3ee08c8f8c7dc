"""Scripts checked at load time: a missing function is one line naming the user's own file, before anything starts."""

import os

import pytest
from click.testing import CliRunner

from syncswitch import spec as specmod
from syncswitch.cli import cli
from syncswitch.errors import ScriptError
from syncswitch.spec.script_check import check_script

GOOD = ("import tensorflow as tf\n\n"
        "def input_fn(split, batch_size, params):\n    return None\n\n"
        "def model_fn(features, labels, params, training):\n    return None\n\n")


def _spec(tmp_path, source: str, workload: str = "{epochs: 1}") -> str:
    (tmp_path / "train.py").write_text(source)
    path = tmp_path / "job.yaml"
    path.write_text(f"name: t\nscript: train.py\nhyperparameters: {{batch_size: 8, learning_rate: 0.1}}\n"
                    f"workload: {workload}\n")
    return str(path)


@pytest.mark.parametrize("source, missing", [
    (GOOD.replace("def input_fn", "def inputs_fn"), "input_fn(split, batch_size, params)"),
    (GOOD.replace("def model_fn", "def model"), "model_fn(features, labels, params, training)"),
])
def test_submit_rejects_a_missing_function_naming_the_users_file(tmp_path, source, missing):
    path = _spec(tmp_path, source, "{samples: 100}")
    result = CliRunner().invoke(cli, ["submit", path, "--output-dir", str(tmp_path / "run")])
    assert result.exit_code == 2, result.output
    assert result.output.strip() == f"error: script {tmp_path / 'train.py'} must define {missing}"
    assert not os.path.exists(tmp_path / "run")  # nothing started, no run folder


def test_epochs_workload_needs_num_examples(tmp_path):
    path = _spec(tmp_path, GOOD)
    with pytest.raises(ScriptError, match=r"train\.py: workload\.epochs needs the script to define "
                                          r"num_examples\(split, params\)"):
        specmod.load(path)
    samples = _spec(tmp_path, GOOD, "{samples: 64}")
    assert specmod.load(samples).workload.samples == 64


def test_syntax_error_names_file_and_line(tmp_path):
    path = _spec(tmp_path, GOOD + "def broken(:\n")
    with pytest.raises(ScriptError, match=r"train\.py:9: syntax error"):
        specmod.load(path)


def test_definitions_by_import_assignment_or_inside_if_count(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("from mylib import input_fn\ntry:\n    import x\nexcept ImportError:\n"
                      "    def model_fn(f, l, p, t):\n        pass\nnum_examples = lambda split, params: 10\n")
    check_script(str(script), by_epochs=True)
    script.write_text("def outer():\n    def input_fn(): pass\n    def model_fn(): pass\n")
    with pytest.raises(ScriptError, match="must define input_fn"):
        check_script(str(script), by_epochs=False)  # nested definitions are not the module's


def test_tensorflow_is_not_imported(tmp_path):
    import subprocess
    import sys

    path = _spec(tmp_path, GOOD + "def num_examples(split, params):\n    return 1\n")
    code = ("import sys; import syncswitch.backends, syncswitch.policies; from syncswitch import spec; "
            f"spec.load({path!r}); assert 'tensorflow' not in sys.modules, 'TF imported'")
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
