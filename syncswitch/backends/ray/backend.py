"""The `ray` backend: one node per placement-group bundle on a Ray cluster, each an agent a Ray actor owns."""

from __future__ import annotations

import logging
import math
import os
import socket
import time
from typing import Any

from syncswitch.backends.base import (
    Backend,
    BackendCapabilities,
    ClusterInfo,
    NodeInfo,
    ProvisionRequest,
)
from syncswitch.backends import forking, readiness
from syncswitch.backends.ray import journal as journals
from syncswitch.backends.ray import options, placement
from syncswitch.backends.ray.loader import import_ray
from syncswitch.backends.ray.host import FORWARDED_PREFIX, NodeHost
from syncswitch.errors import ClusterError
from syncswitch.registry import BACKENDS

log = logging.getLogger(__name__)
NAMESPACE = "syncswitch"
LOCAL_OBJECT_STORE_BYTES = 128 * 1024 * 1024  # agents pass nothing through Ray's object store


@BACKENDS.register("ray")
class RayBackend(Backend):
    """Nodes on a Ray cluster (local, launched on GCP, or KubeRay on GKE); see docs/ray.md."""

    option_validators = options.VALIDATORS
    capabilities = BackendCapabilities(why_not={
        "cpu": "Ray nodes' CPUs are Ray's to schedule; a job cannot cap them", "netem": "not on Ray nodes"})

    def __init__(self, *, on_event=None):
        super().__init__(on_event=on_event)
        self._ray = None
        self._cfg: options.RayConfig | None = None
        self._request: ProvisionRequest | None = None
        self._connected = False       # this backend called ray.init (and so calls ray.shutdown)
        self._pg = None
        self._actors: list[Any] = []
        self._generation: list[int] = []
        self.nodes: list[NodeInfo] = []
        self._infos: list[dict] = []
        self._journal: journals.Journal | None = None
        self._fork_server = None      # the manager machine's fork server, for the nodes Ray puts on this machine
        self._fork_socket: str | None = None

    # -- provision -----------------------------------------------------------------------------

    def provision(self, request: ProvisionRequest) -> ClusterInfo:
        self._cfg, self._request = options.resolve(request.options), request
        self._ray = import_ray()
        try:
            if self._cfg.fork_server:  # first: it imports TensorFlow while Ray connects, places and starts actors
                self._fork_server, self._fork_socket = forking.start(request.run_dir)
            self._connect()
            self._journal = journals.Journal.start(request.run_dir, request.job_id, self._ray, self._connected,
                                                   self._cfg.address)
            if self._fork_server is not None:
                self._journal.update(fork_server={"pid": self._fork_server.pid, "socket": self._fork_socket})
            self._place()
            self._start_all()
        except BaseException as exc:
            self._event(f"provisioning failed ({type(exc).__name__}): removing what was created")
            try:
                self.teardown()
            except (ClusterError, OSError, self._ray.exceptions.RayError) as cleanup:  # the original stays on top
                log.error("ray: teardown after a failed provision: %s", cleanup)
            raise
        shared = self._cfg.shared_filesystem
        if shared is None:  # every node on this machine sees the run folder where the manager writes it
            shared = all(info["in_run_dir"] for info in self._infos)
        if not shared and not request.checkpoint_dir and len({info["node_id"] for info in self._infos}) > 1:
            self._event("the nodes are on several machines and the run folder is not shared with them "
                        "(cluster.shared_filesystem: false): checkpoints stay on node 0's own disk, so losing "
                        "node 0 loses them; set checkpoint.dir to a mount every node sees at the same path (or "
                        "put the run folder there and set cluster.shared_filesystem: true)")
        return ClusterInfo(request.job_id, tuple(self.nodes), shared_filesystem=shared, fork_server=self._fork_socket)

    def _connect(self) -> None:
        ray, cfg, n = self._ray, self._cfg, self._request.num_nodes
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no usage reports from a job's driver
        if ray.is_initialized():
            self._event(f"using the Ray this process is connected to ({_gcs_address(ray)})")
            return
        kwargs: dict[str, Any] = {"namespace": NAMESPACE, "log_to_driver": False, "logging_level": logging.WARNING}
        if cfg.address is None:
            bundle = cfg.bundle
            custom = {k: v * n for k, v in bundle.items() if k not in options.BUILTIN_RESOURCES}
            kwargs.update(include_dashboard=False, object_store_memory=LOCAL_OBJECT_STORE_BYTES,
                          num_cpus=max(os.cpu_count() or 1, math.ceil(bundle.get("CPU", 0.0) * n)),
                          num_gpus=math.ceil(bundle.get("GPU", 0.0) * n), resources=custom)
            self._event("starting a local Ray instance for the job (cluster.address: null)")
        else:
            _probe(cfg.address)  # Ray itself retries an unreachable address for minutes
            kwargs["address"] = cfg.address
        try:
            ray.init(**kwargs)
        except (ConnectionError, RuntimeError, ValueError, TimeoutError) as exc:
            where = "start a local Ray" if cfg.address is None else f"connect to Ray at {cfg.address}"
            raise ClusterError(f"cluster.address: cannot {where}: {_first_line(exc)}") from None
        self._connected = True
        if cfg.address is not None:
            self._event(f"connected to the Ray cluster at {cfg.address}")

    def _place(self) -> None:
        """Reserve one bundle per node; a clear error when the cluster cannot hold them in time."""
        from ray.util.placement_group import placement_group

        ray, cfg, request = self._ray, self._cfg, self._request
        bundle, n = cfg.bundle, request.num_nodes
        alive = [node for node in ray.nodes() if node.get("Alive")]
        strategy, why = placement.strategy(alive, bundle, n)
        self._event(f"placement group of {n} bundle(s) of {placement.describe(bundle)}, {strategy}: {why}")
        short = placement.shortfall(alive, bundle, n)
        if short:
            self._event(f"{short}: waiting up to {cfg.placement_timeout_s:.0f} s (cluster.placement_timeout_s) "
                        "for nodes to join (an autoscaler)")
        self._pg = placement_group([dict(bundle) for _ in range(n)], strategy=strategy,
                                   name=journals.group_name(request.job_id))
        self._journal.update(placement_group=journals.group_name(request.job_id))
        if not self._pg.wait(timeout_seconds=cfg.placement_timeout_s):
            now = placement.shortfall([node for node in ray.nodes() if node.get("Alive")], bundle, n)
            raise ClusterError(f"cluster.workers={n}: the Ray cluster could not place {n} node(s) of "
                               f"{placement.describe(bundle)} (cluster.resources_per_node) within "
                               f"{cfg.placement_timeout_s:.0f} s: {now or 'its resources are taken by other jobs'}")

    def _start_all(self) -> None:
        n = self._request.num_nodes
        self._actors, self._generation, self._infos = [None] * n, [0] * n, [{}] * n
        self.nodes = [None] * n
        calls = [self._start_actor(i) for i in range(n)]
        for i, call in enumerate(calls):
            self._finish_start(i, call)
        self._event(f"{n} agent(s) up on Ray node(s) {', '.join(sorted({i['host'] for i in self._infos}))}")
        if self._fork_socket:
            # The manager's evaluator forks from it in any case; nodes Ray put on this machine fork their tasks
            # from it too, instead of each importing TensorFlow at once on the same cores.
            forked = sum(bool(info.get("forked")) for info in self._infos)
            self._event(f"{forked} of {n} node(s) on this machine: their tasks fork from the manager's fork server")

    def _start_actor(self, index: int):
        """Create node `index`'s actor in its bundle and ask it to start the agent; returns the pending call."""
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        ray, cfg, request = self._ray, self._cfg, self._request
        bundle = cfg.bundle
        self._generation[index] += 1
        name = journals.actor_name(request.job_id, index, self._generation[index])
        host_cls = ray.remote(NodeHost)
        actor = host_cls.options(
            name=name, max_restarts=0, max_concurrency=2, num_cpus=bundle.get("CPU", 0.0),
            num_gpus=bundle.get("GPU", 0.0), memory=bundle.get("memory"),
            resources={k: v for k, v in bundle.items() if k not in options.BUILTIN_RESOURCES},
            scheduling_strategy=PlacementGroupSchedulingStrategy(self._pg, placement_group_bundle_index=index),
        ).remote()
        self._actors[index] = actor
        self._journal.add_actor(name)
        # The run folder is the nodes' work dir where they see it: on this machine, or on a shared mount.
        run_nodes = os.path.join(os.path.abspath(request.run_dir), "nodes", str(index))
        shared = {True: "always", False: "never", None: socket.gethostname()}[cfg.shared_filesystem]
        env = {k: v for k, v in os.environ.items() if k.startswith(FORWARDED_PREFIX) and k != "SYNCSWITCH_TOKEN"}
        fork = {"socket": self._fork_socket, "host": socket.gethostname()} if self._fork_socket else None
        return actor.start.remote(index, request.job_id, request.token, run_nodes, shared,
                                  cfg.warm_spare or request.spare_task, env, cfg.ready_timeout_s, fork,
                                  request.checkpoint_dir)

    def _finish_start(self, index: int, call) -> NodeInfo:
        ray, cfg = self._ray, self._cfg
        try:
            info = ray.get(call, timeout=cfg.ready_timeout_s + 30)
        except ray.exceptions.GetTimeoutError:
            raise ClusterError(f"node {index}: its Ray actor did not start the agent within "
                               f"{cfg.ready_timeout_s + 30:.0f} s") from None
        except ray.exceptions.RayError as exc:
            raise ClusterError(f"node {index}: {_first_line(exc)}") from None
        node = NodeInfo(index, info["host"], f"{info['host']}:{info['agent_port']}", info["ps_port"],
                        info["worker_port"], resource_id=f"{info['node_id'][:12]}/{info['pid']}")
        self.nodes[index], self._infos[index] = node, info
        self._journal.set_agent(index, info)
        if not info["sees_checkpoint_dir"]:
            raise ClusterError(placement.unseen_checkpoint_dir(index, info["host"], self._request.checkpoint_dir))
        return node

    # -- lost nodes ----------------------------------------------------------------------------

    def lost_reason(self, index: int) -> str | None:
        """What Ray says of node `index`: its Ray node gone, its actor dead, or its agent exited."""
        ray, info = self._ray, self._infos[index]
        node = self._ray_node(info.get("node_id"))
        if node is not None and not node.get("Alive"):
            return f"Ray node {info['node_id'][:12]} ({info['host']}) is dead"
        try:
            code = ray.get(self._actors[index].exit_code.remote(), timeout=5)
        except ray.exceptions.GetTimeoutError:
            return "its Ray actor does not answer"
        except ray.exceptions.RayError as exc:
            return f"its Ray actor died: {_first_line(exc)}"
        return None if code is None else f"its agent exited with code {code}"

    def replace_node(self, index: int) -> NodeInfo:
        """A new actor (and agent) in node `index`'s bundle; Ray moves the bundle when its Ray node died."""
        ray, cfg = self._ray, self._cfg
        try:
            ray.kill(self._actors[index], no_restart=True)  # its agent exits with it
        except (ValueError, ray.exceptions.RayError) as exc:  # already dead: nothing to kill
            log.debug("ray: killing node %d's old actor: %s", index, exc)
        self._await_declared_dead(index)
        if not self._pg.wait(timeout_seconds=cfg.placement_timeout_s):
            raise ClusterError(f"node {index}: the Ray cluster has no room for its bundle of "
                               f"{placement.describe(cfg.bundle)} within {cfg.placement_timeout_s:.0f} s")
        node = self._finish_start(index, self._start_actor(index))
        self._event(f"node {index}: replacement actor on Ray node {node.resource_id} at {node.agent_address}")
        return node

    def _ray_node(self, node_id: str | None) -> dict | None:
        return next((n for n in self._ray.nodes() if n.get("NodeID") == node_id), None)

    def _await_declared_dead(self, index: int) -> None:
        """Where node `index`'s Ray node is itself gone (its raylet does not answer) but Ray still counts it alive,
        wait until Ray's health checks declare it dead: only then does Ray move its bundle to a live node, and an
        actor placed in the bundle before that dies unstarted with the node ("The actor died unexpectedly")."""
        info = self._infos[index]
        node = self._ray_node(info.get("node_id"))
        if node is None or not node.get("Alive") or _answers(node.get("NodeManagerAddress", ""),
                                                             node.get("NodeManagerPort", 0)):
            return
        timeout_s = self._cfg.placement_timeout_s
        self._event(f"node {index}: Ray node {info['node_id'][:12]} ({info['host']}) does not answer: waiting up "
                    f"to {timeout_s:.0f} s for Ray to declare it dead and move its bundle")
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            node = self._ray_node(info.get("node_id"))
            if node is None or not node.get("Alive"):
                return
            time.sleep(0.2)
        raise ClusterError(f"node {index}: Ray node {info['node_id'][:12]} ({info['host']}) does not answer, yet "
                           f"Ray still counted it alive after {timeout_s:.0f} s (cluster.placement_timeout_s)")

    # -- teardown and the rest -----------------------------------------------------------------

    def teardown(self) -> None:
        """Stop every agent, kill every actor, remove the placement group, disconnect, stop the fork server; safe
        to repeat."""
        try:
            self._teardown_ray()
        finally:
            fork, path = self._fork_server, self._fork_socket
            self._fork_server = self._fork_socket = None
            forking.stop(fork, path)

    def _teardown_ray(self) -> None:
        ray = self._ray
        if ray is None or not ray.is_initialized():
            return
        actors, self._actors = [(i, a) for i, a in enumerate(self._actors) if a is not None], []
        stops = {a.stop.remote(): i for i, a in actors}
        if stops:
            done, _ = ray.wait(list(stops), num_returns=len(stops), timeout=15)
            for call in done:
                self._keep_logs(stops[call], call)
        for _, actor in actors:
            try:
                ray.kill(actor, no_restart=True)
            except (ValueError, ray.exceptions.RayError) as exc:
                log.debug("ray: kill: %s", exc)
        pg, self._pg = self._pg, None
        if pg is not None:
            from ray.util.placement_group import remove_placement_group

            try:
                remove_placement_group(pg)
            except (ValueError, ray.exceptions.RayError) as exc:
                log.warning("ray: could not remove the placement group: %s", exc)
        if self._journal is not None:
            self._journal.update(ended=True)
        if self._connected:
            self._connected = False
            ray.shutdown()  # with address: null this also stops the local Ray started for the job

    def _keep_logs(self, index: int, call) -> None:
        """Write the logs node `index` brought back from its own temp folder into the run folder, where the nodes
        of a shared run folder write theirs (nodes/<index>/)."""
        try:
            logs = self._ray.get(call, timeout=5)
        except self._ray.exceptions.RayError as exc:  # its actor died: its folder went with its node, or stays
            log.warning("ray: node %d's logs: %s", index, _first_line(exc))
            return
        if not logs:
            return
        folder = os.path.join(os.path.abspath(self._request.run_dir), "nodes", str(index))
        os.makedirs(folder, exist_ok=True)
        for name, data in logs.items():
            with open(os.path.join(folder, os.path.basename(name)), "wb") as fh:
                fh.write(data)

    def dry_run(self, request: ProvisionRequest) -> str:
        cfg = options.resolve(request.options)
        where = "a local Ray started for the job (and stopped after it)" if cfg.address is None \
            else f"the Ray cluster at {cfg.address}"
        return (f"ray backend: {request.num_nodes} node(s) on {where}: a placement group of {request.num_nodes} "
                f"bundle(s) of {placement.describe(cfg.bundle)} (STRICT_SPREAD where enough Ray nodes can hold one, "
                f"SPREAD otherwise), one actor per bundle owning that node's agent; the manager runs here")

    @classmethod
    def reap(cls, run_dir: str) -> list[str]:
        """End what a dead manager of `run_dir` left: its agents on this machine, a local Ray it had started,
        and on a cluster its actors and placement group (Ray ends a dead driver's own; this is the net)."""
        return journals.reap(run_dir, NAMESPACE)


def _probe(address: str, timeout_s: float = 5.0) -> None:
    """A ClusterError naming cluster.address when nothing listens there (`auto` is found by Ray itself)."""
    if address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise ClusterError(f"cluster.address={address!r}: nothing answers there ({exc.strerror or exc}); "
                           "is the Ray head running, and is this its address?") from None


def _answers(host: str, port: int) -> bool:
    """Whether a raylet's node manager accepts a connection at host:port: a refused or silent port is a Ray node
    gone, whose death Ray's health checks declare only seconds later."""
    if not host or not port:
        return True  # nothing to probe: leave it to Ray
    return readiness.answers(host, port)


def _gcs_address(ray) -> str:
    return getattr(ray.get_runtime_context(), "gcs_address", "") or "unknown address"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if "Traceback" in text else lines[0]
