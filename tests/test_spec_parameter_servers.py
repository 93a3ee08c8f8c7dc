"""`cluster.parameter_servers`: per-node or a number of PS tasks, each backend's default, and where the PS tasks go."""

import pytest

from syncswitch import spec as specmod
from syncswitch.backends.base import ClusterInfo, NodeInfo
from syncswitch.errors import SpecError
from tests.conftest import MINIMAL


def load(write_spec, *overrides):
    return specmod.load(write_spec(MINIMAL), ["cluster.workers=4", *overrides]).cluster


def test_local_default_is_one_ps_task(write_spec):
    cluster = load(write_spec)
    assert cluster.parameter_servers == 1 and cluster.ps_tasks == 1


def test_gce_default_is_one_ps_task_per_node(write_spec):
    cluster = load(write_spec, "cluster.backend=gce", "cluster.project=my-project-1")
    assert cluster.parameter_servers == 0 and cluster.ps_tasks == 4


@pytest.mark.parametrize("value, tasks", [("per-node", 4), (1, 1), (3, 3), (4, 4)])
def test_explicit_layouts(write_spec, value, tasks):
    assert load(write_spec, f"cluster.parameter_servers={value}").ps_tasks == tasks


@pytest.mark.parametrize("value, message", [
    ("0", "cluster.parameter_servers=0: must be 'per-node' or a whole number of PS tasks from 1 to "
          "cluster.workers (4)"),
    ("5", "cluster.parameter_servers=5: must be"),
    ("2.5", "cluster.parameter_servers=2.5: must be"),
    ("per_node", "cluster.parameter_servers='per_node': must be 'per-node'"),
    ("true", "cluster.parameter_servers=True: must be"),
])
def test_bad_values_name_the_field(write_spec, value, message):
    with pytest.raises(SpecError) as info:
        load(write_spec, f"cluster.parameter_servers={value}")
    assert message in str(info.value) and "\n" not in str(info.value)


def test_ps_tasks_are_on_the_first_nodes():
    nodes = tuple(NodeInfo(i, f"10.0.0.{i}", f"10.0.0.{i}:1", 2222, 2223) for i in range(3))
    info = ClusterInfo("j", nodes)
    assert info.ps_hosts(1) == ["10.0.0.0:2222"]
    assert info.ps_hosts(0) == info.ps_hosts() == ["10.0.0.0:2222", "10.0.0.1:2222", "10.0.0.2:2222"]


def test_dry_run_names_the_layout(write_spec):
    from syncswitch.cluster_manager.submission import dry_run

    job = specmod.load(write_spec(MINIMAL), ["cluster.workers=3"])
    assert "parameter servers: 1 PS task(s), on node(s) 0..0" in dry_run(job)
    job = specmod.load(write_spec(MINIMAL), ["cluster.workers=3", "cluster.parameter_servers=per-node"])
    assert "parameter servers: one PS task per node" in dry_run(job)
