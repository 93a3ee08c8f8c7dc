"""Protocol parameters from the spec to every node and into summary.json, against fake agents (no TensorFlow)."""

from __future__ import annotations

from syncswitch.protocols.catalog import synchronous
from syncswitch.wire import codec
from tests.cluster_manager.test_job_lifecycle import _run

SCHEDULE = ("policy.schedule=[{protocol: ssp, staleness: 2, until: 0.4}, "
            "{protocol: dc-asgd, adaptive: true, until: 0.7}, {protocol: bsp, aggregate: 1}]")


def test_params_reach_every_node_and_the_summary(write_spec, tmp_path):
    summary, cluster, _ = _run(write_spec, tmp_path, [SCHEDULE])
    assert summary["status"] == "completed"
    ssp = {"staleness": 2}
    dc = {"lambda": 0.04, "adaptive": True, "decay": 0.95}
    bsp = {"aggregate": 1, "allreduce": True}
    assert [(p["protocol"], p["params"]) for p in summary["schedule"]] == [("ssp", ssp), ("dc-asgd", dc), ("bsp", bsp)]
    chief, other = cluster.nodes[0], cluster.nodes[1]
    assert [e for e in chief.protocol_params if e[0] == "enter_phase"] == [
        ("enter_phase", "ssp", ssp), ("enter_phase", "dc-asgd", dc), ("enter_phase", "bsp", bsp)]
    assert other.protocol_params == [("go", "ssp", ssp), ("go", "dc-asgd", dc), ("go", "bsp", bsp)]
    # Every phase of the launch carries its parameters too (in place: all update paths are built).
    launch = chief.launches[0]
    assert [(p.protocol, codec.from_struct(p.params)) for p in launch.phases][:3] == [
        ("ssp", ssp), ("dc-asgd", dc), ("bsp", bsp)]
    # SSP blocks workers inside a step, so its boundary releases them like BSP's.
    assert chief.commands.count("release") >= 2


def test_the_guard_watches_every_asynchronous_protocol():
    assert synchronous("bsp")
    assert not any(synchronous(p) for p in ("asp", "ssp", "dc-asgd", "fasgd", "specsync"))


def test_a_fallback_protocol_gets_its_default_parameters(write_spec, tmp_path):
    schedule = "policy.schedule=[{protocol: bsp, until: 0.5}, {protocol: asp}]"
    _, cluster, _ = _run(write_spec, tmp_path, [schedule, "policy.fallback=[ssp]"])
    launch = cluster.nodes[0].launches[0]
    extra = [(p.protocol, codec.from_struct(p.params), p.build) for p in launch.phases[2:]]
    assert extra == [("ssp", {"staleness": 3}, True)]
