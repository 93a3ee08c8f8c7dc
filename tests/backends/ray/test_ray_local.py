"""`cluster.address: null`: the job starts its own local Ray, and nothing of it outlives the job."""

import json
import time

import psutil
import pytest

from syncswitch import spec as specmod
from syncswitch.cluster_manager import submission

pytestmark = [pytest.mark.cluster, pytest.mark.ray]

JOB = """
name: digits
script: EXAMPLES/digits_mlp.py
hyperparameters: {batch_size: 16, learning_rate: 0.05, momentum: 0.9}
workload: {epochs: 2}
cluster: {backend: ray, address: null, workers: 2}
policy: {switch_at: 0.5}
evaluation: {every: 0.5}
"""


def test_a_local_ray_is_started_for_the_job_and_stopped_after_it(write_spec, tmp_path, no_leftovers, monkeypatch):
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    run = tmp_path / "run"
    summary = submission.submit(specmod.load(write_spec(JOB)), str(run), progress=False)
    assert summary["status"] == "completed", summary["message"]
    journal = json.loads((run / "ray-nodes.json").read_text())
    session = journal["local_ray_session"]
    assert session and journal["ended"] and journal["placement_group"]
    deadline = time.time() + 15  # ray.shutdown() signals its processes; they take a moment to exit
    while True:
        left = [p.info["cmdline"] for p in psutil.process_iter(["cmdline"])
                if session in " ".join(p.info["cmdline"] or [])]
        if not left or time.time() > deadline:
            break
        time.sleep(0.2)
    assert not left, f"processes of the job's local Ray left running: {left}"
