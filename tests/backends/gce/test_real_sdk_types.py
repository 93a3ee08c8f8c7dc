"""The gce adaptor against the real google-cloud-compute SDK, offline.

The real compute_v1 clients (anonymous credentials, REST transport) build and send every request; only the
HTTP adapter underneath is replaced by an in-memory Compute Engine that records each request and answers in
the API's JSON. So message construction, field names, enum strings, URL paths, query parameters, operation
polling and the SDK's own exception types are all the real ones. Nothing leaves the process.
"""

from __future__ import annotations

import functools
import json
import re
import threading
import types
import urllib.parse

import pytest

compute_v1 = pytest.importorskip("google.cloud.compute_v1")
requests = pytest.importorskip("requests")
from google.api_core import exceptions as api_exceptions  # noqa: E402
from google.auth.credentials import AnonymousCredentials  # noqa: E402

from syncswitch.backends.base import ProvisionRequest  # noqa: E402
from syncswitch.backends.gce import GceBackend, options, resources  # noqa: E402
from syncswitch.backends.gce.compute import (  # noqa: E402
    EXHAUSTED, QUOTA, ComputeClient, GceError, Sdk)

PROJECT = "test-proj-1"
ZONE = "us-west1-b"
HOST = "compute.googleapis.com"
BASE = f"/compute/v1/projects/{PROJECT}"


def _error(status: int, reason: str, message: str) -> tuple[int, dict]:
    return status, {"error": {"code": status, "message": message,
                              "errors": [{"message": message, "domain": "global", "reason": reason}]}}


class RestCompute:
    """Compute Engine's REST API for one project, in memory; `requests` holds (method, path, query, body)."""

    def __init__(self):
        self.requests: list[tuple[str, str, dict, dict | None]] = []
        self.instances: dict[tuple[str, str], dict] = {}
        self.firewalls: dict[str, dict] = {}
        self.operations: dict[str, dict] = {}
        self.op_errors: list[tuple[int, str, str, str]] = []  # next failed operations: status, message, code, text
        self.http_errors: dict[tuple[str, str], list[tuple[int, dict]]] = {}  # (method, path) -> answers
        self._lock = threading.Lock()
        self._n = 0

    # -- the HTTP adapter ----------------------------------------------------------------------
    def send(self, adapter, request, **kwargs):
        url = urllib.parse.urlsplit(request.url)
        assert url.scheme == "https" and url.hostname == HOST, f"request to {request.url} left the fake"
        query = dict(urllib.parse.parse_qsl(url.query))
        body = json.loads(request.body) if request.body else None
        with self._lock:
            self.requests.append((request.method, url.path, query, body))
            scripted = self.http_errors.get((request.method, url.path))
            status, payload = scripted.pop(0) if scripted else self._route(request.method, url.path, query, body)
        response = requests.Response()
        response.status_code, response.url, response.request = status, request.url, request
        response._content = json.dumps(payload).encode()
        response.headers["Content-Type"] = "application/json; charset=UTF-8"
        response.encoding = "utf-8"
        return response

    # -- routes --------------------------------------------------------------------------------
    def _operation(self, kind: str, target: str, zone: str | None) -> tuple[int, dict]:
        self._n += 1
        name = f"operation-{self._n}-{kind}"
        op = {"kind": "compute#operation", "name": name, "operationType": kind, "targetLink": target,
              "status": "RUNNING"}
        if zone:
            op["zone"] = f"https://{HOST}{BASE}/zones/{zone}"
        done = dict(op, status="DONE", progress=100)
        if self.op_errors:
            status, message, code, text = self.op_errors.pop(0)
            done.update(httpErrorStatusCode=status, httpErrorMessage=message,
                        error={"errors": [{"code": code, "message": text}]})
        self.operations[name] = done
        return 200, op

    def _instance_json(self, zone: str, body: dict) -> dict:
        nics = [dict(nic, networkIP=body["_ip"]) for nic in body["networkInterfaces"]]
        return {**{k: v for k, v in body.items() if k != "_ip"}, "kind": "compute#instance", "id": "123",
                "zone": f"https://{HOST}{BASE}/zones/{zone}", "status": "RUNNING",
                "creationTimestamp": "2026-01-01T00:00:00.000-08:00", "networkInterfaces": nics}

    def _route(self, method: str, path: str, query: dict, body: dict | None) -> tuple[int, dict]:
        parts = path[len(BASE):].strip("/").split("/") if path.startswith(BASE) else None
        if parts is None:
            return _error(403, "forbidden", f"project of {path} is not {PROJECT}")
        match method, parts:
            case "GET", [""]:
                return 200, {"kind": "compute#project", "name": PROJECT,
                             "quotas": [{"metric": "GPUS_ALL_REGIONS", "limit": 8.0, "usage": 1.0}]}
            case "GET", ["regions", region]:
                return 200, {"kind": "compute#region", "name": region,
                             "quotas": [{"metric": "CPUS", "limit": 72.0, "usage": 8.0},
                                        {"metric": "NVIDIA_T4_GPUS", "limit": 4.0, "usage": 0.0},
                                        {"metric": "PREEMPTIBLE_NVIDIA_T4_GPUS", "limit": 0.0, "usage": 0.0}]}
            case "POST", ["zones", zone, "instances"]:
                if (zone, body["name"]) in self.instances:
                    return _error(409, "alreadyExists", f"The resource '{path}/{body['name']}' already exists")
                self.instances[(zone, body["name"])] = dict(body, _ip=f"10.138.0.{len(self.instances) + 2}")
                return self._operation("insert", f"https://{HOST}{path}/{body['name']}", zone)
            case "GET", ["zones", zone, "instances", name]:
                if (zone, name) not in self.instances:
                    return _error(404, "notFound", f"The resource '{path}' was not found")
                return 200, self._instance_json(zone, self.instances[(zone, name)])
            case "DELETE", ["zones", zone, "instances", name]:
                if self.instances.pop((zone, name), None) is None:
                    return _error(404, "notFound", f"The resource '{path}' was not found")
                return self._operation("delete", f"https://{HOST}{path}", zone)
            case "GET", ["zones", _, "operations", name] | ["global", "operations", name]:
                if name not in self.operations:
                    return _error(404, "notFound", f"The resource '{path}' was not found")
                return 200, self.operations[name]
            case "GET", ["aggregated", "instances"]:
                items = {}
                for (zone, name), inst in sorted(self.instances.items()):
                    items.setdefault(f"zones/{zone}", {"instances": []})["instances"].append(
                        self._instance_json(zone, inst))
                items.setdefault("zones/us-east1-c", {"warning": {"code": "NO_RESULTS_ON_PAGE",
                                                                  "message": "no results"}})
                return 200, {"kind": "compute#instanceAggregatedList", "items": items}
            case "POST", ["global", "firewalls"]:
                if body["name"] in self.firewalls:
                    return _error(409, "alreadyExists", f"The resource '{path}/{body['name']}' already exists")
                self.firewalls[body["name"]] = body
                return self._operation("insert", f"https://{HOST}{path}/{body['name']}", None)
            case "DELETE", ["global", "firewalls", name]:
                if self.firewalls.pop(name, None) is None:
                    return _error(404, "notFound", f"The resource '{path}' was not found")
                return self._operation("delete", f"https://{HOST}{path}", None)
            case "GET", ["global", "firewalls"]:
                rules = [dict(b, creationTimestamp="2026-01-01T00:00:00.000-08:00")
                         for _, b in sorted(self.firewalls.items())]
                return 200, {"kind": "compute#firewallList", "items": rules}
        raise AssertionError(f"the fake has no route for {method} {path}")

    def sent(self, method: str | None = None, path_part: str = "") -> list[tuple[str, str, dict, dict | None]]:
        return [r for r in self.requests if (method is None or r[0] == method) and path_part in r[1]]


def _real_sdk() -> Sdk:
    """The real compute_v1, with every client built on anonymous credentials (no ADC lookup)."""

    def make(cls):
        return functools.partial(cls, credentials=AnonymousCredentials())

    clients = {name: make(getattr(compute_v1, name)) for name in
               ("InstancesClient", "FirewallsClient", "RegionsClient", "ProjectsClient")}
    module = types.SimpleNamespace(**{name: getattr(compute_v1, name) for name in
                                      ("Instance", "Firewall", "AggregatedListInstancesRequest",
                                       "ListFirewallsRequest")}, **clients)
    return Sdk(compute_v1=module, exceptions=api_exceptions, default_project=lambda: None)


@pytest.fixture
def rest(monkeypatch):
    fake = RestCompute()
    monkeypatch.setattr(requests.adapters.HTTPAdapter, "send",
                        lambda adapter, request, **kwargs: fake.send(adapter, request, **kwargs))
    return fake


@pytest.fixture
def api(rest):
    return ComputeClient(PROJECT, sdk=_real_sdk(), op_timeout=30)


def _cfg(**opts):
    return options.resolve(GceBackend.validate_options({"project": PROJECT, **opts}))


def _insert(api, cfg, index=0, zone=ZONE):
    body = resources.instance_body(cfg, project=PROJECT, zone=zone, job_id="job-1", index=index, token="tok",
                                   startup_script="#!/bin/bash\ntrue\n")
    api.insert_instance(zone, body)
    return body


def test_instance_insert_sends_the_api_fields_and_waits_on_the_zone_operation(rest, api):
    cfg = _cfg(spot=True, external_ip=True, network="vpc-1", subnetwork="sub-1", labels={"team": "ml"},
               disk_size_gb=200, disk_type="pd-ssd", service_account="sa@test-proj-1.iam.gserviceaccount.com")
    _insert(api, cfg)
    (post,) = rest.sent("POST")
    method, path, query, sent = post
    assert path == f"{BASE}/zones/{ZONE}/instances"
    assert sent["name"] == "syncswitch-job-1-n0"
    assert sent["machineType"] == f"zones/{ZONE}/machineTypes/n1-standard-8"
    assert sent["labels"] == {"team": "ml", "syncswitch-job": "job-1", "syncswitch-node": "0"}
    assert sent["tags"] == {"items": ["syncswitch-job-1"]}
    (disk,) = sent["disks"]
    assert disk["boot"] is True and disk["autoDelete"] is True
    init = disk["initializeParams"]
    assert init["sourceImage"] == "projects/deeplearning-platform-release/global/images/family/" \
                                  "common-cu124-debian-11-py310"
    assert init["diskSizeGb"] == "200"  # int64 travels as a JSON string
    assert init["diskType"] == f"zones/{ZONE}/diskTypes/pd-ssd"
    assert init["labels"] == sent["labels"]
    (nic,) = sent["networkInterfaces"]
    assert nic["network"] == f"projects/{PROJECT}/global/networks/vpc-1"
    assert nic["subnetwork"] == f"projects/{PROJECT}/regions/us-west1/subnetworks/sub-1"
    assert nic["accessConfigs"] == [{"name": "External NAT", "type": "ONE_TO_ONE_NAT"}]
    assert sent["scheduling"] == {"onHostMaintenance": "TERMINATE", "automaticRestart": False,
                                  "provisioningModel": "SPOT", "instanceTerminationAction": "DELETE"}
    assert sent["serviceAccounts"] == [{"email": "sa@test-proj-1.iam.gserviceaccount.com",
                                        "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}]
    assert [i["key"] for i in sent["metadata"]["items"]] == [
        "startup-script", "syncswitch-token", "syncswitch-job-id", "install-nvidia-driver"]
    assert sent["metadata"]["items"][0]["value"] == "#!/bin/bash\ntrue\n"
    assert sent["guestAccelerators"] == [{"acceleratorType": f"zones/{ZONE}/acceleratorTypes/nvidia-tesla-t4",
                                          "acceleratorCount": 1}]
    # the enum-like strings are the API's own values
    assert sent["scheduling"]["provisioningModel"] in compute_v1.Scheduling.ProvisioningModel.__members__
    assert sent["scheduling"]["onHostMaintenance"] in compute_v1.Scheduling.OnHostMaintenance.__members__
    assert sent["scheduling"]["instanceTerminationAction"] in \
        compute_v1.Scheduling.InstanceTerminationAction.__members__
    assert nic["accessConfigs"][0]["type"] in compute_v1.AccessConfig.Type.__members__
    # the wait polled the zone operation the insert returned
    assert rest.requests[1][:2] == ("GET", f"{BASE}/zones/{ZONE}/operations/operation-1-insert")


def test_cpu_only_standard_instance(rest, api):
    _insert(api, _cfg(accelerator=None, external_ip=False, machine_type="n1-standard-2"))
    sent = rest.sent("POST")[0][3]
    assert "guestAccelerators" not in sent and "accessConfigs" not in sent["networkInterfaces"][0]
    assert sent["scheduling"]["provisioningModel"] == "STANDARD"
    assert "instanceTerminationAction" not in sent["scheduling"]
    assert "install-nvidia-driver" not in [i["key"] for i in sent["metadata"]["items"]]
    assert sent["networkInterfaces"][0]["network"] == f"projects/{PROJECT}/global/networks/default"


def test_firewall_insert_and_the_global_operation(rest, api):
    cfg = _cfg(source_ranges=["10.0.0.0/8"])
    api.insert_firewall(resources.firewall_body(cfg, project=PROJECT, job_id="job-1"))
    (_, path, _, sent), (wait_method, wait_path, _, _) = rest.requests
    assert path == f"{BASE}/global/firewalls"
    assert sent["allowed"] == [{"IPProtocol": "tcp", "ports": ["7070", "2222", "2223"]}]
    assert sent["direction"] == "INGRESS" and sent["direction"] in compute_v1.Firewall.Direction.__members__
    assert sent["sourceRanges"] == ["10.0.0.0/8"] and sent["targetTags"] == ["syncswitch-job-1"]
    assert sent["network"] == f"projects/{PROJECT}/global/networks/default" and sent["priority"] == 1000
    assert (wait_method, wait_path) == ("GET", f"{BASE}/global/operations/operation-1-insert")
    # a rule of the same name answers 409, which the backend adopts
    with pytest.raises(GceError) as info:
        api.insert_firewall(resources.firewall_body(cfg, project=PROJECT, job_id="job-1"))
    assert info.value.kind == "exists" and info.value.status == 409
    assert [f.name for f in api.list_firewalls("syncswitch-")] == ["syncswitch-job-1-fw"]
    assert rest.requests[-1][:2] == ("GET", f"{BASE}/global/firewalls")


def test_get_list_and_delete_instances(rest, api):
    cfg = _cfg(labels={"team": "ml"})
    _insert(api, cfg, 0)
    _insert(api, cfg, 1, zone="us-east1-c")
    state = api.get_instance(ZONE, "syncswitch-job-1-n0")
    assert (state.name, state.zone, state.status, state.internal_ip) == \
        ("syncswitch-job-1-n0", ZONE, "RUNNING", "10.138.0.2")
    assert state.labels["syncswitch-job"] == "job-1" and state.created.startswith("2026-")
    assert api.get_instance(ZONE, "nope") is None  # a real NotFound, classified

    listed = api.list_instances(resources.LABEL_JOB, "job-1")
    assert [(i.zone, i.name) for i in listed] == [("us-east1-c", "syncswitch-job-1-n1"),
                                                  (ZONE, "syncswitch-job-1-n0")]
    method, path, query, _ = rest.sent("GET", "/aggregated/instances")[-1]
    assert query["filter"] == "labels.syncswitch-job = job-1"
    api.list_instances(resources.LABEL_JOB)
    assert rest.sent("GET", "/aggregated/instances")[-1][2]["filter"] == "labels.syncswitch-job:*"

    assert api.delete_instance(ZONE, "syncswitch-job-1-n0") is True
    assert rest.requests[-2][:2] == ("DELETE", f"{BASE}/zones/{ZONE}/instances/syncswitch-job-1-n0")
    assert rest.requests[-1][:2] == ("GET", f"{BASE}/zones/{ZONE}/operations/operation-3-delete")
    assert api.delete_instance(ZONE, "syncswitch-job-1-n0") is False  # already gone: 404
    assert api.delete_firewall("syncswitch-job-1-fw") is False


def test_a_rejected_filter_falls_back_to_listing_everything(rest, api):
    _insert(api, _cfg())
    path = f"{BASE}/aggregated/instances"
    rest.http_errors[("GET", path)] = [_error(400, "invalid", "Invalid value for field 'filter'")]
    assert [i.name for i in api.list_instances(resources.LABEL_JOB, "job-1")] == ["syncswitch-job-1-n0"]
    first, second = rest.sent("GET", "/aggregated/instances")
    assert "filter" in first[2] and "filter" not in second[2]


@pytest.mark.parametrize("status, message, code, text, kind", [
    (503, "SERVICE UNAVAILABLE", "ZONE_RESOURCE_POOL_EXHAUSTED",
     "The zone 'projects/test-proj-1/zones/us-west1-b' does not have enough resources available", EXHAUSTED),
    (403, "FORBIDDEN", "QUOTA_EXCEEDED", "Quota 'NVIDIA_T4_GPUS' exceeded.  Limit: 4.0 in region us-west1.", QUOTA),
])
def test_failed_operations_classify_through_the_sdk_exceptions(rest, api, status, message, code, text, kind):
    rest.op_errors.append((status, message, code, text))
    with pytest.raises(GceError) as info:
        _insert(api, _cfg())
    assert info.value.kind == kind and info.value.status == status and info.value.codes[0] == code


def test_quotas(rest, api):
    assert api.region_quotas("us-west1")["NVIDIA_T4_GPUS"] == (4.0, 0.0)
    assert api.project_quotas() == {"GPUS_ALL_REGIONS": (8.0, 1.0)}
    assert [r[:2] for r in rest.requests] == [("GET", f"{BASE}/regions/us-west1"), ("GET", BASE)]


def test_backend_provision_and_teardown_send_only_valid_requests(rest, api, tmp_path):
    backend = GceBackend(api, wait_port=lambda host, port, timeout: True, sleep=lambda s: None, poll_s=0.01)
    opts = GceBackend.validate_options({"project": PROJECT, "spot": False})
    request = ProvisionRequest("job-1", 2, "tok", str(tmp_path), opts)
    cluster = backend.provision(request)
    assert sorted(n.host for n in cluster.nodes) == ["10.138.0.2", "10.138.0.3"]
    assert cluster.shared_filesystem is False
    backend.teardown()
    assert rest.instances == {} and rest.firewalls == {}

    def route(path):
        return re.sub(r"/(operations|instances|firewalls)/[^/]+$", r"/\1/NAME", path[len(BASE):])

    assert {(m, route(p)) for m, p, _, _ in rest.requests} == {
        ("GET", ""), ("GET", "/regions/us-west1"),                          # quota checks
        ("GET", "/aggregated/instances"),                                   # leftovers, then teardown
        ("POST", "/global/firewalls"), ("GET", "/global/operations/NAME"),
        ("POST", f"/zones/{ZONE}/instances"), ("GET", f"/zones/{ZONE}/operations/NAME"),
        ("GET", f"/zones/{ZONE}/instances/NAME"),                           # readiness
        ("DELETE", f"/zones/{ZONE}/instances/NAME"), ("DELETE", "/global/firewalls/NAME")}
    # every insert body the real SDK sent parses back into the message type it was built from
    for method, path, _, body in rest.requests:
        if method == "POST":
            cls = compute_v1.Firewall if path.endswith("/firewalls") else compute_v1.Instance
            cls.from_json(json.dumps(body), ignore_unknown_fields=False)
