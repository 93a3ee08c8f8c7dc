"""The `gce` backend: quota check, firewall, parallel VM creation with zone failover, readiness, teardown."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import logging
import signal
import threading
import time
from typing import Any, Callable

import syncswitch
from syncswitch.registry import BACKENDS
from syncswitch.backends.base import Backend, ClusterInfo, NodeInfo, ProvisionRequest
from syncswitch.backends.gce import cleanup, options, pricing, quota, resources
from syncswitch.backends.gce import journal as journals
from syncswitch.backends.gce.compute import EXHAUSTED, QUOTA, ComputeClient, GceError, env_project
from syncswitch.backends.gce.net import wait_for_port
from syncswitch.errors import ClusterError

log = logging.getLogger(__name__)

_GONE = ("STOPPING", "STOPPED", "SUSPENDING", "SUSPENDED", "TERMINATED")


class ZoneUnavailable(Exception):
    """The zone has no capacity or no quota for the request; another zone may."""


@contextlib.contextmanager
def _sigterm_as_interrupt():
    # A plain `kill` would skip every finally block and leak VMs; turn it into KeyboardInterrupt,
    # unless someone (the manager) already handles SIGTERM, or we are not on the main thread.
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@BACKENDS.register("gce")
class GceBackend(Backend):
    """Google Compute Engine VMs with GPUs, one syncswitch agent each; see docs/gce.md."""

    option_validators = options.VALIDATORS

    def __init__(self, api: ComputeClient | None = None, *, on_event: Callable[[str], None] | None = None,
                 wait_port: Callable[[str, int, float], bool] = wait_for_port,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
                 poll_s: float = 10.0):
        super().__init__(on_event=on_event)
        self._api = api
        self._wait_port, self._sleep, self._clock, self._poll_s = wait_port, sleep, clock, poll_s
        self._journal: journals.Journal | None = None
        self._job_id: str | None = None
        self._cfg: options.GceConfig | None = None
        self._torn_down = False
        self._request: ProvisionRequest | None = None
        self.nodes: tuple[NodeInfo, ...] = ()

    @classmethod
    def validate_options(cls, opts: dict[str, Any]) -> dict[str, Any]:
        out = super().validate_options(opts)
        options.check_combination(out)
        return out

    def _client(self, cfg: options.GceConfig) -> ComputeClient:
        if self._api is None:
            self._api = ComputeClient(cfg.project)
        return self._api

    # -- provision -----------------------------------------------------------------------------

    def provision(self, request: ProvisionRequest) -> ClusterInfo:
        cfg = options.resolve(self.validate_options(request.options))
        api = self._client(cfg)
        self._cfg, self._job_id, self._torn_down, self._request = cfg, request.job_id, False, request
        self._journal, previous = journals.Journal.open(journals.path_in(request.run_dir), request.job_id,
                                                        api.project)
        started = self._clock()
        with _sigterm_as_interrupt():
            try:
                self._delete_leftovers(api, request, previous)
                zones = quota.check(api, cfg, request.num_nodes, self._event)
                self._create_firewall(api, cfg, request.job_id)
                created = self._create_in_some_zone(api, cfg, request, zones)
                nodes = self._wait_ready(api, cfg, created)
            except BaseException as exc:
                self._event(f"provisioning failed ({type(exc).__name__}): deleting what was created")
                try:
                    self.teardown()
                except Exception as cleanup_exc:  # noqa: BLE001 - report, but keep the original error on top
                    log.error("gce: %s", cleanup_exc)
                    if isinstance(exc, ClusterError):
                        raise ClusterError(f"{exc}; and cleanup failed: {cleanup_exc}") from exc
                raise
        self.nodes = nodes
        self._event(f"{len(nodes)} node(s) ready in {self._clock() - started:.0f}s")
        return ClusterInfo(request.job_id, nodes, shared_filesystem=False)  # checkpoints are copied over gRPC

    def _delete_leftovers(self, api: ComputeClient, request: ProvisionRequest,
                          previous: journals.Journal | None) -> None:
        """Delete what earlier, crashed runs left: this job's, this run folder's, dead siblings'."""
        dead, unsure = journals.orphans_near(request.run_dir)
        earlier = [j for j in [previous, *dead] if j is not None]
        plans = [(request.job_id, self._journal)] + [(j.job_id, j) for j in earlier if j.project == api.project]
        for job_id, ledger in plans:
            items = cleanup.job_resources(api, job_id, [ledger], self._event)
            report = cleanup.delete_resources(api, items, ledgers=[ledger], sleep=self._sleep)
            # The firewall name is always probed; only an actual deletion counts as a leftover.
            if report.deleted:
                self._event(f"deleted {len(report.deleted)} leftover resource(s) of job {job_id} from an "
                            f"earlier run whose manager is gone: {', '.join(report.deleted)}")
            if report.failed and ledger is self._journal:
                # Same names as the nodes about to be created: going on would collide.
                raise ClusterError(f"could not delete leftovers of job {job_id}: {'; '.join(report.failed)}")
            if report.failed:
                self._event(f"could not delete leftovers of job {job_id} ({'; '.join(report.failed)}); "
                            f"retry with `syncswitch cluster down --job {job_id} --project {api.project}`")
        for ledger in [j for j in earlier if j.project != api.project] + unsure:
            self._event(f"{ledger.path} lists {len(ledger.live())} live resource(s) of job {ledger.job_id} in "
                        f"project {ledger.project}; if that job no longer runs, delete them with `syncswitch "
                        f"cluster down --job {ledger.job_id} --project {ledger.project}`")

    def _create_firewall(self, api: ComputeClient, cfg: options.GceConfig, job_id: str) -> None:
        body = resources.firewall_body(cfg, project=api.project, job_id=job_id)
        self._journal.record(cleanup.FIREWALL, body["name"], journals.CREATING)
        try:
            api.insert_firewall(body)
        except GceError as exc:
            if exc.kind != "exists":
                self._journal.record(cleanup.FIREWALL, body["name"], journals.FAILED, error=str(exc))
                raise ClusterError(f"creating firewall rule {body['name']}: {exc}") from None
            # Same deterministic name, so the rule belongs to this job: adopt it.
        self._journal.record(cleanup.FIREWALL, body["name"], journals.CREATED)

    def _create_in_some_zone(self, api, cfg, request, zones) -> list[tuple[int, str, str]]:
        failures = []
        for i, zone in enumerate(zones):
            try:
                return self._create_all(api, cfg, request, zone)
            except ZoneUnavailable as exc:
                failures.append(f"{zone}: {exc}")
                partial = [(e["kind"], e["zone"], e["name"]) for e in self._journal.live(cleanup.INSTANCE)
                           if e["zone"] == zone]
                following = f"trying {zones[i + 1]}" if i + 1 < len(zones) else "no zone left to try"
                self._event(f"zone {zone} cannot host the job ({exc}); deleting {len(partial)} partial "
                            f"node(s) there, {following}")
                report = cleanup.delete_resources(api, partial, ledgers=[self._journal], sleep=self._sleep)
                if report.failed:
                    raise ClusterError(f"could not delete partial nodes in {zone}: {'; '.join(report.failed)}")
        raise ClusterError(f"no zone could host {request.num_nodes} node(s): {' | '.join(failures)}; "
                           f"add zones to cluster.zones or try again later")

    def _create_all(self, api, cfg, request, zone) -> list[tuple[int, str, str]]:
        script = resources.startup_script(cfg, job_id=request.job_id, version=syncswitch.__version__,
                                          spare_task=request.spare_task)
        stop = threading.Event()

        def create(index: int) -> str | None:
            if stop.is_set():  # a sibling failed: creating more in this zone is wasted money
                return None
            body = resources.instance_body(cfg, project=api.project, zone=zone, job_id=request.job_id,
                                           index=index, token=request.token, startup_script=script)
            name = body["name"]
            self._journal.record(cleanup.INSTANCE, name, journals.CREATING, zone=zone, index=index)
            try:
                api.insert_instance(zone, body)
            except GceError as exc:
                stop.set()
                self._journal.record(cleanup.INSTANCE, name, journals.FAILED, zone=zone, error=str(exc))
                raise
            self._journal.record(cleanup.INSTANCE, name, journals.CREATED, zone=zone)
            return name

        self._event(f"creating {request.num_nodes} node(s) of {cfg.machine_type} in {zone}")
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=min(request.num_nodes, cfg.parallelism))
        try:
            futures = [pool.submit(create, i) for i in range(request.num_nodes)]
            concurrent.futures.wait(futures)
        finally:
            stop.set()
            pool.shutdown(wait=True, cancel_futures=True)  # every insert is journaled before teardown runs
        errors = [f.exception() for f in futures if not f.cancelled() and f.exception() is not None]
        if errors:
            first = next((e for e in errors if getattr(e, "kind", None) in (EXHAUSTED, QUOTA)), None)
            if first is not None:
                raise ZoneUnavailable(str(first))
            raise ClusterError(f"creating nodes in {zone}: {errors[0]}")
        return [(i, f.result(), zone) for i, f in enumerate(futures)]

    # -- readiness -----------------------------------------------------------------------------

    def _wait_ready(self, api, cfg, created: list[tuple[int, str, str]]) -> tuple[NodeInfo, ...]:
        self._event(f"waiting for {len(created)} agent(s) on port {cfg.agent_port} (boot, driver, pip install)")
        stop = threading.Event()
        ready_count = [0]
        lock = threading.Lock()

        def wait_one(index: int, name: str, zone: str) -> NodeInfo:
            deadline = self._clock() + cfg.boot_timeout_s
            ip = ""
            while not stop.is_set():
                state = api.get_instance(zone, name)
                if state is None or state.status in _GONE:
                    why = state.status if state else "deleted"
                    hint = " (spot capacity reclaimed?)" if cfg.spot else ""
                    raise ClusterError(f"node {index} ({name}) is {why} before its agent answered{hint}")
                ip = state.internal_ip or ip
                remaining = deadline - self._clock()
                if ip and self._wait_port(ip, cfg.agent_port, max(min(self._poll_s, remaining), 0.0)):
                    with lock:
                        ready_count[0] += 1
                        self._event(f"node {index} ready at {ip} ({ready_count[0]}/{len(created)})")
                    return NodeInfo(index=index, host=ip, agent_address=f"{ip}:{cfg.agent_port}",
                                    ps_port=cfg.ps_port, worker_port=cfg.worker_port,
                                    resource_id=f"{zone}/{name}")
                if self._clock() >= deadline:
                    raise ClusterError(
                        f"node {index} ({name}, {ip or 'no IP yet'}) did not open agent port {cfg.agent_port} "
                        f"within {cfg.boot_timeout_s}s; boot log: gcloud compute instances get-serial-port-output "
                        f"{name} --zone {zone} --project {api.project}. The manager must run inside VPC "
                        f"{cfg.network} (agents listen on internal IPs only)")
                if not ip:
                    self._sleep(min(self._poll_s, max(remaining, 0.0)))
            raise ClusterError(f"node {index} ({name}): readiness wait cancelled")

        pool = concurrent.futures.ThreadPoolExecutor(max_workers=min(len(created), cfg.parallelism))
        try:
            futures = [pool.submit(wait_one, *c) for c in created]
            done, _ = concurrent.futures.wait(futures, return_when=concurrent.futures.FIRST_EXCEPTION)
            failed = [f for f in done if f.exception() is not None]
            if failed:
                raise failed[0].exception()
            return tuple(sorted((f.result() for f in futures), key=lambda n: n.index))
        finally:
            stop.set()
            pool.shutdown(wait=True, cancel_futures=True)

    # -- lost nodes ----------------------------------------------------------------------------

    def lost_reason(self, index: int) -> str | None:
        """Why node `index`'s agent went away, as the instance's status tells: a spot preemption shows as
        the instance stopping, terminated or deleted (instance_termination_action DELETE)."""
        zone, name = self.nodes[index].resource_id.split("/")
        state = self._api.get_instance(zone, name)
        if state is not None and state.status not in _GONE:
            return None  # the VM runs: the agent itself died
        status = state.status if state else "deleted"
        return f"spot instance {name} preempted ({status})" if self._cfg.spot else f"instance {name} {status}"

    def replace_node(self, index: int) -> NodeInfo:
        """Delete what is left of node `index`'s instance, create it again (same name and zone), wait for its agent."""
        api, cfg, request = self._api, self._cfg, self._request
        zone, name = self.nodes[index].resource_id.split("/")
        report = cleanup.delete_resources(api, [(cleanup.INSTANCE, zone, name)], ledgers=[self._journal],
                                          sleep=self._sleep)
        if report.failed:
            raise ClusterError(f"node {index}: could not delete the lost instance {name}: {'; '.join(report.failed)}")
        self._event(f"node {index}: recreating {name} in {zone}{' (spot)' if cfg.spot else ''}")
        script = resources.startup_script(cfg, job_id=request.job_id, version=syncswitch.__version__,
                                          spare_task=request.spare_task)
        body = resources.instance_body(cfg, project=api.project, zone=zone, job_id=request.job_id, index=index,
                                       token=request.token, startup_script=script)
        self._journal.record(cleanup.INSTANCE, name, journals.CREATING, zone=zone, index=index)
        try:
            api.insert_instance(zone, body)
        except GceError as exc:
            self._journal.record(cleanup.INSTANCE, name, journals.FAILED, zone=zone, error=str(exc))
            raise ClusterError(f"node {index}: recreating {name}: {exc}") from None
        self._journal.record(cleanup.INSTANCE, name, journals.CREATED, zone=zone)
        (node,) = self._wait_ready(api, cfg, [(index, name, zone)])
        self.nodes = tuple(node if n.index == index else n for n in self.nodes)
        return node

    # -- teardown and the rest -----------------------------------------------------------------

    def teardown(self) -> None:
        """Delete every instance and the firewall rule of the job; safe to repeat."""
        if self._journal is None or (self._torn_down and not self._journal.live()):
            return
        api = self._api
        self._event(f"deleting the resources of job {self._job_id}")
        report = cleanup.delete_job(api, self._job_id, [self._journal], event=self._event,
                                    parallelism=self._cfg.parallelism if self._cfg else 16, sleep=self._sleep)
        self._torn_down = True
        self.nodes = ()
        if report.deleted:
            self._event(f"deleted {len(report.deleted)} resource(s): {', '.join(report.deleted)}")
        if report.failed:
            raise ClusterError(f"could not delete {len(report.failed)} resource(s) of job {self._job_id}: "
                               f"{'; '.join(report.failed)}; they are listed in {self._journal.path}; retry with "
                               f"`syncswitch cluster down --job {self._job_id} --run-dir <run folder>`")

    def dry_run(self, request: ProvisionRequest) -> str:
        """The exact insert requests, with the token and startup script shown once as placeholders."""
        cfg = options.resolve(self.validate_options(request.options))
        project = cfg.project or env_project() or "<project: set cluster.project or GOOGLE_CLOUD_PROJECT>"
        script = resources.startup_script(cfg, job_id=request.job_id, version=syncswitch.__version__,
                                          spare_task=request.spare_task)
        zone = cfg.zones[0]
        gpu = f" + {cfg.accelerator['count']}x {cfg.accelerator['type']}" if cfg.accelerator else ""
        total = 1 + request.num_nodes
        out = [
            f"gce dry run for job {request.job_id}: {request.num_nodes} node(s) of {cfg.machine_type}{gpu}"
            f"{' (spot)' if cfg.spot else ''} in {zone}"
            + (f", failover zones {', '.join(cfg.zones[1:])}" if len(cfg.zones) > 1 else "")
            + ". Nothing is created and no credentials are used.",
            f"Before these requests: a quota check in {', '.join(dict.fromkeys(map(options.region_of, cfg.zones)))}"
            f" and deletion of leftovers labelled {resources.LABEL_JOB}={resources.slug(request.job_id)}.",
            "",
            f"[1/{total}] compute_v1.FirewallsClient().insert(project={project!r}, firewall_resource=Firewall(...))",
            json.dumps(resources.firewall_body(cfg, project=project, job_id=request.job_id), indent=2),
        ]
        first = None
        for i in range(request.num_nodes):
            body = resources.instance_body(cfg, project=project, zone=zone, job_id=request.job_id, index=i,
                                           token="<job token: generated at submit, never printed>",
                                           startup_script="<the startup script printed below>")
            call = (f"[{i + 2}/{total}] compute_v1.InstancesClient().insert(project={project!r}, "
                    f"zone={zone!r}, instance_resource=Instance(...))")
            if first is None:
                first = body
                out += ["", call, json.dumps(body, indent=2)]
            else:
                # Bodies differ in a few fields only; listing them keeps the output exact and short.
                changes = ", ".join(f"{path}={value!r}" for path, value in _differences(first, body))
                out += ["", f"{call}\n  same body as [2/{total}] except {changes}"]
        out += ["", "startup-script (metadata of every node):", script.rstrip(), "",
                pricing.hourly_cost_line(cfg, request.num_nodes)]
        return "\n".join(out)


def _differences(a: Any, b: Any, path: str = "") -> list[tuple[str, Any]]:
    """Leaf paths where `b` differs from `a` (same shape assumed, as for two nodes' bodies)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in b:
            out += _differences(a.get(key), b[key], f"{path}.{key}" if path else key)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [(path, b)]
