"""The simulator against the algorithms it claims: BSP is large-batch SGD, one ASP client is plain SGD, local SGD
averaged every step is BSP, and a seed gives the same bits. Real model (the digits MLP), real data, one process."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
pytest.importorskip("tensorflow")

from syncswitch import spec as specmod
from syncswitch.simulator import drive
from syncswitch.simulator.arrivals import arrival_model
from syncswitch.simulator.model import GradientModel
from syncswitch.simulator.run import Options, Simulation

# The conformance suite's digits job, shorter and at batch 8.
SHORT = ["workload={samples: 640}", "hyperparameters.batch_size=8"]


def simulate(digits_job, tmp_path, workers, overrides=(), arrivals="round-robin", seed=0, name="run"):
    job = specmod.load(digits_job, [*SHORT, f"cluster.workers={workers}", *overrides])
    sim = Simulation(job, Options(workers, arrival_model(arrivals, workers, seed), seed, str(tmp_path / name)))
    summary = sim.run()
    return sim, summary


def only(protocol, **params):
    inner = ", ".join([f"protocol: {protocol}"] + [f"{k}: {v}" for k, v in params.items()])
    return f"policy.schedule=[{{{inner}}}]"


def test_bsp_on_n_workers_at_batch_b_is_one_worker_at_batch_nb(digits_job, tmp_path):
    # The paper's configuration gives BSP on n workers the rate n * eta: the one worker gets it by hand.
    n, steps = 4, 5
    sim, _ = simulate(digits_job, tmp_path, n, [only("bsp"), f"workload.samples={steps * n * 8}"], name="n")
    one, _ = simulate(digits_job, tmp_path, 1, [only("bsp"), f"workload.samples={steps * n * 8}",
                                               f"hyperparameters.batch_size={n * 8}",
                                               f"hyperparameters.learning_rate={0.05 * n}"], name="one")
    assert sim.final.step == one.final.step == steps
    np.testing.assert_allclose(sim.final.w, one.final.w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(sim.final.v, one.final.v, rtol=1e-4, atol=1e-5)
    assert not np.allclose(sim.final.v, 0)  # momentum was really there


def test_asp_with_one_worker_is_plain_momentum_sgd(digits_job, tmp_path):
    sim, _ = simulate(digits_job, tmp_path, 1, [only("asp")])
    job = sim.job
    model = GradientModel(job, 0)  # the same seed: the same initial parameters
    batches = iter(model.module.input_fn("train", 8, {}))
    w = model.initial()
    v = np.zeros_like(w)
    for k in range(640 // 8):
        lr = np.float32(0.05 * (0.5 if k * 8 / 640 >= 0.5 else 1.0))
        g, _ = model.gradient(w, next(batches))
        v = np.float32(0.9) * v + g
        w = w - lr * v
    np.testing.assert_array_equal(sim.final.w, w)
    assert sim.final.step == 80


def test_local_sgd_averaged_every_step_is_bsp(digits_job, tmp_path):
    local, _ = simulate(digits_job, tmp_path, 3, [only("local-sgd", period=1)], name="local")
    bsp, _ = simulate(digits_job, tmp_path, 3, [only("bsp")], name="bsp")
    assert local.final.step == bsp.final.step
    np.testing.assert_allclose(local.final.w, bsp.final.w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("protocol", ["asp", "b-fasgd", "ssp"])
def test_the_same_seed_gives_the_same_bits(digits_job, tmp_path, protocol):
    runs = [simulate(digits_job, tmp_path, 4, [f"policy.switch_to={protocol}", "policy.switch_at=0.25"],
                     arrivals="speeds:0.5", seed=3, name=f"r{k}") for k in range(2)]
    (a, sa), (b, sb) = runs
    np.testing.assert_array_equal(a.final.w, b.final.w)
    assert sa["evaluations"] == sb["evaluations"]
    lines = [(tmp_path / f"r{k}" / "metrics.jsonl").read_text() for k in range(2)]
    assert lines[0] == lines[1]
    other, _ = simulate(digits_job, tmp_path, 4, [f"policy.switch_to={protocol}", "policy.switch_at=0.25"],
                        arrivals="speeds:0.5", seed=4, name="other")
    assert not np.array_equal(a.final.w, other.final.w)


def test_a_switch_keeps_progress_and_applies_the_configuration_policy(digits_job, tmp_path):
    _, summary = simulate(digits_job, tmp_path, 4, ["policy.switch_at=0.5", "policy.switch_to=asp",
                                                      "policy.switch_rule=false", "policy.guard.enabled=false"])
    bsp, asp = summary["schedule"]
    assert (bsp["protocol"], asp["protocol"]) == ("bsp", "asp")
    assert bsp["end_fraction"] == asp["start_fraction"] == pytest.approx(0.5)
    assert bsp["config"]["learning_rate"] == pytest.approx(0.2) and asp["config"]["learning_rate"] == 0.05
    entered = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
               if '"entered"' in x]
    assert entered[1]["learning_rate"] == pytest.approx(0.05 * 0.5)  # the decay at 50% carries over
    assert asp["measured"]["staleness_mean"] == pytest.approx(3.0, abs=0.2)  # round robin: n - 1 late (fewer at first)
    assert summary["final_accuracy"] > 0.2 and summary["status"] == "completed"  # chance: 0.1


@pytest.mark.parametrize("protocol,params", [("dc-asgd", {"adaptive": "true"}), ("fasgd", {}),
                                             ("specsync", {"abort_rate": 0.3}), ("lookahead", {}),
                                             ("b-fasgd", {"fetch": 1.0}), ("ssp", {"staleness": 1}),
                                             ("bsp", {"aggregate": 3}), ("local-sgd", {"period": 4})])
def test_every_protocol_trains_and_reports_what_it_measured(digits_job, tmp_path, protocol, params):
    _, summary = simulate(digits_job, tmp_path, 4, [only(protocol, **params), "workload.samples=2560"],
                          arrivals="speeds:0.5")
    phase = summary["schedule"][0]
    assert summary["final_accuracy"] > 0.5, summary["evaluations"]
    assert phase["end_fraction"] >= 1.0
    measured = phase["measured"]
    if protocol == "specsync":
        assert measured["aborted_steps"] > 0
    if protocol == "b-fasgd":
        assert 0 < measured["fetch_fraction"] < 1 and measured["push_fraction"] == 1.0
    if protocol == "ssp":
        assert measured["staleness_mean"] <= 4 * 2  # no worker more than 1 step ahead of the slowest
    if protocol == "bsp":
        assert phase["samples"] == phase["steps"] * 3 * 8  # the first 3 of 4 gradients make an update
    if protocol == "local-sgd":
        assert measured["averages"] == phase["steps"] // 4


def test_the_guard_runs_live_and_its_folder_reads_like_a_real_run(digits_job, tmp_path):
    """ASP after BSP on 4 round-robin workers degrades this small job at its end; the guard rolls it back, and
    `guard replay` and `report` read the folder."""
    from syncswitch.cluster_manager.guard_replay import replay_run
    from syncswitch.cluster_manager.reports import load_run

    _, summary = simulate(digits_job, tmp_path, 4, ["policy.switch_at=0.5", "policy.switch_to=asp",
                                                      "policy.switch_rule=false"])
    events = summary["guard_events"]
    assert events and events[0]["action"].startswith("rollback to 50.0%, continue with bsp")
    assert summary["schedule"][-1]["protocol"] == "bsp" and summary["schedule"][-1]["end_fraction"] >= 1.0
    records = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["reason"] for r in records if r["kind"] == "guard"] == [events[0]["reason"]]
    replay = replay_run(str(tmp_path / "run"))
    assert replay.verdict is not None and replay.recorded["action"] == events[0]["action"]
    run = load_run(str(tmp_path / "run"))
    assert run.completed and run.converged_accuracy == summary["converged_accuracy"]


def test_the_switch_rule_holds_bsp_as_it_does_in_a_real_run(digits_job, tmp_path):
    """`switch_at: auto` and the default loss rule: BSP runs on until the loss left its early regime; the rule's
    own replay over the folder's loss reports (what a live manager reads) decides at the same point."""
    from bench.switch_replay import losses, replay
    from syncswitch.policies.timing import TimingSettings

    _, summary = simulate(digits_job, tmp_path, 4, ["policy.switch_at=auto", "policy.switch_to=asp",
                                                      "policy.guard.enabled=false", "workload.samples=2560"],
                          arrivals="speeds:0.5")
    rule = summary["switch_rule"]
    assert rule["rule"] == "loss" and rule["auto"] and len(rule["decisions"]) == 1
    decision = rule["decisions"][0]
    assert decision["action"] == "switch" and decision["fraction"] > 0.1
    bsp, asp = summary["schedule"]
    assert (bsp["protocol"], asp["protocol"]) == ("bsp", "asp")
    assert decision["fraction"] <= bsp["end_fraction"] <= decision["fraction"] + 4 * 8 / 2560  # the round's end
    replayed = replay(losses(str(tmp_path / "run")), TimingSettings(), earliest=0.1)
    assert replayed["action"] == "switch" and replayed["fraction"] == pytest.approx(decision["fraction"], abs=1e-4)


def test_workers_sharing_cores_are_as_stale_as_the_cores_let_them(digits_job, tmp_path):
    stale = {}
    for arrivals in ("speeds:0.2", "speeds:0.2+cores:2:q=8", "speeds:0.2+cores:1:q=8"):
        _, summary = simulate(digits_job, tmp_path, 4, [only("asp")], arrivals=arrivals, name=arrivals)
        stale[arrivals] = summary["schedule"][0]["measured"]["staleness_mean"]
    assert stale == pytest.approx({"speeds:0.2": 3.0, "speeds:0.2+cores:2:q=8": 1.0, "speeds:0.2+cores:1:q=8": 0.0},
                                  abs=0.1)


def test_a_call_outside_the_window_leaves_the_peers_pushes_out_of_the_next_read(digits_job, tmp_path):
    """SSP polls its clocks in a call of its own after each step: priced by `+call:F`, it runs off the core, the
    peer pushes meanwhile, and that push is in the worker's next read (ASP, which makes no such call, is as stale
    with the price as without; SSP with a bound that never binds is ASP without it)."""
    stale = {}
    for protocol in ("asp", "ssp"):
        for call in ("", "+call:0.3"):
            arrivals = f"speeds:0.2+cores:1:q=0.6{call}"
            schedule = only(protocol, **({"staleness": 1000} if protocol == "ssp" else {}))
            _, summary = simulate(digits_job, tmp_path, 2, [schedule, "workload={samples: 2560}"], arrivals=arrivals,
                                  name=protocol + call)
            stale[protocol + call] = summary["schedule"][0]["measured"]["staleness_mean"]
    assert stale["ssp"] == stale["asp"] == stale["asp+call:0.3"]
    assert stale["ssp+call:0.3"] < stale["ssp"] - 0.1


class OneCallPerWorker:
    """A round's first steps as the simulator computed them before they were batched: each worker's batch read and
    its gradient computed when its step comes."""

    def __init__(self, sim, rule, order):
        self.sim, self.rule = sim, rule

    def take(self, worker):
        return self.sim.gradient(self.rule.fetch(worker)[0], self.sim.batch(worker), worker)


SWITCHED = ["policy.schedule=[{protocol: bsp, until: 0.5}, {protocol: local-sgd, period: 2}]",
            "policy.switch_rule=false"]
DIVERGING = ["policy.schedule=[{protocol: bsp, until: 0.5}, {protocol: local-sgd, period: 2, "
             "hyperparameters: {learning_rate: 1.0e+15}}]", "policy.switch_rule=false"]


@pytest.mark.parametrize("overrides", [SWITCHED, DIVERGING], ids=["bsp-then-local-sgd", "a-verdict-mid-round"])
def test_a_rounds_first_steps_in_one_call_are_the_bits_of_one_call_each(digits_job, tmp_path, monkeypatch,
                                                                        overrides):
    """A round's first steps (every worker at the same parameters) are computed in one call; the run is the one
    that calls once per worker, bit for bit, also when a verdict ends a round."""
    batched, summary = simulate(digits_job, tmp_path, 4, overrides, arrivals="speeds:0.3", name="batched")
    with monkeypatch.context() as m:
        m.setattr(drive, "FirstSteps", OneCallPerWorker)
        single, _ = simulate(digits_job, tmp_path, 4, overrides, arrivals="speeds:0.3", name="single")
    np.testing.assert_array_equal(batched.final.w, single.final.w)
    assert batched.final.step == single.final.step
    text = [(tmp_path / name / "metrics.jsonl").read_text() for name in ("batched", "single")]
    assert text[0] == text[1]
    if overrides is DIVERGING:  # the guard's verdict came at the first step of the second round
        assert [e["reason"] for e in summary["guard_events"]] == ["diverged"]
        # 0.5 + 3 steps of 4 workers at 8 of the 640 samples: each worker counts the group's batches a step (the
        # engine's count), so the first report of a step is after all 4 landed
        assert summary["guard_events"][0]["fraction"] == pytest.approx(0.5 + 3 * 4 * 8 / 640)


def test_a_link_prices_each_round_s_all_reduce_and_leaves_the_arithmetic_alone(digits_job, tmp_path):
    """BSP by all-reduce on 4 workers: each round pays one ring all-reduce of the gradients, the loss and the stop
    flag (2(n-1) steps, each the longer of a chunk of the buffer over n on each node's link and the latency); fp16
    sends the gradients in half the bytes and the two float32s in a collective of the same call. The updates are the
    same bits with a link as without: a synchronous round's order does not depend on time."""
    n, latency, mbit = 4, 1e-5, 80.0  # 1e7 bytes a second: a chunk takes longer than the latency
    schedule = [only("bsp"), "workload={samples: 320}"]
    free, _ = simulate(digits_job, tmp_path, n, schedule, name="free")
    runs = {}
    for wire in ("none", "fp16"):
        sim, summary = simulate(digits_job, tmp_path, n, [*schedule, f"hyperparameters.compression={wire}"],
                                arrivals=f"round-robin+link:{mbit}:latency={latency * 1e3}", name=wire)
        runs[wire] = (sim, summary["total_time_s"] - free.now)
        assert summary["simulation"]["arrivals"]["link"]["mbit"] == mbit
    rounds, size, rate = free.final.step, free.size, mbit * 1e6 / 8
    assert rounds == 10 and runs["none"][0].final.step == rounds
    np.testing.assert_array_equal(runs["none"][0].final.w, free.final.w)
    ring = 2 * (n - 1)
    assert 4 * size / n / rate > 2 * latency
    assert runs["none"][1] == pytest.approx(rounds * ring * 4 * (size + 2) / n / rate, rel=1e-9)
    assert runs["fp16"][1] == pytest.approx(rounds * ring * (2 * size + 4 * 2) / n / rate, rel=1e-9)


def test_local_sgd_pays_an_average_a_period_and_its_momenta_at_the_end(digits_job, tmp_path):
    n, mbit = 4, 80.0
    schedule = [only("local-sgd", period=2), "workload={samples: 320}"]
    free, _ = simulate(digits_job, tmp_path, n, schedule, name="free")
    sim, summary = simulate(digits_job, tmp_path, n, schedule, arrivals=f"round-robin+link:{mbit}", name="link")
    averages, rate, size = summary["schedule"][0]["measured"]["averages"], mbit * 1e6 / 8, sim.size
    assert averages == 5
    wire = 2 * (n - 1) / n / rate
    assert sim.now - free.now == pytest.approx(averages * wire * 4 * (size + 2) + wire * 4 * size, rel=1e-9)


def test_asynchronous_steps_queue_for_the_parameter_servers_link(digits_job, tmp_path):
    """ASP on one shared slow link: every step's pull and push (8 bytes a parameter) go through it in turn, so the
    run takes its steps times that, whatever the workers' compute; so does one PS (the job's) on links of their own;
    with a PS a node, the servers keep up and each worker's step waits for its own transfers."""
    n, steps, mbit = 4, 40, 0.8  # 1e5 bytes a second
    schedule = [only("asp"), f"workload={{samples: {steps * 8}}}"]
    shared, _ = simulate(digits_job, tmp_path, n, schedule, arrivals=f"round-robin+link:{mbit}:shared",
                         name="shared")
    per_step = 8 * shared.size / 1e5
    assert per_step * n > 1.0  # the link, not the workers' 1-s steps, bounds it
    assert shared.now == pytest.approx(steps * per_step + 1.0, rel=1e-9)  # the last transfer, then its step
    one, _ = simulate(digits_job, tmp_path, n, schedule, arrivals=f"round-robin+link:{mbit}", name="one")
    assert one.job.cluster.ps_tasks == 1 and one.now == shared.now
    spread, _ = simulate(digits_job, tmp_path, n, [*schedule, f"cluster.parameter_servers={n}"],
                         arrivals=f"round-robin+link:{mbit}", name="spread")
    assert spread.now == pytest.approx(steps / n * (1.0 + per_step), rel=1e-9)
