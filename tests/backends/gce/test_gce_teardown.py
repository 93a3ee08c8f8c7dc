"""Cleanup guarantees: teardown after a failure at each stage, retries, idempotence, the journal, crashes."""

from __future__ import annotations

import json
import os

import pytest
from gce_fake import BadRequest, Forbidden, ServiceUnavailable

from syncswitch.backends.gce import journal as journals
from syncswitch.errors import ClusterError


def _journal(request):
    with open(journals.path_in(request.run_dir), encoding="utf-8") as fh:
        return json.load(fh)


def _states(request):
    return {r["name"]: r["state"] for r in _journal(request)["resources"]}


def test_teardown_deletes_everything_and_is_idempotent(cloud, backend, make_request):
    request = make_request(3)
    backend.provision(request)
    assert len(cloud.instances) == 3 and len(cloud.firewalls) == 1
    backend.teardown()
    assert cloud.instances == {} and cloud.firewalls == {}
    assert set(_states(request).values()) == {"deleted"}
    calls = len(cloud.calls)
    backend.teardown()
    assert len(cloud.calls) == calls  # nothing left: no API call at all


def test_teardown_before_provision_is_a_no_op(cloud, backend):
    backend.teardown()
    assert cloud.calls == []


def test_failure_at_firewall_creation(cloud, backend, make_request):
    cloud.fail_next("firewalls.insert", Forbidden("Required 'compute.firewalls.create' permission",
                                                  errors=[{"reason": "forbidden", "message": "denied"}]))
    request = make_request(2)
    with pytest.raises(ClusterError, match="creating firewall rule syncswitch-job-1-fw: forbidden"):
        backend.provision(request)
    assert cloud.methods("instances.insert") == []
    assert cloud.instances == {} and cloud.firewalls == {}


def test_failure_while_creating_nodes_is_not_a_failover(cloud, backend, events, make_request):
    cloud.fail_next("instances.insert", BadRequest("Invalid value for field 'resource.disks[0]': image not found",
                                                   errors=[{"reason": "invalid", "message": "bad image"}]))
    request = make_request(4, zones=["us-west1-b", "us-west1-a"], parallelism=1)
    with pytest.raises(ClusterError, match="creating nodes in us-west1-b: invalid"):
        backend.provision(request)
    assert not any("us-west1-a" in b["machine_type"] for b in cloud.bodies("instances.insert"))
    assert cloud.instances == {} and cloud.firewalls == {}
    assert set(_states(request).values()) <= {"deleted", "failed"}


def test_failure_while_waiting_for_agents(cloud, make_backend, make_request):
    backend = make_backend(wait_port=lambda host, port, timeout: host != "10.138.0.2")
    cloud.hooks.append(lambda m, kw: cloud.set_status("syncswitch-job-1-n1", "TERMINATED")
                       if m == "instances.get" else None)
    with pytest.raises(ClusterError, match=r"node 1 \(syncswitch-job-1-n1\) is TERMINATED"):
        backend.provision(make_request(3))
    assert cloud.instances == {} and cloud.firewalls == {}


def test_agent_timeout_names_the_boot_log(cloud, make_backend, make_request):
    now = [0.0]

    def closed_port(host, port, timeout):
        now[0] += timeout  # a probe that never connects uses up its whole timeout
        return False
    backend = make_backend(wait_port=closed_port, clock=lambda: now[0], poll_s=10.0)
    with pytest.raises(ClusterError, match="get-serial-port-output syncswitch-job-1-n0 --zone us-west1-b"):
        backend.provision(make_request(1, boot_timeout_s=30))
    assert cloud.instances == {}


def test_interrupt_during_provisioning_cleans_up(cloud, make_backend, make_request):
    def on_event(message):
        if message.startswith("waiting for"):
            raise KeyboardInterrupt
    backend = make_backend(on_event=on_event)
    with pytest.raises(KeyboardInterrupt):
        backend.provision(make_request(3))
    assert cloud.instances == {} and cloud.firewalls == {}


def test_delete_retries_transient_errors(cloud, backend, make_request):
    backend.provision(make_request(2))
    cloud.fail_next("instances.delete", ServiceUnavailable("backend error",
                                                           errors=[{"reason": "backendError", "message": "x"}]))
    backend.teardown()
    assert cloud.instances == {}
    assert len(cloud.methods("instances.delete")) == 3


def test_permanent_delete_failure_is_reported_and_recoverable(cloud, backend, make_request):
    request = make_request(2)
    backend.provision(request)
    cloud.fail_next("instances.delete", *[Forbidden("denied", errors=[{"reason": "forbidden", "message": "x"}])] * 3)
    with pytest.raises(ClusterError, match=r"could not delete 1 resource\(s\) of job job-1.*cluster down --job job-1"):
        backend.teardown()
    leftover = [name for name, state in _states(request).items() if state != "deleted"]
    assert len(leftover) == 1 and leftover[0] in cloud.instance_names()
    backend.teardown()  # the next try (a finally path, or `cluster down`) finishes the job
    assert cloud.instances == {}


def test_already_deleted_resources_are_fine(cloud, backend, make_request):
    request = make_request(2)
    backend.provision(request)
    cloud.instances.clear()  # e.g. spot VMs deleted on preemption
    cloud.firewalls.clear()
    backend.teardown()
    assert set(_states(request).values()) == {"deleted"}


def test_journal_records_before_each_insert(cloud, backend, make_request):
    request = make_request(2)
    seen = []

    def check(method, kwargs):
        if method == "instances.insert":
            seen.append(_states(request)[kwargs["body"]["name"]])
    cloud.hooks.append(check)
    backend.provision(request)
    assert seen == ["creating", "creating"]
    doc = _journal(request)
    assert doc["job_id"] == "job-1" and doc["project"] == "test-proj"
    assert {r["state"] for r in doc["resources"]} == {"created"}
    assert not [f for f in os.listdir(request.run_dir) if f.startswith(".gce-journal")]


class Crash(BaseException):
    """The manager process dying mid-provision: no finally block gets to run teardown."""


def _crash_after_inserts(cloud, count):
    def hook(method, kwargs):
        if method == "instances.insert" and len(cloud.methods("instances.insert")) > count:
            raise Crash()
    cloud.hooks.append(hook)


def _crashed_backend(make_backend):
    backend = make_backend()
    backend.teardown = lambda: None  # the process is gone, so is its cleanup
    return backend


def test_rerun_after_crash_deletes_leftovers_first(cloud, make_backend, events, make_request):
    request = make_request(4, parallelism=1)
    _crash_after_inserts(cloud, 2)
    with pytest.raises(BaseException):
        _crashed_backend(make_backend).provision(request)
    assert len(cloud.instances) == 2 and len(cloud.firewalls) == 1
    cloud.hooks.clear()
    info = make_backend().provision(request)  # the re-run, same job and run folder
    assert len(info.nodes) == 4 and len(cloud.instances) == 4
    assert any("leftover resource(s) of job job-1" in e for e in events)


def test_cluster_down_from_journal_after_crash(cloud, make_backend, make_request, tmp_path):
    from click.testing import CliRunner

    from syncswitch.cli import cli

    request = make_request(3, run_dir=tmp_path / "runs" / "job-1-20260101")
    _crash_after_inserts(cloud, 2)
    with pytest.raises(BaseException):
        _crashed_backend(make_backend).provision(request)
    cloud.hooks.clear()
    # Labels are not even needed: the journal alone finds the VMs.
    cloud.fail_next("instances.aggregated_list", Forbidden("no list permission",
                                                           errors=[{"reason": "forbidden", "message": "x"}]))
    result = CliRunner().invoke(cli, ["cluster", "down", "--job", "job-1", "--runs-root", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    assert cloud.instances == {} and cloud.firewalls == {}
    assert "job job-1: 3 deleted" in result.output
    assert set(_states(request).values()) == {"deleted"}


def _set_owner(request, **owner):
    path = journals.path_in(request.run_dir)
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    doc["owner"] = owner
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh)


def _dead_pid():
    import subprocess
    import sys

    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True).stdout)


def test_rerun_into_the_same_run_folder_with_a_new_job_id(cloud, make_backend, events, make_request):
    # The manager gives every submission a fresh job id; a re-run may reuse the crashed run's folder.
    crashed = make_request(3, job_id="job-old", parallelism=1)
    _crash_after_inserts(cloud, 2)
    with pytest.raises(BaseException):
        _crashed_backend(make_backend).provision(crashed)
    cloud.hooks.clear()
    make_backend().provision(make_request(1, job_id="job-new"))
    assert [name for name in cloud.instance_names()] == ["syncswitch-job-new-n0"]
    assert list(cloud.firewalls) == ["syncswitch-job-new-fw"]
    assert any("leftover resource(s) of job job-old" in e for e in events)
    kept = os.path.join(crashed.run_dir, journals.FILENAME + ".job-old")
    assert {r["state"] for r in json.load(open(kept))["resources"]} == {"deleted"}


def test_rerun_deletes_what_a_dead_sibling_run_left(cloud, make_backend, events, make_request, tmp_path):
    crashed = make_request(2, job_id="job-old", run_dir=tmp_path / "runs" / "a", parallelism=1)
    _crash_after_inserts(cloud, 1)
    with pytest.raises(BaseException):
        _crashed_backend(make_backend).provision(crashed)
    cloud.hooks.clear()
    _set_owner(crashed, host=__import__("socket").gethostname(), pid=_dead_pid())
    make_backend().provision(make_request(1, job_id="job-new", run_dir=tmp_path / "runs" / "b"))
    assert cloud.instance_names() == ["syncswitch-job-new-n0"]
    assert any("leftover resource(s) of job job-old" in e for e in events)


def test_live_or_foreign_siblings_are_only_reported(cloud, make_backend, events, make_request, tmp_path):
    running = make_request(1, job_id="job-running", run_dir=tmp_path / "runs" / "a")
    make_backend().provision(running)  # owned by this (live) process
    foreign = make_request(1, job_id="job-foreign", run_dir=tmp_path / "runs" / "b")
    make_backend().provision(foreign)
    _set_owner(foreign, host="laptop-of-someone-else", pid=1)
    events.clear()
    make_backend().provision(make_request(1, job_id="job-new", run_dir=tmp_path / "runs" / "c"))
    assert len(cloud.instances) == 3
    notes = [e for e in events if "live resource(s) of job" in e]
    assert len(notes) == 1 and "job-foreign" in notes[0] and "cluster down --job job-foreign" in notes[0]
