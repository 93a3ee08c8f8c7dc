"""The Launch message: which protocols a node builds, and which of them it warms up before training."""

import os

from syncswitch.backends.base import ClusterInfo, NodeInfo
from syncswitch.cluster_manager.launch import launch_message
from syncswitch.cluster_manager.plan import RunPlan
from syncswitch.node.control import warm_protocols
from syncswitch.spec.document import load

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLUSTER = ClusterInfo("j", tuple(NodeInfo(i, "127.0.0.1", f"127.0.0.1:{9000 + i}", 9100 + i, 9200 + i)
                                 for i in range(4)))


def _launch(tmp_path, *overrides, guard=True):
    spec = load(os.path.join(ROOT, "jobs", "quickstart.yaml"), ["cluster.workers=4", *overrides])
    plan = RunPlan(spec, spec.policy.fallback if guard else ())
    return launch_message(spec, plan, CLUSTER, str(tmp_path), 0, 0)


def test_a_fallback_rung_is_built_on_standby_and_not_warmed_up(tmp_path):
    """An ASP job with the guard builds BSP for its rollback: warming it up cost every run ~1 s of start-up on 2
    cores for a phase that runs only after a rollback (which then pays its first call)."""
    launch = _launch(tmp_path, "policy.schedule=[{protocol: asp}]")
    built = {p.protocol: p for p in launch.phases if p.build}
    assert sorted(built) == ["asp", "bsp"]
    assert not built["asp"].standby and built["bsp"].standby
    engines = {"asp": object(), "bsp": object()}  # in build order, as the graph holds them
    assert warm_protocols(launch, engines) == ["asp"]


def test_every_planned_phase_is_warmed_up(tmp_path):
    """The schedule's own phases stay warmed up: an in-place switch pays no registration."""
    launch = _launch(tmp_path)  # BSP then the switch target; the fallback (bsp) is planned already
    planned = [p.protocol for p in launch.phases if p.build]
    assert not any(p.standby for p in launch.phases)
    assert warm_protocols(launch, dict.fromkeys(sorted(set(planned)))) == sorted(set(planned))
    assert warm_protocols(_launch(tmp_path, guard=False), {"bsp": 0, "local-sgd": 0}) == ["bsp", "local-sgd"]
