"""The job lifecycle driven against fake agents (no TensorFlow): states, switches, evaluation, failures, policies."""

import json
import re

import pytest

from syncswitch import spec as specmod
from syncswitch.cluster_manager.job import JobRun
from syncswitch.cluster_manager.submission import exit_code
from syncswitch.errors import ClusterError
from tests.cluster_manager.fake_cluster import FakeBackend, FakeCluster, Failure, start_fake_evaluator

TARGET = specmod.default_switch_to(2).protocol  # where `policy.switch_at` switches to on these 2 workers
TARGET_4 = specmod.default_switch_to(4, stragglers=True).protocol  # on 4 workers expecting stragglers
# Where greedy's interlude goes by default: the target blocks (local SGD's averages), which a straggler would hold.
INTERLUDE = specmod.NONBLOCKING_SWITCH_TO

JOB = """
name: fake
script: EXAMPLES/digits_mlp.py
hyperparameters: {batch_size: 10, learning_rate: 0.05, momentum: 0.9}
workload: {samples: 2000}
cluster: {workers: WORKERS}
evaluation: {every: 0.25}
# The fake loss is a straight line: these tests drive the switch mechanics at the schedule's own points.
policy: {switch_rule: fixed}
"""


def _run(write_spec, tmp_path, overrides=(), cluster=None, workers=2, raises=None, adopt=None):
    spec = specmod.load(write_spec(JOB.replace("WORKERS", str(workers))), list(overrides))
    spec = adopt(spec) if adopt else spec  # what `submit` takes from the policy store
    cluster = cluster or FakeCluster(total=spec.workload.samples)
    job = JobRun(spec, str(tmp_path / "run"), progress=False, backend=FakeBackend(cluster), connect=cluster.connect,
                 start_evaluator=start_fake_evaluator)
    if raises is not None:
        with pytest.raises(raises) as info:
            job.run()
        return json.loads((tmp_path / "run" / "summary.json").read_text()), cluster, info.value
    return job.run(), cluster, job


def _states(summary):
    return [(s["state"], s["phase"]) for s in summary["states"]]


def test_in_place_switch_walks_the_states_and_keeps_progress(write_spec, tmp_path):
    summary, cluster, _ = _run(write_spec, tmp_path, ["policy.switch_at=0.25"])
    assert summary["status"] == "completed" and exit_code(summary) == 0
    assert _states(summary) == [("provisioning", None), ("launching", 0), ("running", 0), ("switching", 1),
                                ("running", 1), ("finishing", None), ("tearing_down", None), ("done", None)]
    bsp, asp = summary["schedule"]
    assert (bsp["protocol"], asp["protocol"]) == ("bsp", TARGET)
    assert bsp["start_fraction"] == 0.0 and 0.25 <= bsp["end_fraction"] < 0.3
    assert asp["start_fraction"] == bsp["end_fraction"] and asp["end_fraction"] >= 1.0
    (switch,) = summary["switches"]
    assert (switch["from"], switch["to"], switch["mode"], switch["reason"]) == ("bsp", TARGET, "in-place", "schedule")
    assert switch["overhead_s"] >= 0
    # Evaluation checkpoints at 25/50/75% and the final one, scored in order by the (fake) evaluator.
    assert [e["fraction"] for e in summary["evaluations"]] == pytest.approx([0.25, 0.5, 0.75, 1.0], abs=0.01)
    assert summary["final_accuracy"] == pytest.approx(0.9)
    # BSP workers blocked at the boundary were released; the chief entered both phases.
    assert cluster.nodes[0].commands.count("enter_phase") == 2 and "release" in cluster.nodes[0].commands
    # The guard's rollback target at the switch, and the final checkpoint.
    assert len(cluster.saves) == 2 and cluster.torn_down


def test_relaunch_switch_checkpoints_and_relaunches_every_node(write_spec, tmp_path):
    summary, cluster, _ = _run(write_spec, tmp_path, ["policy.switch_at=0.5", "policy.switch_mode=relaunch"])
    assert summary["status"] == "completed"
    assert _states(summary)[:6] == [("provisioning", None), ("launching", 0), ("running", 0), ("switching", 1),
                                    ("launching", 1), ("running", 1)]
    assert summary["switches"][0]["mode"] == "relaunch"
    for node in cluster.nodes:
        first, second = node.launches
        assert (first.start_phase, second.start_phase) == (0, 1)
        # A relaunched graph holds only the phase it starts; in place would hold both.
        assert [p.build for p in first.phases] == [True, False] and [p.build for p in second.phases] == [False, True]
    assert len(cluster.saves) == 2  # the switch checkpoint, then the final one


def test_a_lost_node_without_restarts_fails_the_run_tears_down_and_writes_the_summary(write_spec, tmp_path):
    cluster = FakeCluster(total=2000, failure=Failure(worker=1, at=0.5))
    summary, cluster, error = _run(write_spec, tmp_path, ["recovery.max_restarts=0"], cluster=cluster,
                                   raises=ClusterError)
    assert str(error).startswith("node 1: task exited with code -9; recovery.max_restarts=0 reached; the last "
                                 "checkpoint ")
    # The latest durable checkpoint: the 50% evaluation checkpoint, or the 25% one when the node died before
    # the 50% save completed (the failure is injected at the same progress).
    assert re.search(r"model\.ckpt-\d+ \((25\.\d|50\.0)%\) is intact", str(error)), str(error)
    assert summary["status"] == "failed" and summary["message"] == str(error)
    assert _states(summary)[-2:] == [("tearing_down", None), ("done", None)]
    assert cluster.torn_down


def test_divergence_without_the_guard_ends_the_run_diverged(write_spec, tmp_path):
    cluster = FakeCluster(total=2000, failure=Failure(worker=0, at=0.3, kind="diverged"))
    summary, cluster, _ = _run(write_spec, tmp_path, ["policy.guard={enabled: false}"], cluster=cluster)
    assert summary["status"] == "diverged" and exit_code(summary) == 3
    assert "worker 0 saw loss nan" in summary["message"]
    assert summary["final_accuracy"] is None and cluster.torn_down


STRAGGLERS = ["workload.samples=30000", "policy.switch_at=0.8", "stragglers.detection={window_s: 0.5, consecutive: 1}"]


def test_elastic_idles_the_straggler_and_rejoins_it_at_the_switch(write_spec, tmp_path):
    cluster = FakeCluster(total=30000, batch=10, tick_s=0.005, slow={3: 0.4})
    summary, cluster, _ = _run(write_spec, tmp_path, STRAGGLERS + ["stragglers.policy=elastic"], cluster, workers=4)
    assert summary["status"] == "completed"
    (shrink,) = summary["policy_actions"]
    assert (shrink["action"], shrink["workers"], shrink["group_size"]) == ("shrink", [3], 3)
    assert shrink["overhead_s"] is not None
    assert cluster.nodes[0].commands.count("set_group") == 1
    assert "idle" in cluster.nodes[3].commands and "join" in cluster.nodes[3].commands
    assert [s["reason"] for s in summary["switches"]] == ["schedule"]


@pytest.mark.parametrize("switch_to", [None, "asp"])
def test_greedy_switches_to_the_switch_target_while_a_straggler_lasts(write_spec, tmp_path, switch_to):
    cluster = FakeCluster(total=30000, batch=10, tick_s=0.005, slow={2: 0.4})
    extra = [f"policy.switch_to={switch_to}"] if switch_to else []
    summary, cluster, _ = _run(write_spec, tmp_path, STRAGGLERS + ["stragglers.policy=greedy"] + extra, cluster,
                               workers=4)
    assert summary["status"] == "completed"
    first = summary["policy_actions"][0]
    assert (first["action"], first["protocol"]) == ("switch", switch_to or INTERLUDE)
    protocols = [p["protocol"] for p in summary["schedule"]]
    assert protocols[:2] == ["bsp", switch_to or INTERLUDE]
    assert summary["switches"][0]["reason"] == "greedy policy"
    # The interrupted phase ended where the policy decided, and the next one started there.
    assert summary["schedule"][1]["start_fraction"] == summary["schedule"][0]["end_fraction"]


def test_divergence_after_the_switch_rolls_back_and_falls_back_to_bsp(write_spec, tmp_path):
    cluster = FakeCluster(total=2000, failure=Failure(worker=1, at=0.6, kind="diverged"))
    summary, cluster, _ = _run(write_spec, tmp_path, ["policy.switch_at=0.25"], cluster=cluster)
    assert summary["status"] == "completed"
    assert ("rolling_back", 2) in _states(summary)
    (event,) = summary["guard_events"]
    assert event["reason"] == "diverged" and event["action"].endswith("continue with bsp")
    # The last checkpoint before the divergence: the evaluation checkpoint at 50%, in its branch's name.
    assert event["checkpoint"] == cluster.restores[0] and "/checkpoints/model.ckpt-" in event["checkpoint"]
    assert event["checkpoint_fraction"] == pytest.approx(0.5, abs=0.01)
    assert event["samples_lost"] > 0 and event["overhead_s"] >= 0 and event["mode"] == "in-place"
    bsp, asp, fallback = summary["schedule"]
    assert [p["protocol"] for p in summary["schedule"]] == ["bsp", TARGET, "bsp"]
    assert asp["rolled_back_to"] == event["checkpoint_fraction"] == fallback["start_fraction"]
    assert fallback["end_fraction"] >= 1.0
    # Evaluations of the abandoned stretch are set apart; the run's own go on from the checkpoint.
    fractions = [e["fraction"] for e in summary["evaluations"]]
    assert fractions == sorted(fractions) and fractions[-1] >= 1.0
    assert all(e["fraction"] > event["checkpoint_fraction"] for e in summary["abandoned_evaluations"])
    # Checkpoints after the rollback carry the new branch's name.
    assert "/checkpoints/model-r1.ckpt-" in cluster.saves[-1]


def test_a_sustained_loss_rise_rolls_back_by_relaunch(write_spec, tmp_path):
    loss = lambda f, protocol: 3.0 if protocol != "bsp" and f > 0.55 else 1.0  # noqa: E731
    cluster = FakeCluster(total=4000, loss=loss)
    summary, cluster, _ = _run(write_spec, tmp_path, ["policy.switch_at=0.25", "policy.switch_mode=relaunch",
                                                    LOSS_RULE], cluster=cluster)
    assert summary["status"] == "completed"
    (event,) = summary["guard_events"]
    assert event["reason"] == "loss" and event["values"]["smoothed_loss"] == pytest.approx(3.0)
    assert event["mode"] == "relaunch" and 0.5 <= event["checkpoint_fraction"] <= 0.55
    # Every node was relaunched from the checkpoint, with the fallback protocol only.
    for node in cluster.nodes:
        last = node.launches[-1]
        assert last.restore_from == event["checkpoint"] and last.checkpoint_name == "model-r1.ckpt"
        assert [p.protocol for p in last.phases if p.build] == ["bsp"]


def test_without_rollbacks_left_a_divergence_ends_the_run(write_spec, tmp_path):
    cluster = FakeCluster(total=2000, failure=Failure(worker=0, at=0.6, kind="diverged"))
    summary, cluster, _ = _run(write_spec, tmp_path, ["policy.switch_at=0.25", "policy.guard={max_rollbacks: 0}"],
                               cluster=cluster)
    assert summary["status"] == "diverged"
    (event,) = summary["guard_events"]
    assert event["reason"] == "diverged" and event["action"].startswith("none: no rollback left")


def test_with_the_guard_off_a_degrading_phase_runs_to_the_end(write_spec, tmp_path):
    loss = lambda f, protocol: 3.0 if protocol != "bsp" and f > 0.55 else 1.0  # noqa: E731
    cluster = FakeCluster(total=4000, loss=loss)
    summary, cluster, _ = _run(write_spec, tmp_path, ["policy.switch_at=0.25", "policy.guard=false"],
                               cluster=cluster)
    assert summary["status"] == "completed" and summary["guard_events"] == []
    assert [p["protocol"] for p in summary["schedule"]] == ["bsp", TARGET]
    assert summary["schedule"][-1]["end_fraction"] >= 1.0


def test_an_evaluation_that_comes_in_while_finishing_still_rolls_back(write_spec, tmp_path, monkeypatch):
    # The evaluator lags training (0.3 s per checkpoint, the run trains in about 0.5 s): the collapse
    # after 50% is only seen once every worker has reached the end.
    monkeypatch.setenv("FAKE_EVAL_DELAY_S", "0.3")
    monkeypatch.setenv("FAKE_EVAL_COLLAPSE_AFTER", "0.5")
    summary, cluster, _ = _run(write_spec, tmp_path, ["policy.switch_at=0.25", "evaluation.every=0.125"])
    assert summary["status"] == "completed"
    states = _states(summary)
    assert ("finishing", None) in states and states.index(("finishing", None)) < states.index(("rolling_back", 2))
    (event,) = summary["guard_events"]
    assert event["reason"] == "accuracy" and event["checkpoint_fraction"] == pytest.approx(0.5, abs=0.01)
    assert [p["protocol"] for p in summary["schedule"]] == ["bsp", TARGET, "bsp"]
    assert summary["final_accuracy"] == pytest.approx(0.9)  # the fallback's final checkpoint, not the collapse
    assert min(e["accuracy"] for e in summary["evaluations"]) > 0.5


def test_a_final_checkpoint_that_dips_is_rolled_back_and_its_stretch_redone(write_spec, tmp_path, monkeypatch):
    # Healthy up to 75%, only the final checkpoint scores 0.1: no later evaluation could confirm the dip, and it
    # is the model the run delivers, so it is rolled back on its own and the last stretch runs under BSP.
    monkeypatch.setenv("FAKE_EVAL_COLLAPSE_AFTER", "0.99")
    summary, cluster, _ = _run(write_spec, tmp_path, ["policy.switch_at=0.25", "evaluation.every=0.25"])
    assert summary["status"] == "completed"
    (event,) = summary["guard_events"]
    assert event["reason"] == "accuracy" and event["fraction"] >= 1.0 and event["onset"] >= 1.0
    assert event["checkpoint_fraction"] == pytest.approx(0.75, abs=0.01)
    assert [p["protocol"] for p in summary["schedule"]] == ["bsp", TARGET, "bsp"]
    assert summary["final_accuracy"] == pytest.approx(0.9)


def _dip(monkeypatch):
    """The evaluations score 0.1 between 40% and 75% of the workload, then recover (as the ResNet's local SGD did)."""
    monkeypatch.setenv("FAKE_EVAL_COLLAPSE_AFTER", "0.4")
    monkeypatch.setenv("FAKE_EVAL_COLLAPSE_UNTIL", "0.75")
    return ["policy.switch_at=0.25", "evaluation.every=0.1"]


def test_an_accuracy_dip_whose_loss_held_falls_back_from_the_current_weights(write_spec, tmp_path, monkeypatch):
    # The fake's training loss keeps falling while its evaluations dip: "auto" goes on with the fallback from here,
    # restoring nothing and throwing nothing away.
    summary, cluster, _ = _run(write_spec, tmp_path, _dip(monkeypatch), cluster=FakeCluster(total=8000))
    assert summary["status"] == "completed"
    (event,) = summary["guard_events"]
    assert event["reason"] == "accuracy" and event["action"].startswith("fall back at")
    assert event["action"].endswith("continue with bsp") and event["mode"] == "in-place"
    assert event["samples_lost"] == 0 and event["checkpoint"] is None and event["overhead_s"] >= 0
    assert cluster.restores == [] and summary["abandoned_evaluations"] == []
    states = _states(summary)
    assert ("switching", 2) in states and not any(state == "rolling_back" for state, _ in states)
    bsp, target, fallback = summary["schedule"]
    assert [bsp["protocol"], target["protocol"], fallback["protocol"]] == ["bsp", TARGET, "bsp"]
    assert fallback["start_fraction"] == target["end_fraction"] == event["continued_at"] < 1.0
    assert "rolled_back_to" not in target and fallback["end_fraction"] >= 1.0
    assert summary["switches"][-1]["reason"] == "guard" and summary["final_accuracy"] == pytest.approx(0.9)


def test_a_fall_back_that_never_recovers_is_said_at_the_end(write_spec, tmp_path, monkeypatch):
    # The evaluations never come back after 40% (FAKE_EVAL_COLLAPSE_UNTIL unset): the run still completes, and
    # its guard says that the repaired run ends below what it had before the degradation.
    overrides = _dip(monkeypatch)
    monkeypatch.delenv("FAKE_EVAL_COLLAPSE_UNTIL")
    summary, cluster, _ = _run(write_spec, tmp_path, overrides, cluster=FakeCluster(total=8000))
    assert summary["status"] == "completed" and summary["final_accuracy"] == pytest.approx(0.1)
    fell_back, short = summary["guard_events"]
    assert fell_back["action"].startswith("fall back at")
    assert short["reason"] == "short after repair" and short["action"].startswith("none: the run ends below")
    assert short["values"]["accuracy"] == pytest.approx(0.1) and short["values"]["floor"] > 0.5


def test_an_accuracy_dip_whose_loss_rose_rolls_back(write_spec, tmp_path, monkeypatch):
    loss = lambda f, protocol: 1.5 if protocol != "bsp" and f > 0.3 else 1.0  # noqa: E731
    summary, cluster, _ = _run(write_spec, tmp_path, _dip(monkeypatch), cluster=FakeCluster(total=8000, loss=loss))
    (event,) = summary["guard_events"]
    assert event["reason"] == "accuracy" and event["action"].startswith("rollback to")
    assert cluster.restores == [event["checkpoint"]] and event["checkpoint_fraction"] <= 0.4


def test_the_rollback_action_rolls_back_a_dip_whose_loss_held(write_spec, tmp_path, monkeypatch):
    summary, cluster, _ = _run(write_spec, tmp_path, _dip(monkeypatch) + ["policy.guard={action: rollback}"],
                               cluster=FakeCluster(total=8000))
    (event,) = summary["guard_events"]
    assert event["action"].startswith("rollback to") and cluster.restores == [event["checkpoint"]]


def test_a_fall_back_by_relaunch_restarts_every_node_on_the_fallback_from_here(write_spec, tmp_path, monkeypatch):
    summary, cluster, _ = _run(write_spec, tmp_path, _dip(monkeypatch) + ["policy.switch_mode=relaunch"],
                               cluster=FakeCluster(total=8000))
    assert summary["status"] == "completed"
    (event,) = summary["guard_events"]
    assert event["action"].startswith("fall back at") and event["mode"] == "relaunch"
    assert cluster.restores == [] or all("switch" in path for path in cluster.restores)
    for node in cluster.nodes:
        assert [p.protocol for p in node.launches[-1].phases if p.build] == ["bsp"]
    assert summary["schedule"][-1]["start_fraction"] == event["continued_at"]


def test_an_evaluator_that_dies_fails_the_run_instead_of_completing_it_unscored(write_spec, tmp_path, monkeypatch):
    # Before: with nothing pending its exit was ignored, and the run "completed" with no evaluation at all.
    monkeypatch.setenv("FAKE_EVAL_CRASH", "1")
    summary, _, error = _run(write_spec, tmp_path, ["policy.switch_at=0.25"], raises=ClusterError)
    assert summary["status"] == "failed"
    assert str(error).startswith("evaluator: process exited unexpectedly with code 1")


# The fake cluster degrades by its loss alone, which the default guard does not judge.
LOSS_RULE = "policy.guard={loss_rule: true}"


def _asp_degrades_after_its_first_step():
    """A loss that triples once an asynchronous phase (greedy's interlude, the switch target) has trained past
    the progress it entered at (as a real collapse would)."""
    entered = []

    def loss(f, protocol):
        if protocol == "bsp":
            return 1.0
        entered.append(f)
        return 3.0 if f > entered[0] else 1.0

    return loss


def test_after_a_rollback_greedy_does_not_go_asynchronous_again(write_spec, tmp_path):
    # Worker 2 straggles all run long; asynchronous training degrades whenever it runs.
    cluster = FakeCluster(total=30000, batch=10, tick_s=0.005, slow={2: 0.4}, loss=_asp_degrades_after_its_first_step())
    summary, cluster, _ = _run(write_spec, tmp_path, STRAGGLERS + ["stragglers.policy=greedy", LOSS_RULE], cluster,
                               workers=4)
    assert summary["status"] == "completed"
    (event,) = summary["guard_events"]
    assert event["reason"] == "loss" and event["action"].endswith("continue with bsp")
    # One greedy switch to the target, rolled back; the straggler that lasts never sends the run back to it.
    assert [a["protocol"] for a in summary["policy_actions"] if a["action"] == "switch"] == [INTERLUDE]
    assert [p["protocol"] for p in summary["schedule"]] == ["bsp", INTERLUDE, "bsp"]
    assert summary["schedule"][-1]["end_fraction"] >= 1.0


def test_after_elastic_shrank_the_group_a_rollback_into_bsp_stays_in_place(write_spec, tmp_path):
    # The chief's pending aggregation, sized for the shrunk group, owes the full group its missing tokens
    # (SyncReplicasEngine.enter_chief): no relaunch, which cost 14-16 s on 0.45-CPU nodes.
    cluster = FakeCluster(total=30000, batch=10, tick_s=0.005, slow={3: 0.4}, loss=_asp_degrades_after_its_first_step())
    summary, cluster, _ = _run(write_spec, tmp_path, STRAGGLERS + ["stragglers.policy=elastic", LOSS_RULE], cluster,
                               workers=4)
    assert summary["status"] == "completed"
    assert [a["action"] for a in summary["policy_actions"]][:1] == ["shrink"]
    (event,) = summary["guard_events"]
    assert event["mode"] == "in-place" and event["action"].endswith("continue with bsp")
    assert [p["protocol"] for p in summary["schedule"]] == ["bsp", TARGET_4, "bsp"]
    assert summary["switches"][0]["mode"] == "in-place"  # into ASP: in place as planned


# -- the script's folder --------------------------------------------------------------------------------------

def test_every_launch_ships_the_script_folder_or_says_why_not(write_spec, tmp_path, monkeypatch, caplog):
    import io
    import logging
    import os
    import zipfile

    from syncswitch.wire import bundle

    summary, cluster, job = _run(write_spec, tmp_path, ["policy.switch_at=0.25", "policy.switch_mode=relaunch"])
    assert summary["status"] == "completed"
    assert len(cluster.clients) == 2 and {client.shipped[0] for client in cluster.clients} == {"digits_mlp.py"}
    names = zipfile.ZipFile(io.BytesIO(cluster.clients[0].shipped[1])).namelist()
    assert "digits_mlp.py" in names and "mnist1d_cnn.py" in names  # the examples folder, the script's own

    monkeypatch.setattr(bundle, "LIMIT_BYTES", 100)  # the examples folder is over it
    caplog.set_level(logging.WARNING)
    summary, cluster, job = _run(write_spec, tmp_path / "small", ["evaluation.every=0.5"])
    assert summary["status"] == "completed"
    # Nodes that share the filesystem run the script where it is (its absolute path, no bundle) ...
    assert cluster.clients[0].shipped == (job.spec.script, b"")
    assert "the script runs where it is" in caplog.text
    # ... others get the script alone.
    job.launcher.shipment.said = False
    assert job.launcher.shipment.for_nodes(shared_filesystem=False) == (os.path.basename(job.spec.script), b"")
    assert "only the script is shipped to the nodes" in caplog.text


def _metrics(tmp_path):
    return [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]


def _scored_after(lines, state):
    """The fractions scored before and after metrics.jsonl's first `state` line (a (state, phase) pair)."""
    at = next(i for i, e in enumerate(lines) if e.get("kind") == "state" and (e["state"], e["phase"]) == state)
    scored = [(i, e["fraction"]) for i, e in enumerate(lines) if e.get("kind") == "evaluation"]
    return [f for i, f in scored if i < at], [f for i, f in scored if i > at]


def test_evaluation_live_watched_scores_a_synchronous_run_once_its_last_step_ran(write_spec, tmp_path):
    summary, _, _ = _run(write_spec, tmp_path, ["policy.schedule=[{protocol: bsp}]", "evaluation.live=watched"])
    assert summary["status"] == "completed" and summary["final_accuracy"] == pytest.approx(0.9)
    before, after = _scored_after(_metrics(tmp_path), ("finishing", None))
    assert before == [] and sorted(after) == pytest.approx([0.25, 0.5, 0.75, 1.0], abs=0.01)
    assert summary["evaluation_live"] == {"setting": "watched", "deferred": True, "scored_after_a_pause": 3,
                                          "releases": [{"why": "last step", "checkpoints": 3}], "held_again": []}
    # Each evaluation keeps its checkpoint's time: increasing with the fraction, inside the training time.
    times = [e["time_s"] for e in summary["evaluations"]]
    assert times == sorted(times) and times[-2] < summary["total_time_s"] <= times[-1] + 1e-3


def test_evaluation_live_all_scores_every_checkpoint_while_training_runs(write_spec, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_EVAL_DELAY_S", "0.01")
    summary, _, _ = _run(write_spec, tmp_path, ["policy.schedule=[{protocol: bsp}]", "evaluation.live=all"],
                         cluster=FakeCluster(total=8000))
    before, _ = _scored_after(_metrics(tmp_path), ("finishing", None))
    assert before and summary["evaluation_live"]["scored_after_a_pause"] == 0


def test_evaluation_live_watched_scores_the_phases_the_guard_watches_and_what_it_compares_with(
        write_spec, tmp_path, monkeypatch):
    # The dip from 50% to 75% is caught and repaired as with every checkpoint scored live: the synchronous phase's
    # checkpoints go to the evaluator when the guard starts watching (its best accuracy before the switch).
    monkeypatch.setenv("FAKE_EVAL_COLLAPSE_AFTER", "0.5")
    monkeypatch.setenv("FAKE_EVAL_COLLAPSE_UNTIL", "0.75")
    summary, _, _ = _run(write_spec, tmp_path, ["policy.switch_at=0.25", "evaluation.every=0.125",
                                                "evaluation.live=watched"], cluster=FakeCluster(total=8000))
    assert summary["status"] == "completed"
    (event,) = summary["guard_events"]
    assert event["reason"] == "accuracy" and event["values"]["best_accuracy"] >= 0.7
    assert [p["protocol"] for p in summary["schedule"]] == ["bsp", TARGET, "bsp"]
    lines = _metrics(tmp_path)
    before, _ = _scored_after(lines, ("running", 1))
    assert before == []  # nothing of the synchronous phase was scored while it ran
    watched, _ = _scored_after(lines, ("finishing", None))
    assert min(watched) == pytest.approx(0.125, abs=0.01)  # released at the switch, scored before the end
    assert summary["final_accuracy"] == pytest.approx(0.9)
    assert summary["evaluation_live"]["scored_after_a_pause"] >= 3  # the BSP phases' before and after the guard


def test_the_end_of_a_run_waits_for_held_back_scores_as_long_as_they_keep_coming(write_spec, tmp_path, monkeypatch):
    # 8 checkpoints scored after the last step, 0.2 s each: 1.6 s in all, while the wait for the next score is 0.5 s.
    from syncswitch.cluster_manager import phases

    monkeypatch.setattr(phases, "SCORE_WAIT_S", 0.5)
    monkeypatch.setenv("FAKE_EVAL_DELAY_S", "0.2")
    summary, _, _ = _run(write_spec, tmp_path, ["policy.schedule=[{protocol: bsp}]", "evaluation.live=watched",
                                                "evaluation.every=0.125"])
    assert summary["status"] == "completed" and len(summary["evaluations"]) == 8
    assert summary["evaluation_live"]["scored_after_a_pause"] == 7


def test_evaluation_live_holds_back_again_what_is_unscored_when_the_guard_falls_back_to_bsp(
        write_spec, tmp_path, monkeypatch):
    # A slow evaluator: the dip is caught on the newest checkpoints while the synchronous phase's, released at the
    # switch, still wait; the fall-back to BSP (nobody acts on it live) holds them again, scored after the end.
    monkeypatch.setenv("FAKE_EVAL_DELAY_S", "0.15")
    monkeypatch.setenv("FAKE_EVAL_COLLAPSE_AFTER", "0.4")
    monkeypatch.setenv("FAKE_EVAL_COLLAPSE_UNTIL", "0.75")
    summary, _, _ = _run(write_spec, tmp_path, ["policy.switch_at=0.25", "evaluation.every=0.05",
                                                "evaluation.live=watched"], cluster=FakeCluster(total=8000))
    assert summary["status"] == "completed"
    assert [p["protocol"] for p in summary["schedule"]] == ["bsp", TARGET, "bsp"]
    live = summary["evaluation_live"]
    assert live["held_again"] and live["held_again"][0]["why"] == "bsp phase"
    lines = _metrics(tmp_path)
    during, after = _scored_after(lines, ("running", 2))
    _, finishing = _scored_after(lines, ("finishing", None))
    held = live["held_again"][0]["checkpoints"]
    assert len(after) - len(finishing) <= 1  # the one being scored at the fall-back, at most, lands in the phase
    assert len(finishing) >= held
    # Every checkpoint scored once, each at its own time.
    fractions = [e["fraction"] for e in summary["evaluations"]]
    assert len(fractions) == len(set(fractions)) == 20
    times = [e["time_s"] for e in sorted(summary["evaluations"], key=lambda e: e["fraction"])]
    assert times == sorted(times)


BSP_ONLY = "policy.schedule=[{protocol: bsp, until: 1.0}]"


def test_a_diverged_bsp_phase_rolls_back_and_goes_on_at_a_backed_off_rate(write_spec, tmp_path):
    # BSP on 2 workers runs at 2 x 0.05 (the paper's linear rule); the same rate again would diverge again.
    cluster = FakeCluster(total=2000, failure=Failure(worker=0, at=0.6, kind="diverged"))
    summary, cluster, _ = _run(write_spec, tmp_path, [BSP_ONLY], cluster=cluster)
    assert summary["status"] == "completed"
    (event,) = summary["guard_events"]
    assert event["action"].endswith("continue with bsp at rate 0.07071, backed off from 0.1")
    first, rung = summary["schedule"]
    assert first["config"]["learning_rate"] == pytest.approx(0.1)
    assert rung["config"]["learning_rate"] == pytest.approx(0.05 * 2 ** 0.5)  # sqrt(n) x the user's rate
    assert rung["start_fraction"] == first["rolled_back_to"] == event["checkpoint_fraction"]


def test_a_divergence_at_a_scaled_rate_says_which_rate_to_change(write_spec, tmp_path):
    cluster = FakeCluster(total=2000, failure=Failure(worker=0, at=0.6, kind="diverged"))
    summary, _, _ = _run(write_spec, tmp_path, [BSP_ONLY, "policy.guard={max_rollbacks: 0}"], cluster=cluster)
    assert summary["status"] == "diverged"
    clip = "; hyperparameters.clip_norm (the gradients clipped to a global norm) may hold the rate"
    assert summary["message"].endswith("; bsp ran at rate 0.1, 2 x hyperparameters.learning_rate (policy.configuration "
                                       "paper): a lower learning_rate, or policy.configuration fixed (your rate under "
                                       "every protocol), may train" + clip)
    fixed, _, _ = _run(write_spec, tmp_path / "fixed", [BSP_ONLY, "policy.guard={max_rollbacks: 0}",
                                                        "policy.configuration=fixed"],
                       cluster=FakeCluster(total=2000, failure=Failure(worker=0, at=0.6, kind="diverged")))
    assert fixed["message"].endswith("of the workload" + clip)  # the user's own rate: nothing of syncswitch's
    clipped, _, _ = _run(write_spec, tmp_path / "clipped", [BSP_ONLY, "policy.guard={max_rollbacks: 0}",
                                                            "policy.configuration=fixed",
                                                            "hyperparameters.clip_norm=1"],
                         cluster=FakeCluster(total=2000, failure=Failure(worker=0, at=0.6, kind="diverged")))
    assert clipped["message"].endswith("of the workload")  # clipped already, at the user's own rate: no hint
    for wire, said in (("fp16", True), ("bf16", False)):
        compressed, _, _ = _run(write_spec, tmp_path / wire, [BSP_ONLY, "policy.guard={max_rollbacks: 0}",
                                                              "policy.configuration=fixed",
                                                              "hyperparameters.clip_norm=1",
                                                              f"hyperparameters.compression={wire}"],
                                cluster=FakeCluster(total=2000, failure=Failure(worker=0, at=0.6, kind="diverged")))
        assert compressed["message"].endswith("; hyperparameters.compression fp16 overflows past 65504; bf16 keeps "
                                              "float32's range") == said


def test_a_bsp_phase_that_diverges_again_backs_off_again_down_to_the_users_rate(write_spec, tmp_path):
    # 4 workers: 4 x 0.05, then 2 x, then the user's 0.05; the ladder has one rung, repeated for divergences.
    failures = [Failure(worker=0, at=0.6, kind="diverged"), Failure(worker=1, at=0.8, kind="diverged")]
    summary, _, _ = _run(write_spec, tmp_path, [BSP_ONLY], cluster=FakeCluster(total=2000, failure=failures),
                         workers=4)
    assert summary["status"] == "completed"
    assert [e["action"].split(", continue with ")[1] for e in summary["guard_events"]] == [
        "bsp at rate 0.1, backed off from 0.2", "bsp at rate 0.05, backed off from 0.1"]
    assert [p["config"]["learning_rate"] for p in summary["schedule"]] == pytest.approx([0.2, 0.1, 0.05])


def test_a_third_divergence_at_the_users_rate_keeps_it_and_says_so(write_spec, tmp_path):
    failures = [Failure(worker=0, at=at, kind="diverged") for at in (0.4, 0.6, 0.8)]
    summary, _, _ = _run(write_spec, tmp_path, [BSP_ONLY, "policy.guard={max_rollbacks: 3}"],
                         cluster=FakeCluster(total=2000, failure=failures), workers=4)
    assert summary["status"] == "completed"
    assert [e["action"].split(", continue with ")[1] for e in summary["guard_events"]] == [
        "bsp at rate 0.1, backed off from 0.2", "bsp at rate 0.05, backed off from 0.1",
        "bsp at rate 0.05, the rate that diverged"]
