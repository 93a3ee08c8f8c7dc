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


def test_a_switch_the_rules_may_skip_leaves_its_target_on_standby(tmp_path):
    """The quickstart's switch out of BSP is decided as the run goes (the loss rule, then the speed rule): its target
    is built for an in-place switch but not warmed up, since a run that stays on BSP never calls it (the ResNet's
    local SGD cost 13-22 s of start-up a node on 2 cores in runs that never left BSP)."""
    launch = _launch(tmp_path)  # BSP then local SGD at 4 workers; the fallback (bsp) is planned already
    assert [(p.protocol, p.build, p.standby) for p in launch.phases] == [("bsp", True, False),
                                                                       ("local-sgd", True, True)]
    assert warm_protocols(launch, {"bsp": 0, "local-sgd": 0}) == ["bsp"]


def test_a_switch_that_will_happen_is_warmed_up(tmp_path):
    """A fixed rule runs the schedule as written: its target is warmed up and the in-place switch pays no
    registration. So is the phase a run starts in (a resume or a relaunch into the target)."""
    fixed = _launch(tmp_path, "policy.switch_rule=fixed")
    assert not any(p.standby for p in fixed.phases)
    assert warm_protocols(fixed, {"bsp": 0, "local-sgd": 0}) == ["bsp", "local-sgd"]
    spec = load(os.path.join(ROOT, "jobs", "quickstart.yaml"), ["cluster.workers=4"])
    resumed = launch_message(spec, RunPlan(spec, spec.policy.fallback), CLUSTER, str(tmp_path), 0, 1)
    assert [p.standby for p in resumed.phases] == [False, False]
    assert "local-sgd" in warm_protocols(resumed, {"bsp": 0, "local-sgd": 0})


def test_the_clip_norm_reaches_every_node_and_none_is_zero(tmp_path):
    assert _launch(tmp_path).clip_norm == 0.0
    assert _launch(tmp_path, "hyperparameters.clip_norm=2.5").clip_norm == 2.5


def test_the_compression_reaches_every_node_and_none_is_empty(tmp_path):
    assert _launch(tmp_path).compression == ""
    assert _launch(tmp_path, "hyperparameters.compression=none").compression == ""
    assert _launch(tmp_path, "hyperparameters.compression=bf16").compression == "bf16"
