"""Node recovery against fake agents: a lost task or agent costs at most one checkpoint interval, up to max_restarts."""

import json
import os

import pytest

from syncswitch import spec as specmod
from syncswitch.cluster_manager.job import JobRun
from syncswitch.errors import ClusterError
from syncswitch.wire import saved
from tests.cluster_manager.fake_cluster import FakeBackend, FakeCluster, Failure, start_fake_evaluator
from tests.cluster_manager.test_job_lifecycle import JOB, LOSS_RULE, _dip, _run, _states


def _manifest(tmp_path):
    return json.loads((tmp_path / "run" / "checkpoints" / "durable.json").read_text())["checkpoints"]


def test_a_task_lost_in_asp_restores_every_node_from_the_last_checkpoint(write_spec, tmp_path):
    cluster = FakeCluster(total=2000, failure=Failure(worker=1, at=0.6))
    summary, cluster, _ = _run(write_spec, tmp_path, ["policy.switch_at=0.25"], cluster=cluster)
    assert summary["status"] == "completed"
    states = _states(summary)
    i = states.index(("recovering", 1))
    assert states[i - 1] == ("running", 1) and states[i + 1:i + 3] == [("launching", 1), ("running", 1)]
    (failure,) = summary["failures"]
    assert failure["node"] == 1 and failure["what"] == "task exited with code -9" and failure["state"] == "running"
    # The evaluation checkpoint at 50% is the last durable one before 60%: at most one interval (25%) lost.
    assert failure["checkpoint_fraction"] == pytest.approx(0.5) and failure["resumed_phase"] == 1
    assert 0 < failure["samples_lost"] <= 0.25 * 2000
    assert failure["recovered_after_s"] >= 0 and failure["detected_after_s"] >= 0
    assert set(cluster.restores) == {failure["checkpoint"]}  # (the fake restores at each node's launch)
    for node in cluster.nodes:  # every node relaunched, restoring the checkpoint, in the phase it was taken in
        assert len(node.launches) == 2 and node.launches[1].start_phase == 1
        assert node.tasks_stopped == 1  # every old task stopped before any new one (see Launcher.launch_all)
    assert cluster.nodes[0].launches[1].restore_from == failure["checkpoint"]
    # The lost branch's evaluations leave the results; the run's evaluations cover the workload once.
    assert [e["fraction"] for e in summary["evaluations"]] == pytest.approx([0.25, 0.5, 0.75, 1.0], abs=0.01)
    assert summary["goodput"]["useful_samples"] == 2000
    assert summary["goodput"]["lost_samples"] == failure["samples_lost"]


def test_a_task_lost_in_bsp_continues_in_bsp_from_a_periodic_checkpoint(write_spec, tmp_path):
    cluster = FakeCluster(total=2000, failure=Failure(worker=0, at=0.15))
    summary, cluster, _ = _run(write_spec, tmp_path, ["policy.switch_at=0.5", "checkpoint.every=0.1"],
                               cluster=cluster)
    assert summary["status"] == "completed"
    (failure,) = summary["failures"]
    assert failure["checkpoint_fraction"] == pytest.approx(0.1, abs=0.01) and failure["resumed_phase"] == 0
    assert failure["samples_lost"] <= 0.1 * 2000
    bsp = [p for p in summary["schedule"] if p["protocol"] == "bsp"]
    assert bsp[-1]["start_fraction"] == pytest.approx(failure["checkpoint_fraction"])
    assert bsp[-1]["end_fraction"] >= 0.5  # the BSP share still ran in BSP
    kinds = {c["kind"] for c in _manifest(tmp_path)}
    assert "periodic" in kinds and "final" in kinds


def test_a_lost_agent_is_replaced(write_spec, tmp_path):
    cluster = FakeCluster(total=2000, failure=Failure(worker=1, at=0.6, kind="agent"))
    summary, cluster, _ = _run(write_spec, tmp_path, cluster=cluster)
    assert summary["status"] == "completed"
    (failure,) = summary["failures"]
    assert failure["agent_replaced"] and failure["what"].startswith("agent lost")
    assert cluster.replaced == [1] and len(cluster.nodes[1].launches) == 1  # the replacement's first launch


def test_a_loss_before_any_checkpoint_starts_over(write_spec, tmp_path):
    cluster = FakeCluster(total=2000, failure=Failure(worker=1, at=0.1))
    summary, cluster, _ = _run(write_spec, tmp_path, cluster=cluster)
    assert summary["status"] == "completed"
    (failure,) = summary["failures"]
    assert failure["checkpoint"] is None and failure["checkpoint_fraction"] == 0.0 and failure["resumed_phase"] == 0
    assert cluster.nodes[0].launches[1].restore_from == ""


def test_beyond_max_restarts_the_run_fails_with_its_last_checkpoint_intact(write_spec, tmp_path):
    cluster = FakeCluster(total=2000, failure=[Failure(worker=1, at=0.55), Failure(worker=0, at=0.8)])
    summary, cluster, error = _run(write_spec, tmp_path, ["recovery.max_restarts=1"], cluster=cluster,
                                   raises=ClusterError)
    assert summary["status"] == "failed" and len(summary["failures"]) == 1
    assert "recovery.max_restarts=1 reached; the last checkpoint" in str(error)
    latest = _manifest(tmp_path)[-1]
    assert latest["fraction"] == pytest.approx(0.75, abs=0.01)
    assert os.path.exists(latest["path"] + ".index") and summary["checkpoint"]["latest"] == latest["path"]
    assert summary["goodput"]["useful_samples"] == latest["samples"]


def test_a_script_error_is_not_retried(write_spec, tmp_path):
    from syncswitch.errors import ScriptError
    from syncswitch.wire import agent_pb2 as pb

    cluster = FakeCluster(total=2000, failure=Failure(worker=1, at=0.6, kind="error"))
    real_emit = cluster.emit

    def emit(node, **member):  # the task's error is the user's script's
        if "error" in member:
            member["error"].kind = pb.ERROR_KIND_SCRIPT
        real_emit(node, **member)

    cluster.emit = emit
    summary, _, error = _run(write_spec, tmp_path, cluster=cluster, raises=ScriptError)
    assert summary["status"] == "failed" and summary["failures"] == []


def test_resume_continues_a_failed_run_from_its_last_checkpoint(write_spec, tmp_path):
    from syncswitch.cluster_manager import submission
    from tests.cluster_manager.fake_cluster import FakeBackend, start_fake_evaluator

    cluster = FakeCluster(total=2000, failure=Failure(worker=1, at=0.6))
    first, _, _ = _run(write_spec, tmp_path, ["recovery.max_restarts=0", "policy.switch_at=0.25"], cluster=cluster,
                       raises=ClusterError)
    assert first["status"] == "failed"
    run = tmp_path / "run"
    again = FakeCluster(total=2000)
    summary = submission.resume(str(run), progress=False, backend=FakeBackend(again), connect=again.connect,
                             start_evaluator=start_fake_evaluator)
    assert summary["status"] == "completed" and summary["job_id"] == first["job_id"]
    (resumed,) = summary["resumes"]
    assert resumed["checkpoint_fraction"] == pytest.approx(0.5) and resumed["phase"] == 1
    assert 0 < resumed["samples_lost"] <= 0.25 * 2000
    assert again.nodes[0].launches[0].restore_from == resumed["checkpoint"]
    assert again.nodes[0].launches[0].start_phase == 1
    # The whole run: BSP from the first manager, ASP continued by the second; evaluations once each.
    # (a phase is logged when it ends: the first manager's unfinished ASP phase is not)
    assert [p["protocol"] for p in summary["schedule"]] == ["bsp", specmod.default_switch_to(2).protocol]
    assert summary["schedule"][1]["start_fraction"] == pytest.approx(0.5)
    assert [e["fraction"] for e in summary["evaluations"]] == pytest.approx([0.25, 0.5, 0.75, 1.0], abs=0.01)
    assert len(summary["switches"]) == 1
    assert (run / "summary.before-resume-1.json").exists()
    states = [json.loads(line).get("state") for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert states.count("provisioning") == 2  # appended to, not replaced
    with pytest.raises(Exception, match="the run completed; nothing to resume"):
        submission.resume(str(run), progress=False, backend=FakeBackend(FakeCluster()), connect=again.connect)


def test_resume_after_a_guard_rollback_goes_on_in_the_fallback_phase(write_spec, tmp_path):
    """The plan a rollback changed (a fallback phase the spec's schedule does not have) survives the manager:
    a resume used to index the spec's two phases with the checkpoint's phase 2 and crash."""
    from syncswitch.cluster_manager import submission
    from tests.cluster_manager.fake_cluster import FakeBackend, start_fake_evaluator

    loss = lambda f, protocol: 3.0 if protocol != "bsp" and f > 0.3 else 1.0  # noqa: E731
    cluster = FakeCluster(total=4000, loss=loss, failure=Failure(worker=1, at=0.85))
    first, _, _ = _run(write_spec, tmp_path, ["recovery.max_restarts=0", "policy.switch_at=0.25", LOSS_RULE],
                       cluster=cluster, raises=ClusterError)
    assert first["status"] == "failed" and len(first["guard_events"]) == 1
    again = FakeCluster(total=4000, loss=loss)
    summary = submission.resume(str(tmp_path / "run"), progress=False, backend=FakeBackend(again),
                             connect=again.connect, start_evaluator=start_fake_evaluator)
    assert summary["status"] == "completed", summary["message"]
    (resumed,) = summary["resumes"]
    assert resumed["phase"] == 2 and again.nodes[0].launches[0].start_phase == 2
    assert again.nodes[0].launches[0].phases[2].protocol == "bsp"  # the fallback rung, from the saved plan
    assert [p["protocol"] for p in summary["schedule"]][-1] == "bsp"
    assert len(summary["guard_events"]) == 1  # the first manager's rollback stays on record


def test_a_resumed_asynchronous_phase_is_still_guarded(write_spec, tmp_path):
    from syncswitch.cluster_manager import submission
    from tests.cluster_manager.fake_cluster import FakeBackend, start_fake_evaluator

    cluster = FakeCluster(total=4000, failure=Failure(worker=1, at=0.6))
    first, _, _ = _run(write_spec, tmp_path, ["recovery.max_restarts=0", "policy.switch_at=0.25", LOSS_RULE],
                       cluster=cluster, raises=ClusterError)
    assert first["status"] == "failed" and not first["guard_events"]
    loss = lambda f, protocol: 3.0 if protocol != "bsp" and f > 0.7 else 1.0  # noqa: E731 - collapses after resume
    again = FakeCluster(total=4000, loss=loss)
    summary = submission.resume(str(tmp_path / "run"), progress=False, backend=FakeBackend(again),
                             connect=again.connect, start_evaluator=start_fake_evaluator)
    assert summary["status"] == "completed", summary["message"]
    (event,) = summary["guard_events"]
    assert event["reason"] == "loss" and event["action"].endswith("continue with bsp")
    assert event["checkpoint_fraction"] <= 0.7
    assert [p["protocol"] for p in summary["schedule"]][-1] == "bsp"


def test_resume_of_a_folder_that_is_not_a_run(tmp_path):
    from click.testing import CliRunner

    from syncswitch.cli import cli

    result = CliRunner().invoke(cli, ["resume", str(tmp_path)])
    assert result.exit_code == 1 and result.output.strip() == f"error: {tmp_path}: not a syncswitch run folder " \
                                                               "(no job.json)"


def test_a_node_lost_during_a_guard_rollback_finishes_the_rollback(write_spec, tmp_path, monkeypatch):
    from syncswitch.cluster_manager.launcher import Launcher

    cluster = FakeCluster(total=2000, failure=Failure(worker=0, at=0.6, kind="diverged"))
    real_launch = Launcher.launch_all
    lost = []

    def launch_all(self, start_phase, restore_from=""):
        if restore_from and not lost:  # the rollback's relaunch: node 1's agent dies meanwhile
            lost.append(start_phase)
            cluster.nodes[1].events.put("lost")
        return real_launch(self, start_phase, restore_from)

    monkeypatch.setattr(Launcher, "launch_all", launch_all)
    summary, cluster, _ = _run(write_spec, tmp_path, ["policy.switch_at=0.25", "policy.switch_mode=relaunch"],
                               cluster=cluster)
    assert summary["status"] == "completed", summary["message"]
    states = _states(summary)
    assert ("rolling_back", 2) in states and ("recovering", 2) in states
    (failure,) = summary["failures"]
    assert failure["state"] == "launching" and failure["resumed_phase"] == 2  # in the rollback's relaunch
    assert [p["protocol"] for p in summary["schedule"]][-1] == "bsp"  # the guard's fallback ran
    assert summary["guard_events"][-1]["action"].endswith("(finished by the recovery)")


def test_a_node_lost_during_a_guard_fall_back_finishes_the_fall_back(write_spec, tmp_path, monkeypatch):
    from syncswitch.cluster_manager.launcher import Launcher

    real_launch = Launcher.launch_all
    lost = []
    cluster = FakeCluster(total=8000)

    def launch_all(self, start_phase, restore_from=""):
        if start_phase == 2 and not lost:  # the fall-back's relaunch into BSP: node 1's agent dies meanwhile
            lost.append(start_phase)
            cluster.nodes[1].events.put("lost")
        return real_launch(self, start_phase, restore_from)

    monkeypatch.setattr(Launcher, "launch_all", launch_all)
    summary, cluster, _ = _run(write_spec, tmp_path, _dip(monkeypatch) + ["policy.switch_mode=relaunch"],
                               cluster=cluster)
    assert summary["status"] == "completed", summary["message"]
    states = _states(summary)
    assert ("switching", 2) in states and ("recovering", 2) in states
    (failure,) = summary["failures"]
    assert failure["resumed_phase"] == 2  # in the fall-back's phase, not the abandoned one
    assert [p["protocol"] for p in summary["schedule"]][-1] == "bsp"
    (event,) = summary["guard_events"]
    assert event["action"].endswith("(finished by the recovery)")


def _forget_newest(run, count=1):
    """The newest `count` manifest entries, as if the manager had died between their saves and the reports."""
    manifest = run / "checkpoints" / "durable.json"
    doc = json.loads(manifest.read_text())
    forgotten, doc["checkpoints"] = doc["checkpoints"][-count:], doc["checkpoints"][:-count]
    manifest.write_text(json.dumps(doc))
    return forgotten


def test_resume_adopts_a_checkpoint_the_dead_manager_never_heard_of(write_spec, tmp_path):
    from syncswitch.cluster_manager import submission
    from tests.cluster_manager.fake_cluster import FakeBackend, start_fake_evaluator

    cluster = FakeCluster(total=2000, failure=Failure(worker=1, at=0.6))
    first, _, _ = _run(write_spec, tmp_path, ["recovery.max_restarts=0", "policy.switch_at=0.25",
                                              "checkpoint.every=0.1"], cluster=cluster, raises=ClusterError)
    run = tmp_path / "run"
    (newest,) = _forget_newest(run)
    assert newest["fraction"] == pytest.approx(0.6)
    # An abandoned branch's later save lies beside it: another name, never the running branch's.
    abandoned = run / "checkpoints" / "model-r9.ckpt-1400"
    for suffix in (".index", ".data-00000-of-00001"):
        (run / "checkpoints" / f"model-r9.ckpt-1400{suffix}").write_text("x")
    saved.write(str(abandoned), 1400, 0.7, "periodic")
    again = FakeCluster(total=2000)
    summary = submission.resume(str(run), progress=False, backend=FakeBackend(again), connect=again.connect,
                             start_evaluator=start_fake_evaluator)
    assert summary["status"] == "completed", summary["message"]
    (resumed,) = summary["resumes"]
    assert resumed["adopted"] == [newest["path"]] and resumed["checkpoint"] == newest["path"]
    assert resumed["checkpoint_fraction"] == pytest.approx(0.6) and resumed["samples_lost"] <= 0.1 * 2000
    assert again.nodes[0].launches[0].restore_from == newest["path"] and again.nodes[0].launches[0].start_phase == 1


def test_resume_adopts_nothing_saved_past_a_pending_rollbacks_onset(write_spec, tmp_path):
    from syncswitch.cluster_manager import submission
    from tests.cluster_manager.fake_cluster import FakeBackend, start_fake_evaluator

    cluster = FakeCluster(total=2000, failure=Failure(worker=1, at=0.6))
    _run(write_spec, tmp_path, ["recovery.max_restarts=0", "policy.switch_at=0.25", "checkpoint.every=0.1"],
         cluster=cluster, raises=ClusterError)
    run = tmp_path / "run"
    forgotten = _forget_newest(run, 2)  # 0.5 (an evaluation) and 0.6
    state = json.loads((run / "run.json").read_text())
    state["guard"]["pending_onset"] = 0.55  # the manager died while it rolled back from a degradation at 55%
    (run / "run.json").write_text(json.dumps(state))
    again = FakeCluster(total=2000)
    summary = submission.resume(str(run), progress=False, backend=FakeBackend(again), connect=again.connect,
                             start_evaluator=start_fake_evaluator)
    (resumed,) = summary["resumes"]
    assert resumed["adopted"] == [forgotten[0]["path"]] and resumed["checkpoint_fraction"] == pytest.approx(0.5)
    # An adopted evaluation checkpoint the dead manager never scored is scored now.
    assert 0.5 in [round(e["fraction"], 2) for e in summary["evaluations"]]


def test_recovery_adopts_a_save_whose_report_had_not_arrived(write_spec, tmp_path):
    # The chief saved at 50% and the worker died before the manager read the report (a chaos run lost 2048
    # samples this way): the chief's record on disk makes it the restore point, not the one at 25%.
    cluster = FakeCluster(total=2000, failure=Failure(worker=1, at=0.6))
    real_emit = cluster.emit

    def emit(node, **member):
        late = member.get("eval_checkpoint") or member.get("saved")
        if late is not None and 0.45 < late.fraction < 0.6:
            return  # still on its way when the failure is handled
        real_emit(node, **member)

    cluster.emit = emit
    summary, cluster, _ = _run(write_spec, tmp_path, ["policy.switch_at=0.25"], cluster=cluster)
    assert summary["status"] == "completed", summary["message"]
    (failure,) = summary["failures"]
    assert failure["checkpoint_fraction"] == pytest.approx(0.5) and failure["adopted"] == [failure["checkpoint"]]
    assert cluster.nodes[0].launches[1].restore_from == failure["checkpoint"]
    assert 0 < failure["samples_lost"] <= 0.25 * 2000
    assert [c["path"] for c in _manifest(tmp_path)].count(failure["checkpoint"]) == 1


def test_the_failure_names_what_the_dead_task_said_before_it_exited(write_spec, tmp_path):
    # An exit code alone hid the cause (a script's generator raising "corrupt record 900" in the input pipeline).
    cluster = FakeCluster(total=2000, failure=Failure(worker=1, at=0.6, kind="error"))
    summary, _, error = _run(write_spec, tmp_path, ["recovery.max_restarts=0"], cluster=cluster, raises=ClusterError)
    assert str(error).startswith("node 1: task exited with code 3 after simulated failure; recovery.max_restarts=0")


def test_a_node_silent_while_the_other_reaches_the_phases_end_is_replaced(write_spec, tmp_path):
    cluster = FakeCluster(total=2000, failure=Failure(worker=1, at=0.6, kind="hang"))
    summary, cluster, _ = _run(write_spec, tmp_path, ["recovery.silence_s=1"], cluster=cluster)
    assert summary["status"] == "completed"
    (failure,) = summary["failures"]
    assert failure["node"] == 1 and failure["what"].startswith("silent for") and failure["agent_replaced"]
    assert failure["state"] == "running" and failure["resumed_phase"] == 1
    assert cluster.replaced == [1] and cluster.nodes[0].launches[1].restore_from == failure["checkpoint"]


def test_a_node_that_hangs_as_the_next_phase_starts_is_replaced(write_spec, tmp_path):
    """Worker 1 hangs at its first step of phase 1 (an in-place switch), alive and silent, while worker 0 trains the
    phase to its end and waits there: no first step will come from it, so it is lost after recovery.silence_s, as
    a node silent in a running phase is, instead of the run failing on the feed's stall minutes later."""
    cluster = FakeCluster(total=2000, failure=Failure(worker=1, at=0.0, kind="hang", phase=1))
    summary, cluster, _ = _run(write_spec, tmp_path, ["recovery.silence_s=1"], cluster=cluster)
    assert summary["status"] == "completed"
    (failure,) = summary["failures"]
    assert failure["node"] == 1 and failure["what"].startswith("silent for") and failure["agent_replaced"]
    assert cluster.replaced == [1]


def test_when_no_node_is_heard_from_and_none_waits_at_the_end_the_run_fails(write_spec, tmp_path):
    cluster = FakeCluster(total=2000, failure=[Failure(worker=0, at=0.6, kind="hang"),
                                               Failure(worker=1, at=0.6, kind="hang")])
    spec = specmod.load(write_spec(JOB.replace("WORKERS", "2")), ["recovery.silence_s=1"])
    job = JobRun(spec, str(tmp_path / "run"), progress=False, backend=FakeBackend(cluster), connect=cluster.connect,
                 start_evaluator=start_fake_evaluator)
    job.ctx.feed.stall_timeout_s = 3.0  # the stall the run fails on (the default is minutes)
    with pytest.raises(ClusterError, match="no event from any node for 3 s"):
        job.run()
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["failures"] == [] and cluster.replaced == []
