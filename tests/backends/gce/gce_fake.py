"""A deterministic in-memory fake of google.cloud.compute_v1 and google.api_core.exceptions for the gce adaptor."""

from __future__ import annotations

import re
import threading
import time
import types
from typing import Callable

from syncswitch.backends.gce.compute import Sdk

TOKEN = "s3cret-job-token"  # the job token every fake request carries

# ------------------------------------------------------------------ google.api_core.exceptions


class GoogleAPIError(Exception):
    pass


class GoogleAPICallError(GoogleAPIError):
    code: int | None = None

    def __init__(self, message: str, errors=(), response=None):
        super().__init__(message)
        self.message, self._errors, self.response = message, list(errors), response

    @property
    def errors(self):
        return list(self._errors)

    def __str__(self):
        return f"{self.code} {self.message}"


def _status(code: int, name: str):
    return type(name, (GoogleAPICallError,), {"code": code})


BadRequest = _status(400, "BadRequest")
Forbidden = _status(403, "Forbidden")
NotFound = _status(404, "NotFound")
Conflict = _status(409, "Conflict")
TooManyRequests = _status(429, "TooManyRequests")
ServiceUnavailable = _status(503, "ServiceUnavailable")
_BY_CODE = {c.code: c for c in (BadRequest, Forbidden, NotFound, Conflict, TooManyRequests, ServiceUnavailable)}


def from_http_status(status_code, message, **kwargs):
    cls = _BY_CODE.get(status_code, _status(status_code, f"Http{status_code}"))
    return cls(message, **kwargs)


exceptions = types.SimpleNamespace(
    GoogleAPIError=GoogleAPIError, GoogleAPICallError=GoogleAPICallError, BadRequest=BadRequest,
    Forbidden=Forbidden, NotFound=NotFound, Conflict=Conflict, TooManyRequests=TooManyRequests,
    ServiceUnavailable=ServiceUnavailable, from_http_status=from_http_status,
)

# ------------------------------------------------------------------ proto-plus-like messages


class Message:
    """Attribute access over a dict, like a proto-plus message; nested dicts and lists wrap lazily."""

    def __init__(self, mapping: dict | None = None, **kwargs):
        object.__setattr__(self, "_data", {**(mapping or {}), **kwargs})

    def __getattr__(self, name: str):
        try:
            return _wrap(self._data[name], name)
        except KeyError:
            raise AttributeError(name) from None

    def to_dict(self) -> dict:
        return _plain(self._data)


MAP_FIELDS = ("labels",)  # proto map fields read back as dicts; other nested dicts are messages


def _wrap(value, name: str = ""):
    if isinstance(value, dict):
        return dict(value) if name in MAP_FIELDS else Message(value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


def _plain(value):
    if isinstance(value, Message):
        return _plain(value._data)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


class Instance(Message):
    pass


class Firewall(Message):
    pass


class AggregatedListInstancesRequest(Message):
    pass


class ListFirewallsRequest(Message):
    pass


# ------------------------------------------------------------------ extended operations


class Operation:
    """Like google.api_core.extended_operation.ExtendedOperation once the operation is DONE."""

    _count = 0

    def __init__(self, kind: str, target: str, http_code: int = 0, http_message: str = "",
                 errors: tuple[tuple[str, str], ...] = ()):
        Operation._count += 1
        self.name = f"operation-{Operation._count}-{kind}"
        self.status, self.target_link = "DONE", target
        self.error_code, self.error_message = http_code, http_message
        self.error = types.SimpleNamespace(errors=[types.SimpleNamespace(code=c, message=m) for c, m in errors])

    def done(self, retry=None) -> bool:
        return True

    def exception(self, timeout=None):
        if self.error_code and self.error_message:
            return from_http_status(self.error_code, self.error_message, errors=self.error.errors, response=self)
        return None

    def result(self, timeout=None):
        exc = self.exception()
        if exc is not None:
            raise exc
        return None


def exhausted_op(project: str, zone: str, name: str) -> Operation:
    return Operation("insert", f"projects/{project}/zones/{zone}/instances/{name}", 503, "SERVICE UNAVAILABLE",
                     (("ZONE_RESOURCE_POOL_EXHAUSTED",
                       f"The zone 'projects/{project}/zones/{zone}' does not have enough resources available to "
                       f"fulfill the request.  Try a different zone, or try again later."),))


def quota_op(project: str, zone: str, name: str, metric: str = "NVIDIA_T4_GPUS", limit: float = 4.0) -> Operation:
    region = zone.rsplit("-", 1)[0]
    return Operation("insert", f"projects/{project}/zones/{zone}/instances/{name}", 403, "FORBIDDEN",
                     (("QUOTA_EXCEEDED", f"Quota '{metric}' exceeded.  Limit: {limit} in region {region}."),))


# ------------------------------------------------------------------ the cloud


class FakeCloud:
    """One project's instances, firewalls and quotas, with scripted failures and a call log."""

    def __init__(self, project: str = "test-proj"):
        self.project = project
        self.instances: dict[tuple[str, str], dict] = {}
        self.firewalls: dict[str, dict] = {}
        self.calls: list[tuple[str, dict]] = []
        self.region_quotas: dict[str, dict[str, tuple[float, float]]] = {}
        self.default_region_quota = {"NVIDIA_T4_GPUS": (16.0, 0.0), "CPUS": (200.0, 0.0),
                                     "PREEMPTIBLE_NVIDIA_T4_GPUS": (0.0, 0.0), "NVIDIA_V100_GPUS": (8.0, 0.0)}
        self.project_quota = {"GPUS_ALL_REGIONS": (32.0, 0.0)}
        self.zone_capacity: dict[str, int] = {}     # zone -> instances it can still host (exhaustion after)
        self.quota_zones: set[str] = set()           # inserts there fail with QUOTA_EXCEEDED
        self.failures: dict[str, list[BaseException]] = {}  # "instances.insert" -> errors, raised in order
        self.op_failures: dict[str, list[Operation]] = {}   # method -> failed operations, returned in order
        self.hooks: list[Callable[[str, dict], None]] = []  # called before every call
        self.insert_delay = 0.0
        self.active = 0
        self.max_active = 0
        self._ip = 1
        self._lock = threading.RLock()

    # -- helpers for tests ---------------------------------------------------------------------

    def sdk(self) -> Sdk:
        return Sdk(compute_v1=self._module(), exceptions=exceptions, default_project=lambda: self.project)

    def methods(self, prefix: str = "") -> list[str]:
        return [m for m, _ in self.calls if m.startswith(prefix)]

    def bodies(self, method: str) -> list[dict]:
        return [kw["body"] for m, kw in self.calls if m == method and "body" in kw]

    def fail_next(self, method: str, *errors: BaseException) -> None:
        self.failures.setdefault(method, []).extend(errors)

    def set_status(self, name: str, status: str) -> None:
        for (zone, inst_name), inst in self.instances.items():
            if inst_name == name:
                inst["status"] = status

    def instance_names(self) -> list[str]:
        return sorted(name for _, name in self.instances)

    # -- plumbing ------------------------------------------------------------------------------

    def _enter(self, method: str, **kwargs) -> None:
        with self._lock:
            self.calls.append((method, kwargs))
        for hook in list(self.hooks):
            hook(method, kwargs)
        with self._lock:
            queue = self.failures.get(method)
            if queue:
                raise queue.pop(0)

    def _failed_op(self, method: str) -> Operation | None:
        with self._lock:
            queue = self.op_failures.get(method)
            return queue.pop(0) if queue else None

    def _instance_message(self, zone: str, inst: dict) -> Instance:
        url = f"https://www.googleapis.com/compute/v1/projects/{self.project}/zones/{zone}"
        return Instance({**inst["body"], "zone": url,
                         "status": inst["status"], "creation_timestamp": "2026-01-01T00:00:00.000-08:00",
                         "network_interfaces": [{**inst["body"]["network_interfaces"][0], "network_i_p": inst["ip"]}]})

    def _module(self):
        cloud = self

        class InstancesClient:
            def insert(self, project, zone, instance_resource):
                body = instance_resource.to_dict()
                cloud._enter("instances.insert", project=project, zone=zone, body=body)
                with cloud._lock:
                    cloud.active += 1
                    cloud.max_active = max(cloud.max_active, cloud.active)
                try:
                    if cloud.insert_delay:
                        time.sleep(cloud.insert_delay)
                    failed = cloud._failed_op("instances.insert")
                    if failed is not None:
                        return failed
                    with cloud._lock:
                        if (zone, body["name"]) in cloud.instances:
                            raise Conflict(f"The resource 'projects/{project}/zones/{zone}/instances/"
                                           f"{body['name']}' already exists",
                                           errors=[{"reason": "alreadyExists", "message": "exists"}])
                        if zone in cloud.quota_zones:
                            return quota_op(project, zone, body["name"])
                        if cloud.zone_capacity.get(zone, 1) <= 0:
                            return exhausted_op(project, zone, body["name"])
                        if zone in cloud.zone_capacity:
                            cloud.zone_capacity[zone] -= 1
                        cloud.instances[(zone, body["name"])] = {"body": body, "status": "RUNNING",
                                                                 "ip": f"10.138.0.{cloud._ip}"}
                        cloud._ip += 1
                    return Operation("insert", body["name"])
                finally:
                    with cloud._lock:
                        cloud.active -= 1

            def get(self, project, zone, instance):
                cloud._enter("instances.get", project=project, zone=zone, name=instance)
                with cloud._lock:
                    inst = cloud.instances.get((zone, instance))
                    if inst is None:
                        raise NotFound(f"The resource 'projects/{project}/zones/{zone}/instances/{instance}' "
                                       f"was not found", errors=[{"reason": "notFound", "message": "not found"}])
                    return cloud._instance_message(zone, inst)

            def delete(self, project, zone, instance):
                cloud._enter("instances.delete", project=project, zone=zone, name=instance)
                failed = cloud._failed_op("instances.delete")
                if failed is not None:
                    return failed
                with cloud._lock:
                    if cloud.instances.pop((zone, instance), None) is None:
                        raise NotFound(f"The resource 'projects/{project}/zones/{zone}/instances/{instance}' "
                                       f"was not found", errors=[{"reason": "notFound", "message": "not found"}])
                return Operation("delete", instance)

            def aggregated_list(self, request):
                expr = getattr(request, "filter", "")
                cloud._enter("instances.aggregated_list", project=request.project, filter=expr)
                m = re.fullmatch(r"labels\.([\w-]+)(?::\*| = ([a-z0-9_-]+))", expr)
                if expr and not m:
                    raise BadRequest(f"Invalid value for field 'filter': '{expr}'. Invalid list filter expression.",
                                     errors=[{"reason": "invalid", "message": "bad filter"}])
                key, value = (m.group(1), m.group(2)) if m else (None, None)
                with cloud._lock:
                    zones = sorted({z for z, _ in cloud.instances} | {"us-central1-a"})
                    pages = []
                    for zone in zones:
                        hits = [cloud._instance_message(zone, inst) for (z, _), inst in sorted(cloud.instances.items())
                                if z == zone and (key is None or key in inst["body"].get("labels", {}))
                                and (value is None or inst["body"]["labels"][key] == value)]
                        # Like the real API, zones without matches come back too, with no instances.
                        pages.append((f"zones/{zone}", Message({"instances": hits} if hits else {})))
                return iter(pages)

        class FirewallsClient:
            def insert(self, project, firewall_resource):
                body = firewall_resource.to_dict()
                cloud._enter("firewalls.insert", project=project, body=body)
                with cloud._lock:
                    if body["name"] in cloud.firewalls:
                        raise Conflict(f"The resource 'projects/{project}/global/firewalls/{body['name']}' "
                                       f"already exists", errors=[{"reason": "alreadyExists", "message": "exists"}])
                    cloud.firewalls[body["name"]] = body
                return Operation("insert", body["name"])

            def delete(self, project, firewall):
                cloud._enter("firewalls.delete", project=project, name=firewall)
                with cloud._lock:
                    if cloud.firewalls.pop(firewall, None) is None:
                        raise NotFound(f"The resource 'projects/{project}/global/firewalls/{firewall}' was not "
                                       f"found", errors=[{"reason": "notFound", "message": "not found"}])
                return Operation("delete", firewall)

            def list(self, request):
                cloud._enter("firewalls.list", project=request.project)
                with cloud._lock:
                    return [Firewall({**b, "creation_timestamp": "2026-01-01T00:00:00.000-08:00"})
                            for _, b in sorted(cloud.firewalls.items())]

        class RegionsClient:
            def get(self, project, region):
                cloud._enter("regions.get", project=project, region=region)
                quotas = cloud.region_quotas.get(region, cloud.default_region_quota)
                return Message({"name": region, "quotas": [{"metric": m, "limit": lim, "usage": use}
                                                           for m, (lim, use) in quotas.items()]})

        class ProjectsClient:
            def get(self, project):
                cloud._enter("projects.get", project=project)
                return Message({"name": project, "quotas": [{"metric": m, "limit": lim, "usage": use}
                                                            for m, (lim, use) in cloud.project_quota.items()]})

        return types.SimpleNamespace(
            InstancesClient=InstancesClient, FirewallsClient=FirewallsClient, RegionsClient=RegionsClient,
            ProjectsClient=ProjectsClient, Instance=Instance, Firewall=Firewall,
            AggregatedListInstancesRequest=AggregatedListInstancesRequest, ListFirewallsRequest=ListFirewallsRequest,
        )
