"""The manager's straggler runtime without a cluster: injection timeline, policy actions, greedy phase plans."""

import pytest

from syncswitch.cluster_manager.stragglers import StragglerController, greedy_interrupt, greedy_resume
from syncswitch.spec import Injection, Phase, StragglerSpec


def _controller(policy="none", injections=(), workers=4):
    sent = []
    spec = StragglerSpec(policy=policy, window_s=1.0, consecutive=2, injections=tuple(injections))
    ctl = StragglerController(spec, workers, lambda worker, cmd: sent.append((worker, cmd)))
    ctl.t0 = 100.0
    return ctl, sent


def test_injections_start_at_their_fraction_and_end_after_their_duration():
    ctl, sent = _controller(injections=[Injection(1, 0.1, 5.0, 30.0), Injection(1, 0.2, 5.0, 10.0)])
    ctl.on_progress(0.05, 101.0)
    assert sent == []
    ctl.on_progress(0.12, 102.0)
    assert sent == [(1, {"cmd": "set_delay", "delay_s": 0.03})]
    ctl.on_progress(0.25, 103.0)  # due, but worker 1 is still slowed: waits for the first to end
    assert len(sent) == 1
    ctl.on_progress(0.3, 107.5)
    assert sent[1:] == [(1, {"cmd": "set_delay", "delay_s": 0.0}), (1, {"cmd": "set_delay", "delay_s": 0.01})]
    ctl.finish(110.0)
    first, second = ctl.injected
    assert (first["started_at_s"], first["ended_at_s"]) == (2.0, 7.5)
    assert (second["started_at_s"], second["ended_at_s"]) == (7.5, 10.0)


def test_relaunch_reapplies_running_slowdowns():
    ctl, sent = _controller(injections=[Injection(2, 0.0, 60.0, 30.0)])
    ctl.on_progress(0.0, 100.0)
    sent.clear()
    ctl.reapply()
    assert sent == [(2, {"cmd": "set_delay", "delay_s": 0.03})]


def _feed(ctl, seconds, slow=None, protocol="bsp"):
    """Metrics every 0.25 s; every worker 10 steps per busy second, `slow` 5."""
    found, actions = [], []
    steps = {w: 0.0 for w in range(ctl.num_workers)}
    for tick in range(int(seconds * 4)):
        now = 100.0 + tick * 0.25
        for worker in range(ctl.num_workers):
            steps[worker] += (5 if worker == slow else 10) * 0.25
            event = {"local_steps": int(steps[worker]), "busy_s": now - 100.0}
            f, a = ctl.on_metrics(worker, event, now, protocol, "bsp")
            found += f
            actions += a
    return found, actions


def test_elastic_shrinks_once_and_excludes_the_idled_worker():
    ctl, _ = _controller("elastic")
    found, actions = _feed(ctl, 6, slow=3)
    assert [(f.worker, f.kind) for f in found] == [(3, "detected")]
    assert [(a.kind, a.workers) for a in actions] == [("shrink", (3,))]
    assert ctl.idle == {3}
    ctl.phase_changed(bsp_share_done=True)
    assert ctl.idle == set() and not ctl.watching
    assert _feed(ctl, 6, slow=1) == ([], [])  # after the BSP share nothing is watched


def test_clean_cluster_raises_nothing_and_none_policy_never_acts():
    ctl, _ = _controller("none")
    assert _feed(ctl, 10) == ([], [])
    found, actions = _feed(_controller("none")[0], 6, slow=2)
    assert found and actions == []


def test_greedy_plan_owes_the_bsp_share_back():
    asp_cfg, bsp_cfg = "asp-config", "bsp-config"
    config_for = {"asp": asp_cfg, "bsp": bsp_cfg}.get
    phases = [(Phase("bsp", 0.4), bsp_cfg), (Phase("asp", 1.0), asp_cfg)]
    owed, tail = greedy_interrupt(phases, 0, 0.1, config_for)
    assert owed == pytest.approx(0.3)
    assert phases == [(Phase("bsp", 0.1), bsp_cfg), (Phase("asp", 1.0), asp_cfg)]
    greedy_resume(phases, 1, 0.25, owed, tail, config_for)
    assert [(p.protocol, round(p.until, 6)) for p, _ in phases] == [("bsp", 0.1), ("asp", 0.25), ("bsp", 0.55),
                                                                     ("asp", 1.0)]
    assert sum(p.until - prev.until for (prev, _), (p, _) in zip(phases, phases[1:]) if p.protocol == "bsp") \
        + phases[0][0].until == pytest.approx(0.4)


def test_greedy_plan_never_runs_past_the_end():
    config_for = {"asp": "a", "bsp": "b"}.get
    phases = [(Phase("bsp", 0.5), "b"), (Phase("asp", 1.0), "a")]
    owed, tail = greedy_interrupt(phases, 0, 0.2, config_for)
    greedy_resume(phases, 1, 0.9, owed, tail, config_for)
    assert [(p.protocol, p.until) for p, _ in phases] == [("bsp", 0.2), ("asp", 0.9), ("bsp", 1.0)]
