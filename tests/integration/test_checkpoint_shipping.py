"""Nodes that share no filesystem with the manager: checkpoints are written node-locally and copied over gRPC.

The local backend's `shared_filesystem: false` makes its agents behave like remote VMs for checkpoints.
"""

import json
import os

import pytest

from syncswitch import spec as specmod
from syncswitch.cluster_manager import submission

pytestmark = pytest.mark.cluster

JOB = """
name: shipped
script: EXAMPLES/digits_mlp.py
hyperparameters: {batch_size: 16, learning_rate: 0.05, momentum: 0.9}
workload: {epochs: 1}
cluster: {backend: local, workers: 2, shared_filesystem: false}
evaluation: {every: 0.5}
# The switch where the schedule puts it: these tests drive the switch mechanics, not the switch rule.
policy: {switch_at: 0.5, switch_mode: relaunch, switch_rule: fixed}
"""


def test_checkpoints_are_fetched_from_the_chief(write_spec, tmp_path, no_leftovers):
    job = specmod.load(write_spec(JOB))
    summary = submission.submit(job, output_dir=str(tmp_path / "run"), progress=False)
    assert summary["status"] == "completed", summary["message"]
    assert summary["evaluations"] and summary["evaluations"][-1]["fraction"] >= 1.0
    run = tmp_path / "run"
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]

    # the chief wrote every checkpoint in its own work dir ...
    node_dir = run / "nodes" / "0" / "checkpoints"
    written = [r["path"] for r in records if r["kind"] in ("eval_checkpoint", "saved")]
    assert written and all(os.path.dirname(p) == str(node_dir) for p in written)
    assert not (run / "nodes" / "1" / "checkpoints").exists() or \
        not any(n.endswith(".index") for n in os.listdir(run / "nodes" / "1" / "checkpoints"))

    # ... the evaluator read copies in the run folder, complete and without temporary files
    evaluated = [r["checkpoint"] for r in records if r["kind"] == "evaluation"]
    assert len(evaluated) == len(summary["evaluations"]) >= 2
    for path in evaluated:
        assert os.path.dirname(path) == str(run / "checkpoints")
        name = os.path.basename(path)
        assert (run / "checkpoints" / f"{name}.index").read_bytes() == (node_dir / f"{name}.index").read_bytes()
    assert not [n for n in os.listdir(run / "checkpoints") if n.startswith(".")]

    # the relaunched tasks restored the switch checkpoint from the chief's node-local folder
    (switch,) = summary["switches"]
    assert switch["mode"] == "relaunch"
    ready = [r for r in records if r["kind"] == "ready"]
    assert len(ready) == 4 and min(r["fraction"] for r in ready[2:]) >= 0.5
