"""The adaptor (lazy SDK, error classification, project lookup), the journal, and the port probe."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading

import pytest
from gce_fake import BadRequest, Conflict, FakeCloud, Forbidden, NotFound, exhausted_op, quota_op

from syncswitch.backends.gce import compute, journal, wait_for_port
from syncswitch.errors import ClusterError


def test_importing_the_backend_never_imports_the_sdk():
    code = ("import sys, syncswitch.backends.gce, syncswitch.cli; "
            "print(any(m.startswith(('google.cloud', 'google.api_core')) for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _sdk_installed() -> bool:
    try:
        return importlib.util.find_spec("google.cloud.compute_v1") is not None
    except ModuleNotFoundError:
        return False


@pytest.mark.skipif(_sdk_installed(), reason="google-cloud-compute is installed here")
def test_missing_sdk_gives_the_install_hint():
    with pytest.raises(ClusterError, match=r"pip install -e \.\[gce\]"):
        compute.load_sdk()


@pytest.mark.parametrize("exc, kind", [
    (exhausted_op("p", "us-west1-b", "n").exception(), compute.EXHAUSTED),
    (quota_op("p", "us-west1-b", "n").exception(), compute.QUOTA),
    (Forbidden("Quota 'CPUS' exceeded.  Limit: 24.0 in region us-west1.",
               errors=[{"reason": "quotaExceeded", "message": "q"}]), compute.QUOTA),
    (NotFound("The resource was not found", errors=[{"reason": "notFound", "message": "x"}]), compute.NOT_FOUND),
    (NotFound("gone"), compute.NOT_FOUND),
    (Conflict("already exists"), compute.EXISTS),
    (BadRequest("Invalid value for field", errors=[{"reason": "invalid", "message": "x"}]), compute.OTHER),
])
def test_classify(exc, kind):
    err = compute.classify(exc)
    assert err.kind == kind
    assert str(exc.message) in str(err)


def test_classified_message_leads_with_the_code():
    err = compute.classify(exhausted_op("p", "us-west1-b", "n").exception())
    assert str(err).startswith("ZONE_RESOURCE_POOL_EXHAUSTED: ")
    assert err.status == 503 and err.codes == ("ZONE_RESOURCE_POOL_EXHAUSTED",)


def test_project_resolution(monkeypatch):
    cloud = FakeCloud(project="adc-proj")
    assert compute.ComputeClient(sdk=cloud.sdk()).project == "adc-proj"
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "env-proj")
    assert compute.ComputeClient(sdk=cloud.sdk()).project == "env-proj"
    assert compute.ComputeClient("given-proj", sdk=cloud.sdk()).project == "given-proj"


def test_no_project_anywhere():
    cloud = FakeCloud(project=None)
    with pytest.raises(ClusterError, match="no GCP project: set cluster.project"):
        compute.ComputeClient(sdk=cloud.sdk())


def test_list_filters_by_label_again_client_side():
    cloud = FakeCloud()
    api = compute.ComputeClient(sdk=cloud.sdk())
    body = {"name": "other", "labels": {"syncswitch-job": "b"}, "network_interfaces": [{}]}
    cloud.instances[("us-west1-b", "other")] = {"body": body, "status": "RUNNING", "ip": "10.0.0.9"}
    assert api.list_instances("syncswitch-job", "a") == []
    [inst] = api.list_instances("syncswitch-job")
    assert (inst.name, inst.zone, inst.internal_ip, inst.labels) == ("other", "us-west1-b", "10.0.0.9",
                                                                     {"syncswitch-job": "b"})


def test_journal_round_trip_and_find(tmp_path):
    run = tmp_path / "runs" / "r1"
    ledger, previous = journal.Journal.open(journal.path_in(str(run)), "My_Job", "proj-1")
    assert previous is None
    ledger.record("instance", "n0", journal.CREATING, zone="us-west1-b")
    ledger.record("instance", "n0", journal.CREATED, zone="us-west1-b")
    ledger.record("firewall", "fw", journal.DELETED)
    again, previous = journal.Journal.open(journal.path_in(str(run)), "My_Job", "proj-1")
    assert previous is None and [e["name"] for e in again.live()] == ["n0"]
    assert again.owner_status() == journal.ALIVE
    assert os.listdir(run) == [journal.FILENAME]
    from syncswitch.backends.gce.resources import slug
    for key in ("My_Job", slug("My_Job")):
        assert [j.path for j in journal.find(key, [str(tmp_path / "runs")])] == [journal.path_in(str(run))]
    assert journal.find("other", [str(tmp_path / "runs")]) == []


def test_corrupt_journal_is_kept_aside(tmp_path):
    path = tmp_path / journal.FILENAME
    path.write_text("{not json")
    ledger, previous = journal.Journal.open(str(path), "job", "proj-1")
    assert previous is None
    ledger.record("instance", "n0", journal.CREATING, zone="z")
    assert json.loads(path.read_text())["job_id"] == "job"
    assert any(p.name.startswith(journal.FILENAME + ".corrupt-") for p in tmp_path.iterdir())


def test_concurrent_journal_writes_stay_valid(tmp_path):
    ledger = journal.Journal(str(tmp_path / journal.FILENAME), "job", "proj-1")
    threads = [threading.Thread(target=lambda i=i: [ledger.record("instance", f"n{i}", s, zone="z")
                                                   for s in (journal.CREATING, journal.CREATED)])
               for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    doc = json.loads((tmp_path / journal.FILENAME).read_text())
    assert len(doc["resources"]) == 8 and {r["state"] for r in doc["resources"]} == {"created"}


def test_wait_for_port():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        assert wait_for_port("127.0.0.1", port, 2.0)
    finally:
        server.close()
    assert not wait_for_port("127.0.0.1", port, 0.3, interval=0.05)


def test_owner_status():
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone = journal.Journal("x", "job", "p", owner={"host": socket.gethostname(), "pid": int(done.stdout)})
    assert gone.owner_status() == journal.DEAD
    recycled = journal.Journal("x", "job", "p", owner={**journal.current_owner(), "started": 1.0})
    assert recycled.owner_status() == journal.DEAD
    elsewhere = journal.Journal("x", "job", "p", owner={"host": "another-host", "pid": os.getpid()})
    assert elsewhere.owner_status() == journal.UNKNOWN
    assert journal.Journal("x", "job", "p").owner_status() == journal.ALIVE


def test_rejected_label_filter_falls_back_to_a_full_listing():
    cloud = FakeCloud()
    api = compute.ComputeClient(sdk=cloud.sdk())
    body = {"name": "n0", "labels": {"syncswitch-job": "a"}, "network_interfaces": [{}]}
    cloud.instances[("us-west1-b", "n0")] = {"body": body, "status": "RUNNING", "ip": "10.0.0.2"}
    cloud.fail_next("instances.aggregated_list", BadRequest("Invalid list filter expression",
                                                            errors=[{"reason": "invalid", "message": "x"}]))
    assert [i.name for i in api.list_instances("syncswitch-job", "a")] == ["n0"]
    assert [kw["filter"] for m, kw in cloud.calls if m == "instances.aggregated_list"] == [
        "labels.syncswitch-job = a", ""]


def test_clients_are_per_thread():
    cloud = FakeCloud()
    api = compute.ComputeClient(sdk=cloud.sdk())
    seen = []
    thread = threading.Thread(target=lambda: seen.append(api._client("InstancesClient")))
    thread.start()
    thread.join()
    assert api._client("InstancesClient") is api._client("InstancesClient")
    assert seen[0] is not api._client("InstancesClient")
