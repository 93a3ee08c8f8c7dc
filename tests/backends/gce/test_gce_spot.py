"""Spot VMs: a preempted instance is recognised from its status, recreated, and the run goes on from a checkpoint."""

from __future__ import annotations

import dataclasses

import pytest

from syncswitch import spec as specmod
from syncswitch.backends.gce import resources
from syncswitch.cluster_manager.job import JobRun
from tests.cluster_manager.fake_cluster import FakeCluster, Failure, start_fake_evaluator


def test_a_preempted_spot_node_is_named_and_recreated(cloud, backend, make_request):
    info = backend.provision(make_request(2, spot=True))
    assert cloud.bodies("instances.insert")[0]["scheduling"]["provisioning_model"] == "SPOT"
    name = resources.instance_name("job-1", 1)
    assert backend.lost_reason(1) is None  # running: only the agent could have died
    cloud.set_status(name, "TERMINATED")
    assert backend.lost_reason(1) == f"spot instance {name} preempted (TERMINATED)"
    node = backend.replace_node(1)
    assert cloud.methods("instances.delete") == ["instances.delete"]
    inserts = cloud.bodies("instances.insert")
    assert len(inserts) == 3 and inserts[-1]["name"] == name and inserts[-1]["scheduling"]["provisioning_model"] == \
        "SPOT"
    assert node.index == 1 and node.resource_id == info.nodes[1].resource_id
    assert backend.nodes[1] is node
    backend.teardown()
    assert cloud.instance_names() == []


class _SpotCluster:
    """The GCE backend against the fake cloud, with fake agents on its nodes (FakeCluster speaks the wire)."""

    def __init__(self, gce, cluster):
        self.gce, self.cluster = gce, cluster
        self.capabilities = gce.capabilities

    def provision(self, request):
        info = self.gce.provision(request)
        self.cluster.start(request.num_nodes)
        # The fake agents write their checkpoints into the run folder: no copying over FetchCheckpoint here.
        return dataclasses.replace(info, shared_filesystem=True)

    def lost_reason(self, index):
        return self.gce.lost_reason(index)

    def replace_node(self, index):
        node = self.gce.replace_node(index)
        self.cluster.replace(index)
        return node

    def teardown(self):
        self.gce.teardown()
        self.cluster.torn_down = True
        self.cluster.stop()


JOB = """
name: spot
script: EXAMPLES/digits_mlp.py
hyperparameters: {batch_size: 10, learning_rate: 0.05}
workload: {samples: 2000}
cluster: {backend: gce, workers: 2, project: test-proj, spot: true}
evaluation: {every: 0.25}
# The fake loss is a straight line: the switch stays where the schedule puts it.
policy: {switch_rule: fixed}
"""


def test_a_preemption_in_the_middle_of_a_run_is_recovered(cloud, backend, write_spec, tmp_path):
    spec = specmod.load(write_spec(JOB))
    cluster = FakeCluster(total=2000, failure=Failure(worker=1, at=0.6, kind="agent"))
    name = resources.instance_name
    # The preemption: the instance stops, then the agent's stream breaks.
    cluster.on_failure = lambda failure: cloud.set_status(name(job.job_id, 1), "TERMINATED")
    job = JobRun(spec, str(tmp_path / "run"), progress=False, backend=_SpotCluster(backend, cluster),
                 connect=cluster.connect, start_evaluator=start_fake_evaluator)
    summary = job.run()
    assert summary["status"] == "completed"
    (failure,) = summary["failures"]
    assert failure["agent_replaced"] and "preempted (TERMINATED)" in failure["what"]
    assert failure["checkpoint_fraction"] == pytest.approx(0.5)
    assert cluster.replaced == [1]
    assert [b["name"] for b in cloud.bodies("instances.insert")].count(name(job.job_id, 1)) == 2
    assert cloud.instance_names() == []  # torn down
