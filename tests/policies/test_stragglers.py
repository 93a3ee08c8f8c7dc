"""Straggler policies: shared conformance for every registered one, and the greedy and elastic sequences."""

import dataclasses

import pytest

from syncswitch.errors import SpecError
from syncswitch.policies import STRAGGLER_POLICIES, Action, PolicyContext, StragglerPolicy
from syncswitch.protocols.catalog import synchronous

NAMES = STRAGGLER_POLICIES.names()


def context(**kw):
    base = dict(now_s=0.0, protocol="bsp", stragglers=frozenset(), idle=frozenset(), num_workers=4,
                bsp_share_done=False)
    ctx = {**base, **kw}
    return PolicyContext(**{"synchronous": synchronous(ctx["protocol"]), **ctx})


class FakeManager:
    """Applies actions the way the manager will, and keeps the clock and the detector's straggler set."""

    def __init__(self, policy, num_workers=4):
        self.policy = policy
        self.ctx = context(num_workers=num_workers)
        self.log = []

    def at(self, now_s, **changes):
        self.ctx = dataclasses.replace(self.ctx, now_s=now_s, **changes)
        return self

    def detect(self, worker):
        self.ctx = dataclasses.replace(self.ctx, stragglers=self.ctx.stragglers | {worker})
        return self.apply(self.policy.on_detected(worker, self.ctx))

    def clear(self, worker):
        self.ctx = dataclasses.replace(self.ctx, stragglers=self.ctx.stragglers - {worker})
        return self.apply(self.policy.on_cleared(worker, self.ctx))

    def apply(self, actions):
        self.ctx = apply(self.ctx, actions)
        self.log.extend((self.ctx.now_s, a.kind, a.protocol or a.workers) for a in actions)
        return actions


def apply(ctx, actions):
    for a in actions:
        if a.kind == "switch":
            ctx = dataclasses.replace(ctx, protocol=a.protocol, synchronous=synchronous(a.protocol))
        elif a.kind == "shrink":
            ctx = dataclasses.replace(ctx, idle=ctx.idle | set(a.workers))
        else:
            ctx = dataclasses.replace(ctx, idle=ctx.idle - set(a.workers))
    return ctx


# ----------------------------------------------------------------------------- conformance


@pytest.mark.parametrize("name", NAMES)
def test_registered_under_its_name(name):
    cls = STRAGGLER_POLICIES.get(name)
    assert issubclass(cls, StragglerPolicy) and cls.name == name
    assert cls.__doc__ and len(cls.__doc__.splitlines()[0]) < 110


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("protocol", ["bsp", "asp"])
def test_nothing_once_the_bsp_share_is_done(name, protocol):
    policy = STRAGGLER_POLICIES.get(name)()
    for stragglers in (frozenset(), frozenset({1}), frozenset({1, 2})):
        ctx = context(protocol=protocol, stragglers=stragglers, bsp_share_done=True)
        assert policy.on_detected(1, ctx) == [] and policy.on_cleared(1, ctx) == []


@pytest.mark.parametrize("name", NAMES)
def test_no_reaction_to_a_detection_under_asp(name):
    policy = STRAGGLER_POLICIES.get(name)()
    assert policy.on_detected(2, context(protocol="asp", stragglers=frozenset({2}))) == []


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("worker", [0, 1, 3])
def test_idempotent(name, worker):
    # Same context, same answer; and once the answer is applied, nothing more is asked.
    policy = STRAGGLER_POLICIES.get(name)()
    ctx = context(stragglers=frozenset({worker}))
    first = policy.on_detected(worker, ctx)
    assert policy.on_detected(worker, ctx) == first
    assert policy.on_detected(worker, apply(ctx, first)) == []
    cleared = dataclasses.replace(apply(ctx, first), stragglers=frozenset())
    back = policy.on_cleared(worker, cleared)
    assert policy.on_cleared(worker, apply(cleared, back)) == []


@pytest.mark.parametrize("name", NAMES)
def test_actions_are_well_formed(name):
    policy = STRAGGLER_POLICIES.get(name)()
    manager = FakeManager(policy)
    for worker in (1, 2, 3):
        for action in manager.detect(worker):
            assert isinstance(action, Action) and action.reason
            assert all(0 <= w < 4 for w in action.workers)


def test_none_never_acts():
    manager = FakeManager(STRAGGLER_POLICIES.get("none")())
    manager.at(1.0).detect(1), manager.at(2.0).detect(2), manager.at(3.0).clear(1), manager.at(4.0).clear(2)
    assert manager.log == []


# ----------------------------------------------------------------------------- greedy


def test_greedy_switches_to_asp_and_back_once_free_of_stragglers():
    manager = FakeManager(STRAGGLER_POLICIES.get("greedy")())
    manager.at(10.0).detect(1)
    manager.at(14.0).detect(2)     # overlapping straggler: already on ASP
    manager.at(30.0).clear(1)      # worker 2 still slow: stay on ASP
    manager.at(42.0).clear(2)
    manager.at(50.0).detect(3)
    manager.at(60.0, bsp_share_done=True).clear(3)  # past the BSP share: stay on ASP
    assert manager.log == [(10.0, "switch", "asp"), (42.0, "switch", "bsp"), (50.0, "switch", "asp")]
    assert manager.ctx.protocol == "asp"


def test_greedy_goes_to_the_runs_switch_target():
    greedy = STRAGGLER_POLICIES.get("greedy")()
    (action,) = greedy.on_detected(1, context(switch_to="lookahead"))
    assert (action.kind, action.protocol) == ("switch", "lookahead")
    assert greedy.on_detected(1, context(protocol="lookahead", switch_to="lookahead")) == []  # already there


def test_greedy_leaves_a_scheduled_asp_phase_alone():
    greedy = STRAGGLER_POLICIES.get("greedy")()
    assert greedy.on_cleared(1, context(protocol="asp", scheduled="asp")) == []
    assert greedy.on_cleared(1, context(protocol="bsp")) == []


# ----------------------------------------------------------------------------- elastic


def test_elastic_shrinks_to_the_healthy_workers_and_leaves_regrowth_to_the_switch():
    manager = FakeManager(STRAGGLER_POLICIES.get("elastic")())
    manager.at(10.0).detect(1)
    manager.at(12.0).detect(3)
    manager.at(13.0).detect(1)     # already idle
    manager.at(20.0).clear(1)      # the group grows back at the switch to ASP, not here
    manager.at(25.0).detect(0)     # the chief runs the sync queue runner: never idled
    assert manager.log == [(10.0, "shrink", (1,)), (12.0, "shrink", (3,))]
    assert manager.ctx.idle == {1, 3} and manager.ctx.protocol == "bsp"


def test_elastic_keeps_at_least_one_active_worker():
    elastic = STRAGGLER_POLICIES.get("elastic")(protected=())
    assert elastic.on_detected(0, context(num_workers=2, idle=frozenset({1}))) == []
    assert elastic.on_detected(0, context(num_workers=2)) == [Action("shrink", workers=(0,),
                                                                     reason="worker 0 is a straggler")]


def test_elastic_idles_two_equal_stragglers_together_when_the_rest_is_faster():
    # 2 of 4 at a third of the speed: idling one alone leaves 3 x 1/3 < 4 x 1/3, both together 2 x 1 > 4/3.
    elastic = STRAGGLER_POLICIES.get("elastic")()
    rates = {0: 9.0, 1: 9.0, 2: 3.0, 3: 3.0}
    assert elastic.on_detected(2, context(stragglers=frozenset({2}), rates=rates)) == []
    [action] = elastic.on_detected(3, context(stragglers=frozenset({2, 3}), rates=rates))
    assert action.workers == (2, 3) and action.reason == "workers 2, 3 slow: group speed 12 -> 18 worker-steps/s"


@pytest.mark.parametrize("slow_rate, shrinks", [(5.0, True), (8.0, False)])
def test_elastic_keeps_a_straggler_whose_removal_would_slow_the_group(slow_rate, shrinks):
    # One of 4 at 5/10: 3 x 10 > 4 x 5, idle it. At 8/10: 3 x 10 < 4 x 8, the group is faster with it.
    elastic = STRAGGLER_POLICIES.get("elastic")()
    rates = {0: 10.0, 1: 10.0, 2: 10.0, 3: slow_rate}
    actions = elastic.on_detected(3, context(stragglers=frozenset({3}), rates=rates))
    assert bool(actions) is shrinks and all(a.workers == (3,) for a in actions)


def test_elastic_without_rates_idles_the_straggler_as_the_paper_does():
    elastic = STRAGGLER_POLICIES.get("elastic")()
    rates = {0: 10.0, 1: 10.0, 3: 8.0}  # worker 2 had no sample in the last window
    assert elastic.on_detected(3, context(stragglers=frozenset({3}), rates=rates)) == [
        Action("shrink", workers=(3,), reason="worker 3 is a straggler")]


# ----------------------------------------------------------------------------- errors


def test_unknown_policy_lists_valid_names():
    with pytest.raises(SpecError, match=r"unknown straggler policy 'elastik' \(did you mean 'elastic'\?\); "
                                        r"valid: elastic, greedy, none"):
        STRAGGLER_POLICIES.get("elastik")


@pytest.mark.parametrize("kwargs", [dict(kind="pause"), dict(kind="switch"), dict(kind="shrink"),
                                    dict(kind="switch", protocol="asp", workers=(1,)),
                                    dict(kind="grow", protocol="bsp", workers=(1,))])
def test_malformed_actions_are_rejected(kwargs):
    with pytest.raises(ValueError):
        Action(**kwargs)


GREEDY_JOB = """
name: greedy
script: EXAMPLES/digits_mlp.py
hyperparameters: {batch_size: 16, learning_rate: 0.05}
workload: {epochs: 1}
cluster: {backend: local, workers: 4}
stragglers: {policy: greedy}
"""


@pytest.mark.parametrize("target, interlude", [("local-sgd", "lookahead"), ("ssp", "lookahead"), ("asp", "asp"),
                                                ("lookahead", "lookahead")])
def test_greedys_interlude_is_a_protocol_where_nobody_waits(write_spec, target, interlude):
    """A straggler holds every worker of a protocol that blocks (local SGD's averages, SSP's bound) as it holds BSP:
    the interlude then runs `lookahead`, the best non-blocking target measured, not the run's switch target."""
    from syncswitch import spec as specmod
    from syncswitch.cluster_manager.plan import RunPlan

    job = specmod.load(write_spec(GREEDY_JOB), [f"policy.switch_to={target}"])
    plan = RunPlan(job)
    assert plan.interlude.protocol == interlude
    assert plan.interlude.protocol in plan.extra_protocols() + [p.protocol for p in plan]
