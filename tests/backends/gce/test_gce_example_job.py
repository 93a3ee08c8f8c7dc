"""The shipped GCE example: the job spec validates and its script keeps the training-script contract.

The script itself needs TensorFlow to run; here it is only parsed, so the suite stays fast.
"""

from __future__ import annotations

import ast
import os

import yaml

from syncswitch.backends.gce import GceBackend
from syncswitch.backends.gce.options import resolve

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
JOB = os.path.join(ROOT, "jobs", "resnet32_cifar10_gce.yaml")
SCRIPT = os.path.join(ROOT, "examples", "resnet32_cifar10.py")


def test_job_mirrors_setup_one():
    with open(JOB, encoding="utf-8") as fh:
        doc = yaml.safe_load(fh)
    cluster = dict(doc["cluster"])
    assert cluster.pop("backend") == "gce" and cluster.pop("workers") == 8
    cfg = resolve(GceBackend.validate_options(cluster))
    assert cfg.zones[0] == "us-west1-b" and cfg.machine_type == "n1-standard-8"
    assert cfg.accelerator == {"type": "nvidia-tesla-t4", "count": 1} and cfg.disk_size_gb == 100
    assert doc["params"]["data_dir"].startswith("gs://")
    assert os.path.normpath(os.path.join(os.path.dirname(JOB), doc["script"])) == SCRIPT


def test_job_validates_as_a_spec():
    from syncswitch import spec

    job = spec.load(JOB)
    assert job.cluster.backend == "gce" and job.cluster.workers == 8
    assert job.script == SCRIPT


def test_script_defines_the_contract():
    with open(SCRIPT, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    assert ast.get_docstring(tree)
    functions = {node.name: [a.arg for a in node.args.args] for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert functions["input_fn"] == ["split", "batch_size", "params"]
    assert functions["model_fn"] == ["features", "labels", "params", "training"]
    assert functions["num_examples"] == ["split", "params"]
    source = ast.unparse(tree)
    assert "params.get('synthetic')" in source and "data_dir" in source
    assert "urllib" not in source and "download" not in source.lower()  # no downloads, ever
