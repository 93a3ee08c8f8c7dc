"""The manager's straggler runtime without a cluster: injection timeline, policy actions, greedy phase plans."""

import pytest

from syncswitch.cluster_manager.plan import RunPlan
from syncswitch.cluster_manager.stragglers import Slowdown, StragglerController
from syncswitch.spec import NONBLOCKING_SWITCH_TO, Injection, StragglerSpec


def _controller(policy="none", injections=(), workers=4):
    spec = StragglerSpec(policy=policy, window_s=1.0, consecutive=2, injections=tuple(injections))
    ctl = StragglerController(spec, workers)
    ctl.t0 = 100.0
    return ctl


def test_injections_start_at_their_fraction_and_end_after_their_duration():
    ctl = _controller(injections=[Injection(1, 0.1, 5.0, 30.0), Injection(1, 0.2, 5.0, 10.0)])
    assert ctl.on_progress(0.05, 101.0) == []
    assert ctl.on_progress(0.12, 102.0) == [Slowdown(1, delay_s=0.03)]
    # due, but worker 1 is still slowed: waits for the first to end
    assert ctl.on_progress(0.25, 103.0) == []
    assert ctl.on_progress(0.3, 107.5) == [Slowdown(1), Slowdown(1, delay_s=0.01)]
    ctl.finish(110.0)
    first, second = ctl.injected
    assert (first["started_at_s"], first["ended_at_s"]) == (2.0, 7.5)
    assert (second["started_at_s"], second["ended_at_s"]) == (7.5, 10.0)


def test_relaunch_reapplies_running_slowdowns():
    ctl = _controller(injections=[Injection(2, 0.0, 60.0, 30.0)])
    ctl.on_progress(0.0, 100.0)
    assert ctl.reapply() == [Slowdown(2, delay_s=0.03)]


def test_cpu_slowdowns_divide_the_budget_and_outlive_a_relaunch():
    spec = StragglerSpec(method="cpu", injections=(Injection(1, 0.1, 5.0, slowdown=3.0),))
    ctl = StragglerController(spec, 4)
    ctl.t0 = 100.0
    assert ctl.on_progress(0.1, 100.0) == [Slowdown(1, factor=3.0)]
    assert ctl.reapply() == []  # the node's cgroup keeps its quota across a task relaunch
    assert ctl.on_progress(0.5, 105.0) == [Slowdown(1)]
    assert ctl.injected[0]["method"] == "cpu" and ctl.injected[0]["slowdown"] == 3.0


def _feed(ctl, seconds, slow=None, protocol="bsp"):
    """Metrics every 0.25 s; every worker 10 steps per busy second, `slow` 5."""
    found, actions = [], []
    steps = {w: 0.0 for w in range(ctl.num_workers)}
    for tick in range(int(seconds * 4)):
        now = 100.0 + tick * 0.25
        for worker in range(ctl.num_workers):
            steps[worker] += (5 if worker == slow else 10) * 0.25
            f, a = ctl.on_metrics(worker, int(steps[worker]), now - 100.0, now, protocol, "bsp")
            found += f
            actions += a
    return found, actions


def test_elastic_shrinks_once_and_excludes_the_idled_worker():
    ctl = _controller("elastic")
    found, actions = _feed(ctl, 6, slow=3)
    assert [(f.worker, f.kind) for f in found] == [(3, "detected")]
    assert [(a.kind, a.workers) for a in actions] == [("shrink", (3,))]
    assert ctl.idle == {3}
    ctl.phase_changed(bsp_share_done=True)
    assert ctl.idle == set() and not ctl.watching
    assert _feed(ctl, 6, slow=1) == ([], [])  # after the BSP share nothing is watched


def test_clean_cluster_raises_nothing_and_none_policy_never_acts():
    ctl = _controller("none")
    assert _feed(ctl, 10) == ([], [])
    found, actions = _feed(_controller("none"), 6, slow=2)
    assert found and actions == []


def _plan(text, write_spec):
    from syncswitch import spec as specmod

    return RunPlan(specmod.load(write_spec(text)))


GREEDY = """
name: g
script: EXAMPLES/digits_mlp.py
hyperparameters: {batch_size: 16, learning_rate: 0.05}
workload: {epochs: 1}
cluster: {workers: 4}
policy: {switch_at: SWITCH}
stragglers: {policy: greedy}
"""


# Greedy's default interlude: a run with a straggler policy switches into `lookahead` by default, and a target that
# blocks (local SGD) is replaced by it.
INTERLUDE = NONBLOCKING_SWITCH_TO
DCASGD = {"lambda": 0.5, "adaptive": False, "decay": 0.95}


def test_greedy_plan_owes_the_bsp_share_back(write_spec):
    plan = _plan(GREEDY.replace("SWITCH", "0.4"), write_spec)
    # Greedy's interlude is the run's switch target (the paper's is ASP, which `policy.switch_to: asp` gives), or
    # `lookahead` where the target blocks, as the default local SGD does (plan.interlude_for).
    bsp_cfg, async_cfg = plan[0].config, plan.config_for(INTERLUDE)
    plan.interrupt(0, 0.1)
    assert plan.greedy_owed == pytest.approx(0.3)
    assert [(p.protocol, p.until, p.config) for p in plan] == [("bsp", 0.1, bsp_cfg),
                                                               (INTERLUDE, 1.0, async_cfg)]
    assert plan.owes_bsp(1)
    plan.resume(1, 0.25)  # then the owed BSP share, then the schedule's own tail
    assert [(p.protocol, round(p.until, 6)) for p in plan] == [("bsp", 0.1), (INTERLUDE, 0.25),
                                                               ("bsp", 0.55), (INTERLUDE, 1.0)]
    assert sum(p.until - prev.until for prev, p in zip(plan, plan.phases[1:]) if p.protocol == "bsp") \
        + plan[0].until == pytest.approx(0.4)
    assert plan.greedy_tail is None and not plan.owes_bsp(3)


def test_greedy_plan_never_runs_past_the_end(write_spec):
    plan = _plan(GREEDY.replace("SWITCH", "0.5"), write_spec)
    plan.interrupt(0, 0.2)
    plan.resume(1, 0.9)
    assert [(p.protocol, p.until) for p in plan] == [("bsp", 0.2), (INTERLUDE, 0.9), ("bsp", 1.0)]


def test_greedy_interlude_runs_the_switch_target_with_its_parameters(write_spec):
    text = GREEDY.replace("{switch_at: SWITCH}", "{switch_at: 0.5, switch_to: {protocol: dc-asgd, lambda: 0.5, "
                                                 "hyperparameters: {learning_rate: 0.01}}}")
    plan = _plan(text, write_spec)
    plan.interrupt(0, 0.2)
    interlude = plan[1]
    assert (interlude.protocol, interlude.until, interlude.params) == ("dc-asgd", 1.0, DCASGD)
    assert interlude.config.learning_rate == 0.01
    plan = _plan(GREEDY.replace("{switch_at: SWITCH}", "{switch_at: 0.5, switch_to: asp}"), write_spec)
    plan.interrupt(0, 0.2)
    assert plan[1].protocol == "asp"  # the paper's greedy policy


def test_a_resumed_plan_keeps_greedys_interlude_settings(write_spec):
    # A manager restarted during greedy's interlude rebuilds its plan from the saved phases: the interlude keeps
    # the switch target's parameters and hyperparameters, not the protocol's defaults.
    policy = ("{schedule: [{protocol: bsp, until: 0.5}, {protocol: lookahead, until: 0.8}, {protocol: bsp}], "
              "switch_to: {protocol: dc-asgd, lambda: 0.5, hyperparameters: {learning_rate: 0.01}}}")
    text = GREEDY.replace("{switch_at: SWITCH}", policy)
    plan = _plan(text, write_spec)
    plan.interrupt(0, 0.2)
    fresh = _plan(text, write_spec)
    fresh.restore(plan.describe_phases())
    assert [(p.protocol, p.until) for p in fresh] == [("bsp", 0.2), ("dc-asgd", 1.0)]
    assert fresh[1].params == DCASGD and fresh[1].config.learning_rate == 0.01


def test_greedy_keeps_a_cut_phases_parameters(write_spec):
    # A BSP phase with backup workers cut by greedy, and the BSP share owed back after the interlude, still aggregate
    # the first 3 of 4 gradients: cutting a phase used to rebuild it from its protocol and end alone.
    policy = "{schedule: [{protocol: bsp, until: 0.5, aggregate: 3}, {protocol: asp}]}"
    plan = _plan(GREEDY.replace("{switch_at: SWITCH}", policy), write_spec)
    given = plan[0].params
    assert given["aggregate"] == 3
    plan.interrupt(0, 0.2)
    assert (plan[0].protocol, plan[0].until, plan[0].params) == ("bsp", 0.2, given)
    plan.resume(1, 0.3)
    owed = plan[2]
    assert (owed.protocol, round(owed.until, 6), owed.params) == ("bsp", 0.6, given)
    assert owed.config == plan[0].config
    assert [(p.protocol, p.until) for p in plan][-1] == ("asp", 1.0)


def test_elastic_runs_bsp_through_the_parameter_servers(write_spec):
    # An all-reduce waits for every worker: a policy that leaves workers out of the group mid-phase needs the
    # parameter servers to aggregate, on every BSP phase and on a fallback's alike.
    elastic = _plan(GREEDY.replace("{switch_at: SWITCH}", "{switch_at: 0.5}").replace("greedy", "elastic"),
                    write_spec)
    assert elastic.params(elastic[0]) == {"aggregate": 0, "allreduce": False}
    assert elastic.params("bsp") == {"aggregate": 0, "allreduce": False}
    assert elastic.params(elastic[1]) == elastic[1].params  # other protocols as given
    greedy = _plan(GREEDY.replace("SWITCH", "0.5"), write_spec)
    assert greedy.params(greedy[0]) == {"aggregate": 0, "allreduce": True}  # the default: all-reduce
