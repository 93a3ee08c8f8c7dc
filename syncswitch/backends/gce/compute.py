"""The one adaptor to google-cloud-compute: lazy SDK import, plain-dict requests, classified errors."""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import os
import threading
from typing import Any, Iterator

from syncswitch.errors import ClusterError

INSTALL_HINT = "the gce backend needs google-cloud-compute: pip install -e .[gce]"

# Error kinds the backend acts on; everything else is reported as is.
EXHAUSTED, QUOTA, NOT_FOUND, EXISTS, OTHER = "exhausted", "quota", "not_found", "exists", "other"

_EXHAUSTED_CODES = {"ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
                    "RESOURCE_POOL_EXHAUSTED", "STOCKOUT"}
_QUOTA_CODES = {"QUOTA_EXCEEDED", "quotaExceeded"}
_NOT_FOUND_CODES = {"RESOURCE_NOT_FOUND", "notFound"}
_EXISTS_CODES = {"RESOURCE_ALREADY_EXISTS", "alreadyExists"}


@dataclasses.dataclass(frozen=True)
class Sdk:
    """The pieces of the Google SDK the adaptor uses; tests pass a fake with the same shape."""

    compute_v1: Any          # google.cloud.compute_v1
    exceptions: Any          # google.api_core.exceptions
    default_project: Any     # () -> str | None, from application-default credentials


class GceError(ClusterError):
    """A Compute Engine call failed; `kind` says whether failover or cleanup can shrug it off."""

    def __init__(self, message: str, *, kind: str = OTHER, status: int | None = None,
                 codes: tuple[str, ...] = ()):
        super().__init__(message)
        self.kind, self.status, self.codes = kind, status, codes


@dataclasses.dataclass(frozen=True)
class InstanceState:
    """What the backend needs to know about a live instance."""

    name: str
    zone: str
    status: str
    internal_ip: str
    labels: dict
    created: str = ""


@dataclasses.dataclass(frozen=True)
class FirewallState:
    name: str
    network: str
    description: str
    created: str = ""


_override: Sdk | None = None
_override_lock = threading.Lock()


@contextlib.contextmanager
def sdk_override(sdk: Sdk) -> Iterator[Sdk]:
    """Route every ComputeClient made inside the block to `sdk` (the tests' fake)."""
    global _override
    with _override_lock:
        previous, _override = _override, sdk
    try:
        yield sdk
    finally:
        with _override_lock:
            _override = previous


def load_sdk() -> Sdk:
    """The real SDK, imported only now so the rest of syncswitch never needs it."""
    if _override is not None:
        return _override
    try:
        from google.api_core import exceptions
        from google.cloud import compute_v1
    except ImportError as exc:
        raise ClusterError(f"{INSTALL_HINT} ({exc})") from None

    def default_project() -> str | None:
        import google.auth

        try:
            return google.auth.default()[1]
        except Exception:  # noqa: BLE001 - no credentials: the caller asks for cluster.project instead
            return None

    return Sdk(compute_v1, exceptions, default_project)


def env_project() -> str | None:
    """The project gcloud and the client libraries would pick from the environment."""
    for var in ("GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT", "GCLOUD_PROJECT"):
        if os.environ.get(var):
            return os.environ[var]
    return None


def classify(exc: BaseException) -> GceError:
    """Map an SDK exception (HTTP error or failed operation) to a GceError with a kind."""
    status = getattr(exc, "code", None)
    status = status if isinstance(status, int) else None
    codes: list[str] = []
    for err in getattr(exc, "errors", None) or ():
        # Operation errors are messages with .code; HTTP errors are dicts with "reason".
        code = err.get("reason") if isinstance(err, dict) else getattr(err, "code", None)
        if code:
            codes.append(str(code))
    if getattr(exc, "reason", None):
        codes.append(str(exc.reason))
    message = str(getattr(exc, "message", None) or exc)
    text = " ".join(codes) + " " + message
    if any(c in _EXHAUSTED_CODES for c in codes) or "does not have enough resources" in text:
        kind = EXHAUSTED
    elif any(c in _QUOTA_CODES for c in codes) or "Quota '" in message or "quota exceeded" in text.lower():
        kind = QUOTA
    elif status == 404 or any(c in _NOT_FOUND_CODES for c in codes):
        kind = NOT_FOUND
    elif status == 409 or any(c in _EXISTS_CODES for c in codes):
        kind = EXISTS
    else:
        kind = OTHER
    label = codes[0] if codes else (f"HTTP {status}" if status else type(exc).__name__)
    return GceError(f"{label}: {message}", kind=kind, status=status, codes=tuple(codes))


def _last(url: str) -> str:
    return url.rsplit("/", 1)[-1] if url else ""


class ComputeClient:
    """Instances, firewalls and quotas of one project; requests and answers are plain dicts.

    Every mutating call waits for its operation, so callers run them on threads for parallelism.
    """

    def __init__(self, project: str | None = None, *, sdk: Sdk | None = None, op_timeout: float = 600.0):
        self.sdk = sdk or load_sdk()
        self.project = project or env_project() or self.sdk.default_project()
        if not self.project:
            raise ClusterError("no GCP project: set cluster.project, pass --project, or export GOOGLE_CLOUD_PROJECT")
        self.op_timeout = op_timeout
        self._local = threading.local()

    def _client(self, name: str):
        # One client per thread and kind: the REST transport's HTTP session is not meant to be shared
        # by the threads that create and delete nodes in parallel.
        clients = self._local.__dict__.setdefault("clients", {})
        if name not in clients:
            try:
                clients[name] = getattr(self.sdk.compute_v1, name)()
            except Exception as exc:
                if type(exc).__name__ == "DefaultCredentialsError":
                    raise ClusterError("no Google Cloud credentials: run `gcloud auth application-default "
                                       "login` or set GOOGLE_APPLICATION_CREDENTIALS") from None
                raise
        return clients[name]

    def _call(self, fn, *args, wait: bool = True, **kwargs):
        # GoogleAPIError also covers RetryError, which polling raises when its deadline passes.
        api_error = getattr(self.sdk.exceptions, "GoogleAPIError", self.sdk.exceptions.GoogleAPICallError)
        try:
            result = fn(*args, **kwargs)
            if wait:
                result.result(timeout=self.op_timeout)
            return result
        except api_error as exc:
            raise classify(exc) from None
        except (TimeoutError, concurrent.futures.TimeoutError) as exc:
            # The operation may still finish: callers journal the resource before calling.
            raise GceError(f"operation timed out after {self.op_timeout:.0f}s ({exc})") from None

    # -- instances -----------------------------------------------------------------------------

    def insert_instance(self, zone: str, body: dict) -> None:
        message = self.sdk.compute_v1.Instance(body)
        self._call(self._client("InstancesClient").insert, project=self.project, zone=zone,
                   instance_resource=message)

    def delete_instance(self, zone: str, name: str) -> bool:
        """Delete and wait; False when it was already gone."""
        try:
            self._call(self._client("InstancesClient").delete, project=self.project, zone=zone, instance=name)
            return True
        except GceError as exc:
            if exc.kind == NOT_FOUND:
                return False
            raise

    def get_instance(self, zone: str, name: str) -> InstanceState | None:
        try:
            inst = self._call(self._client("InstancesClient").get, project=self.project, zone=zone,
                              instance=name, wait=False)
        except GceError as exc:
            if exc.kind == NOT_FOUND:
                return None
            raise
        return self._instance_state(inst, zone)

    def list_instances(self, label: str, value: str | None = None) -> list[InstanceState]:
        """Instances in every zone carrying `label` (with `value`, when given)."""
        expr = f"labels.{label}:*" if value is None else f"labels.{label} = {value}"
        request = self.sdk.compute_v1.AggregatedListInstancesRequest(project=self.project, filter=expr)
        try:
            pages = self._call(self._client("InstancesClient").aggregated_list, request=request, wait=False)
        except GceError as exc:
            if exc.status != 400:
                raise
            # A filter the API rejects must not hide leftovers: list everything, filter below.
            request = self.sdk.compute_v1.AggregatedListInstancesRequest(project=self.project)
            pages = self._call(self._client("InstancesClient").aggregated_list, request=request, wait=False)
        out = []
        for scope, scoped in pages:
            for inst in getattr(scoped, "instances", None) or ():
                state = self._instance_state(inst, _last(scope))
                # Filter again here: the server-side filter grammar is loose and a miss deletes too much.
                if label in state.labels and (value is None or state.labels[label] == value):
                    out.append(state)
        return sorted(out, key=lambda i: (i.zone, i.name))

    @staticmethod
    def _instance_state(inst, zone: str) -> InstanceState:
        nics = list(getattr(inst, "network_interfaces", None) or ())
        ip = getattr(nics[0], "network_i_p", "") if nics else ""
        return InstanceState(name=inst.name, zone=_last(getattr(inst, "zone", "")) or zone,
                             status=str(getattr(inst, "status", "")), internal_ip=ip or "",
                             labels=dict(getattr(inst, "labels", None) or {}),
                             created=str(getattr(inst, "creation_timestamp", "") or ""))

    # -- firewalls -----------------------------------------------------------------------------

    def insert_firewall(self, body: dict) -> None:
        message = self.sdk.compute_v1.Firewall(body)
        self._call(self._client("FirewallsClient").insert, project=self.project, firewall_resource=message)

    def delete_firewall(self, name: str) -> bool:
        try:
            self._call(self._client("FirewallsClient").delete, project=self.project, firewall=name)
            return True
        except GceError as exc:
            if exc.kind == NOT_FOUND:
                return False
            raise

    def list_firewalls(self, name_prefix: str) -> list[FirewallState]:
        # Firewall rules carry no labels; syncswitch's are found by name, filtered here because
        # projects hold few rules and the list filter's regex grammar differs between API versions.
        request = self.sdk.compute_v1.ListFirewallsRequest(project=self.project)
        rules = self._call(self._client("FirewallsClient").list, request=request, wait=False)
        return [FirewallState(r.name, _last(getattr(r, "network", "")), str(getattr(r, "description", "")),
                              str(getattr(r, "creation_timestamp", "") or ""))
                for r in rules if r.name.startswith(name_prefix)]

    # -- quotas --------------------------------------------------------------------------------

    def region_quotas(self, region: str) -> dict[str, tuple[float, float]]:
        """metric -> (limit, usage) for one region."""
        region_msg = self._call(self._client("RegionsClient").get, project=self.project, region=region, wait=False)
        return {q.metric: (float(q.limit), float(q.usage)) for q in region_msg.quotas}

    def project_quotas(self) -> dict[str, tuple[float, float]]:
        project_msg = self._call(self._client("ProjectsClient").get, project=self.project, wait=False)
        return {q.metric: (float(q.limit), float(q.usage)) for q in project_msg.quotas}
