"""The ray backend's `cluster:` options at spec load, and its placement decisions (no Ray needed)."""

import pytest

from syncswitch import spec as specmod
from syncswitch.backends.ray import placement
from syncswitch.errors import SpecError

JOB = """
name: r
script: EXAMPLES/digits_mlp.py
hyperparameters: {batch_size: 16, learning_rate: 0.05}
workload: {epochs: 1}
cluster: CLUSTER
"""


def _load(write_spec, cluster: str):
    return specmod.load(write_spec(JOB.replace("CLUSTER", cluster)))


def test_a_valid_cluster_section_loads(write_spec):
    spec = _load(write_spec, "{backend: ray, address: 'ray://head:10001', workers: 3, "
                             "resources_per_node: {CPU: 4, GPU: 1, accelerator_type:T4: 0.01}}")
    assert spec.cluster.backend == "ray" and spec.cluster.workers == 3
    assert spec.cluster.options["resources_per_node"] == {"CPU": 4.0, "GPU": 1.0, "accelerator_type:T4": 0.01}
    assert _load(write_spec, "{backend: ray, address: null}").cluster.options == {"address": None}


@pytest.mark.parametrize("cluster, message", [
    ("{backend: ray, adress: auto}", "unknown key cluster.adress (did you mean 'address'?)"),
    ("{backend: ray, resources_per_node: {cpu: 2}}", "case-sensitive (did you mean 'CPU'?)"),
    ("{backend: ray, resources_per_node: {CPU: -1}}", "cluster.resources_per_node.CPU=-1: must be a number >= 0"),
    ("{backend: ray, resources_per_node: {CPU: 0}}", "at least one resource must be > 0"),
    ("{backend: ray, address: 'http://x'}", "cluster.address='http://x': must be null"),
    ("{backend: ray, placement_timeout_s: 0}", "cluster.placement_timeout_s=0"),
])
def test_bad_options_name_the_field(write_spec, cluster, message):
    with pytest.raises(SpecError, match=None) as info:
        _load(write_spec, cluster)
    assert message in str(info.value)


def _node(cpu, gpu=0):
    return {"Alive": True, "Resources": {"CPU": cpu, "GPU": gpu}}


def test_strict_spread_where_enough_ray_nodes_hold_a_bundle():
    nodes = [_node(4), _node(4), _node(2)]
    assert placement.strategy(nodes, {"CPU": 2}, 3)[0] == placement.STRICT
    strategy, why = placement.strategy(nodes, {"CPU": 4}, 3)
    assert strategy == placement.SPREAD and "only 2 Ray node(s)" in why
    assert placement.shortfall(nodes, {"CPU": 4}, 2) == ""


def test_the_shortfall_counts_bundles_per_node():
    nodes = [_node(4, 1), _node(4, 0)]
    assert placement.room(nodes, {"CPU": 2}) == (4, 2)
    text = placement.shortfall(nodes, {"CPU": 1, "GPU": 1}, 2)
    assert text.startswith("the Ray cluster has room for 1 node(s) of {CPU: 1, GPU: 1}")


def test_without_ray_a_job_gets_the_install_hint(monkeypatch, tmp_path):
    import sys

    from syncswitch.backends import ProvisionRequest
    from syncswitch.backends.ray import INSTALL_HINT, RayBackend
    from syncswitch.errors import ClusterError

    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` meets where Ray is not installed
    with pytest.raises(ClusterError) as info:
        RayBackend().provision(ProvisionRequest("j", 2, "t", str(tmp_path), {}))
    assert str(info.value) == INSTALL_HINT == "the ray backend needs Ray: pip install 'syncswitch[ray]'"
    RayBackend().teardown()  # nothing was created: nothing to do
