"""The ray backend on a real 3-node Ray cluster: the quickstart completes one node per Ray node; a job bigger
than the cluster fails in bounded time; a node whose actor dies, or whose whole Ray node is lost, is replaced and
the run completes; a killed manager's run resumes."""

import json
import os
import subprocess
import sys
import tempfile
import time

import pytest

from bench.chaos import Killer
from bench.ray_backend import ActorKiller, NodeRemover
from syncswitch import spec as specmod
from syncswitch.cluster_manager import submission
from syncswitch.errors import ClusterError
from tests.backends.ray.conftest import NODE_ARGS, NODES, cluster_is_clean
from tests.conftest import ROOT

pytestmark = [pytest.mark.cluster, pytest.mark.ray]


def quickstart(write_spec, address: str, **cluster) -> str:
    """jobs/quickstart.yaml as shipped, on the ray backend."""
    with open(os.path.join(ROOT, "jobs", "quickstart.yaml"), encoding="utf-8") as fh:
        text = fh.read().replace("../examples/", "EXAMPLES/")
    options = ", ".join(f"{k}: {json.dumps(v)}" for k, v in {"address": address, **cluster}.items())
    return write_spec(text.replace("cluster: {backend: local, workers: 2}",
                                   f"cluster: {{backend: ray, workers: {NODES}, {options}}}"))


def _records(run) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_the_quickstart_completes_with_one_node_per_ray_node(ray_cluster, write_spec, tmp_path, no_leftovers):
    run = tmp_path / "run"
    summary = submission.submit(specmod.load(quickstart(write_spec, ray_cluster.address)), str(run), progress=False)
    assert summary["status"] == "completed", summary["message"]
    assert summary["final_accuracy"] > 0.6
    journal = json.loads((run / "ray-nodes.json").read_text())
    assert len({agent["node_id"] for agent in journal["agents"].values()}) == NODES  # STRICT_SPREAD
    assert journal["ended"]
    assert "STRICT_SPREAD" in (run / "manager.log").read_text()
    assert cluster_is_clean(ray_cluster.address) == ""


def test_a_job_bigger_than_the_cluster_fails_in_bounded_time(ray_cluster, write_spec, tmp_path, no_leftovers):
    path = quickstart(write_spec, ray_cluster.address, placement_timeout_s=3)
    spec = specmod.load(path, [f"cluster.workers={NODES + 1}"])
    started = time.time()
    with pytest.raises(ClusterError) as info:
        submission.submit(spec, str(tmp_path / "run"), progress=False)
    took = time.time() - started
    assert str(info.value).startswith(f"cluster.workers={NODES + 1}: the Ray cluster could not place")
    assert f"room for {NODES} node(s) of {{CPU: 1}}" in str(info.value)
    assert took < 60, took
    assert cluster_is_clean(ray_cluster.address) == ""


def test_a_checkpoint_dir_a_node_does_not_see_fails_naming_the_node(ray_cluster, tmp_path, no_leftovers):
    """What each node's actor checks: that it sees the run's checkpoint.dir folder the manager made. On one
    machine every node sees every path, so the folder a remote node would not see is one that is not there."""
    from syncswitch.backends import ProvisionRequest
    from syncswitch.backends.ray import RayBackend

    unseen = str(tmp_path / "only-on-the-manager" / "run-0123456789")
    backend = RayBackend()
    request = ProvisionRequest("ckdir", NODES, "t0ken", str(tmp_path / "run"),
                               {"address": ray_cluster.address},
                               checkpoint_dir=unseen)
    with pytest.raises(ClusterError) as info:
        backend.provision(request)
    assert str(info.value).startswith(f"checkpoint.dir: node 0 (Ray node {ray_cluster.address.split(':')[0]}) "
                                      f"does not see {unseen}, which the manager just made")
    assert "mount one shared filesystem" in str(info.value)
    assert cluster_is_clean(ray_cluster.address) == ""


def submit_while(killer, spec, run) -> dict:
    """Runs the job in this process while `killer` (a thread that strikes at a fraction) watches it."""
    killer.start()
    try:
        return submission.submit(spec, str(run), progress=False)
    finally:
        killer.done.set()


def test_a_node_whose_actor_dies_is_replaced_and_the_run_completes(ray_cluster, write_spec, tmp_path,
                                                                    no_leftovers):
    run = tmp_path / "run"
    spec = specmod.load(quickstart(write_spec, ray_cluster.address), ["checkpoint.every=0.1"])
    killer = ActorKiller(run, node=1, at=0.45)
    summary = submit_while(killer, spec, run)
    assert killer.killed_at is not None, "the actor was never killed"
    assert summary["status"] == "completed", summary["message"]
    (failure,) = summary["failures"]
    assert failure["node"] == 1 and failure["agent_replaced"]
    assert "its Ray actor died" in failure["what"] or "agent lost" in failure["what"]
    assert failure["samples_lost"] <= (0.1 + 0.05) * summary["total_samples"]  # one checkpoint interval, about
    assert summary["final_accuracy"] > 0.6
    journal = json.loads((run / "ray-nodes.json").read_text())
    assert any(name.endswith("node1-2") for name in journal["actors"])  # a new actor took the bundle
    assert cluster_is_clean(ray_cluster.address) == ""


def test_resume_after_the_manager_is_killed(ray_cluster, write_spec, tmp_path, no_leftovers):
    run = tmp_path / "run"
    path = quickstart(write_spec, ray_cluster.address)
    command = [sys.executable, "-m", "syncswitch"]
    proc = subprocess.Popen([*command, "submit", path, "--output-dir", str(run), "--quiet", "--set",
                             "checkpoint.every=0.1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    killer = Killer(str(run), "manager", None, 0.5, manager_pid=proc.pid, timeout_s=300)
    killer.run()
    proc.wait(timeout=30)
    assert killer.killed_at is not None and proc.returncode == -9
    result = subprocess.run([*command, "resume", str(run), "--quiet"], check=False, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["backend"] == "ray"
    (resumed,) = summary["resumes"]
    assert resumed["checkpoint_fraction"] >= 0.3
    assert cluster_is_clean(ray_cluster.address) == ""


def test_a_lost_ray_node_is_replaced_and_restored_from_checkpoint_dir(ray_cluster, write_spec, tmp_path,
                                                                     no_leftovers):
    """A whole Ray node goes (its raylet SIGKILLed): its bundle moves to the Ray node added for it, the new
    actor's agent restores from the last checkpoint in checkpoint.dir (the run folder is not shared here)."""
    ray_cluster.add_node(**NODE_ARGS)  # room for the lost node's bundle; the cluster has NODES alive after
    ray_cluster.wait_for_nodes()
    run, shared = tmp_path / "run", tmp_path / "shared"
    spec = specmod.load(quickstart(write_spec, ray_cluster.address, shared_filesystem=False),
                        ["checkpoint.every=0.1", f"checkpoint.dir={shared}"])
    remover = NodeRemover(ray_cluster, str(run), at=0.45)
    summary = submit_while(remover, spec, run)
    assert remover.killed_at is not None, "no Ray node was removed"
    assert summary["status"] == "completed", summary["message"]
    (failure,) = summary["failures"]
    assert failure["node"] == remover.node and failure["agent_replaced"], failure
    assert failure["samples_lost"] <= (0.1 + 0.05) * summary["total_samples"]
    assert summary["final_accuracy"] > 0.6
    journal = json.loads((run / "ray-nodes.json").read_text())
    assert journal["agents"][str(remover.node)]["node_id"] != remover.removed_node_id  # moved to a live node
    (folder,) = shared.iterdir()  # the run's own folder in checkpoint.dir holds every checkpoint
    assert json.loads((folder / "durable.json").read_text())["checkpoints"]
    assert list(folder.glob("model-f1.ckpt-*.index")), "no checkpoint after the recovery"
    assert not (run / "checkpoints").exists()
    # The nodes worked in temp folders of their own: their logs came back to the run folder, the folders went.
    assert not os.path.exists(os.path.join(tempfile.gettempdir(), f"syncswitch-{summary['job_id']}"))
    for index in range(NODES):
        assert "agent" in (run / "nodes" / str(index) / "agent.log").read_text(), index
        assert list((run / "nodes" / str(index)).glob("task-*.log")), index
    assert cluster_is_clean(ray_cluster.address) == ""
