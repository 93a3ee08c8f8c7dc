"""The local backend: one agent process per node on 127.0.0.1, on free ports, the same entry point a VM runs."""

from __future__ import annotations

import logging
import math
import os
import random
import signal
import socket
import subprocess
import sys
import time

from syncswitch.registry import BACKENDS
from syncswitch.backends.base import (Backend, BackendCapabilities, ClusterInfo, NodeInfo,
                                                      ProvisionRequest)
from syncswitch.backends import forking, readiness
from syncswitch.backends.cgroups import CgroupError, CpuGroup, CpuHierarchy, RunGroups
from syncswitch.errors import ClusterError, SpecError
from syncswitch.files import write_json_atomic

HOST = "127.0.0.1"
AGENTS_FILE = "local-agents.json"
logger = logging.getLogger(__name__)


def _bool(value, field: str) -> bool:
    if not isinstance(value, bool):
        raise SpecError(f"{field}={value!r}: must be true or false")
    return value


def _cpus(value, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise SpecError(f"{field}={value!r}: must be a number of CPUs > 0 (e.g. 0.45)")
    return float(value)


def ephemeral_range(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> tuple[int, int] | None:
    try:
        with open(path, encoding="ascii") as fh:
            low, high = (int(v) for v in fh.read().split())
        return low, high
    except (OSError, ValueError):
        return None


def _bindable(port: int) -> socket.socket | None:
    s = socket.socket()
    try:
        s.bind(("0.0.0.0", port))  # the TF servers listen on every address: test that one
        return s
    except OSError:
        s.close()
        return None


def free_ports(count: int) -> list[int]:
    """`count` distinct ports free now, taken below the kernel's ephemeral range where it leaves room.

    The ports are bound seconds later by other processes (the agents, the TF servers). A port from the
    ephemeral range can be taken meanwhile by any outgoing connection on the machine (every gRPC client
    does that), which kills the node with "Could not start gRPC server"; below the range only an
    explicit bind can take it.
    """
    sockets: list[socket.socket] = []
    try:
        span = ephemeral_range()
        low, high = 10000, (span[0] if span else 0)
        rng = random.SystemRandom()
        for _ in range(50 * count if high - low >= 1000 else 0):
            if len(sockets) == count:
                break
            held = _bindable(rng.randrange(low, high))
            if held is not None:
                sockets.append(held)
        while len(sockets) < count:  # no room below the range: let the kernel pick
            s = socket.socket()
            s.bind((HOST, 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@BACKENDS.register("local")
class LocalBackend(Backend):
    """Agents as child processes of the manager, each in its own process group for a clean kill."""

    # shared_filesystem: false makes the nodes behave like remote ones for checkpoints: the tasks write them
    # in their own work dirs and the manager copies them over the agents' FetchCheckpoint (for tests).
    # cpus_per_node: each node's agent and everything it starts run in the node's own CPU cgroup capped at
    # that many CPUs, so nodes compete for CPU like separate machines rather than lending each other cores.
    # cpus_per_ps: a node that hosts a parameter-server task gets this many CPUs more, as if the PS ran on a
    # machine of its own: the PS shares its worker's process, and inside one budget it made that worker as slow
    # as a straggler at a third of its budget (bench/notebook/2026-11-24-stragglers.md).
    # fork_server (default true): one process imports TensorFlow once and every node's training task (and the
    # evaluator) is forked from it, instead of each importing it on the shared cores (syncswitch.node.forkserver).
    option_validators = {"shared_filesystem": _bool, "cpus_per_node": _cpus, "cpus_per_ps": _cpus,
                         "fork_server": _bool}
    # Local nodes share one machine's cores and memory: a PS task per node adds processes' threads and
    # RPC fan-out competing for the same CPUs without adding bandwidth, so one PS task by default.
    default_parameter_servers = 1
    capabilities = BackendCapabilities(slowdown_methods=("delay", "cpu"), cpu_budgets=True, why_not={
        "netem": "local nodes share one network namespace; netem also needs the kernel's netem qdisc"})

    def __init__(self, ready_timeout_s: float = 60.0, *, on_event=None, mounts: str = "/proc/mounts"):
        super().__init__(on_event=on_event)
        self.ready_timeout_s = ready_timeout_s
        self.mounts = mounts  # where the cgroup cpu controller is looked up (a test points it elsewhere)
        self.procs: list[subprocess.Popen] = []
        self.nodes: list[NodeInfo] = []
        self.request: ProvisionRequest | None = None
        self.groups: RunGroups | None = None
        self.run_groups: RunGroups | None = None
        self.cpus_per_node: float | None = None
        self.budgets: list[float] = []  # each node's own CPU budget (cpus_per_node, plus cpus_per_ps on a PS node)
        self.fork_server: subprocess.Popen | None = None
        self.fork_socket: str | None = None

    def dry_run(self, request: ProvisionRequest) -> str:
        text = (f"local backend: {request.num_nodes} agent process(es) on {HOST} (a worker task each, "
                f"PS tasks per cluster.parameter_servers), run folder {request.run_dir}")
        cpus = request.options.get("cpus_per_node")
        if cpus is not None:
            try:
                where = repr(CpuHierarchy.find(self.mounts))
            except CgroupError as exc:
                where = f"NOT AVAILABLE here: {exc}"
            text += f"\neach node capped at {_describe(cpus, request)} in its own cgroup ({where})"
        return text

    def provision(self, request: ProvisionRequest) -> ClusterInfo:
        groups = self._cpu_groups(request)  # first: an unusable controller must fail before anything starts
        ports = free_ports(3 * request.num_nodes)
        self.request, self.groups = request, groups
        if request.options.get("fork_server", True):
            self._start_fork_server()  # it imports TensorFlow while the agents start
        for i in range(request.num_nodes):
            self.procs.append(None)
            self.nodes.append(self._start_agent(i, *ports[3 * i:3 * i + 3]))
        deadline = time.time() + self.ready_timeout_s
        self._journal()
        for node in self.nodes:
            self._wait_ready(node, deadline)
        shared = request.options.get("shared_filesystem", True)
        return ClusterInfo(request.job_id, tuple(self.nodes), shared_filesystem=shared, fork_server=self.fork_socket,
                           nodes_beside_evaluator=True)

    def _start_fork_server(self) -> None:
        self.fork_server, self.fork_socket = forking.start(self.request.run_dir)

    def _stop_fork_server(self) -> None:
        proc, self.fork_server = self.fork_server, None
        path, self.fork_socket = self.fork_socket, None
        forking.stop(proc, path)

    def _journal(self) -> None:
        """The agents' process groups, so a resume can end them if this manager dies without teardown."""
        entries = [{"pid": p.pid, "work_dir": os.path.join(self.request.run_dir, "nodes", str(i))}
                   for i, p in enumerate(self.procs) if p is not None]
        if self.fork_server is not None:
            entries.append({"pid": self.fork_server.pid, "socket": self.fork_socket})
        write_json_atomic(os.path.join(self.request.run_dir, AGENTS_FILE), entries)

    @classmethod
    def reap(cls, run_dir: str) -> list[str]:
        """Kill the process groups of the agents a dead manager of `run_dir` left (checked by command line)."""
        import json

        import psutil

        try:
            with open(os.path.join(run_dir, AGENTS_FILE), encoding="utf-8") as fh:
                agents = json.load(fh)
        except (FileNotFoundError, ValueError):
            return []
        ended = []
        for agent in agents:
            try:
                cmdline = " ".join(psutil.Process(agent["pid"]).cmdline())
            except psutil.Error:
                continue
            if "socket" in agent:  # the fork server: its forked tasks die with it
                if f"--socket {agent['socket']}" in cmdline:
                    os.killpg(agent["pid"], signal.SIGKILL)
                    ended.append(f"killed the orphaned fork server {agent['pid']}")
                continue
            if f"--work-dir {agent['work_dir']}" not in cmdline:
                continue  # the pid was reused by something else
            os.killpg(agent["pid"], signal.SIGKILL)
            ended.append(f"killed the orphaned agent {agent['pid']} of {agent['work_dir']} and its tasks")
        return ended

    def _start_agent(self, i: int, agent_port: int, ps_port: int, worker_port: int) -> NodeInfo:
        request, groups = self.request, self.groups
        env = dict(os.environ, SYNCSWITCH_TOKEN=request.token)
        work_dir = os.path.join(request.run_dir, "nodes", str(i))
        os.makedirs(work_dir, exist_ok=True)
        cmd = [sys.executable, "-m", "syncswitch.node.agent", "--host", HOST, "--port", str(agent_port),
               "--ps-port", str(ps_port), "--worker-port", str(worker_port), "--work-dir", work_dir,
               "--manager-pid", str(os.getpid())]
        if not request.spare_task:
            cmd.append("--no-spare")
        if self.fork_socket:
            cmd += ["--fork-server", self.fork_socket]
            if groups is not None:
                cmd += ["--task-cgroup", groups.nodes[i].procs_file]
        if groups is not None:
            cmd = groups.nodes[i].command(cmd)  # joins its group before Python starts
        log = open(os.path.join(work_dir, "agent.log"), "ab")
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        log.close()
        self.procs[i] = proc
        return NodeInfo(i, HOST, f"{HOST}:{agent_port}", ps_port, worker_port, resource_id=str(proc.pid))

    def _wait_ready(self, node: NodeInfo, deadline: float) -> None:
        from syncswitch.wire.client import AgentClient

        proc = self.procs[node.index]
        client = AgentClient(node.index, node.agent_address, self.request.token)

        def answers() -> bool:
            try:
                client.status(timeout_s=1.0)
                return True
            except ClusterError:
                return False

        try:
            readiness.wait_ready(f"node {node.index} agent at {node.agent_address}", answers, proc.poll,
                                 self.ready_timeout_s, os.path.join(self.request.run_dir, "nodes", str(node.index)),
                                 deadline)
        finally:
            client.close()

    def replace_node(self, index: int) -> NodeInfo:
        """A new agent for node `index` on fresh ports, after killing whatever is left of the old one's group."""
        old = self.procs[index]
        _signal_group(old, signal.SIGKILL)  # the old agent's orphaned task too: it holds the node's ports
        try:
            old.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        node = self._start_agent(index, *free_ports(3))
        self.nodes[index] = node
        self._journal()
        self._wait_ready(node, time.time() + self.ready_timeout_s)
        self._event(f"node {index}: replacement agent {node.resource_id} at {node.agent_address}")
        return node

    def _cpu_groups(self, request: ProvisionRequest) -> RunGroups | None:
        """The run's node groups when the job asks for CPU budgets; also clears groups of dead managers."""
        cpus = request.options.get("cpus_per_node")
        if cpus is None:
            self._clean_stale_quietly()
            return None
        try:
            hierarchy = CpuHierarchy.find(self.mounts)
            hierarchy.prepare()
            _report_stale(*hierarchy.clean_stale())
            budgets = _budgets(cpus, request)
            self.run_groups = hierarchy.create_run(request.job_id, request.num_nodes, budgets)
        except CgroupError as exc:
            raise ClusterError(f"cluster.cpus_per_node={cpus:g}: cannot give nodes their own CPU budget: "
                               f"{exc}") from None
        self.cpus_per_node, self.budgets = cpus, budgets
        self._event(f"each node capped at {_describe(cpus, request)} in its own cgroup under {self.run_groups.path}")
        return self.run_groups

    def _clean_stale_quietly(self) -> None:
        # A job without budgets still clears what a crashed budgeted run left, where it may.
        try:
            hierarchy = CpuHierarchy.find(self.mounts)
            if os.path.isdir(hierarchy.parent) and os.access(hierarchy.parent, os.W_OK):
                _report_stale(*hierarchy.clean_stale())
        except CgroupError:
            pass  # nothing of ours can be there, or we may not touch it: no budgets were asked for

    # -- CPU slowdowns ---------------------------------------------------------------------------
    def slow_node(self, index: int, factor: float) -> None:
        """Divide node `index`'s CPU budget by `factor` (> 1) until `restore_node`."""
        group = self._node_group(index, "slow")
        if not (isinstance(factor, (int, float)) and math.isfinite(factor) and factor > 1):
            raise ClusterError(f"slow_node({index}, {factor!r}): the slowdown factor must be a number > 1")
        try:
            group.set_budget(self.budgets[index] / factor)
        except OSError as exc:
            raise ClusterError(f"cannot slow node {index} down: {exc}") from None

    def restore_node(self, index: int) -> None:
        """Give node `index` its full CPU budget back."""
        try:
            self._node_group(index, "restore").set_budget(self.budgets[index])
        except OSError as exc:
            raise ClusterError(f"cannot restore node {index}'s CPU budget: {exc}") from None

    def node_cpus(self, index: int) -> float | None:
        """Node `index`'s current CPU cap (None: unlimited)."""
        return self._node_group(index, "read").budget()

    def _node_group(self, index: int, what: str) -> CpuGroup:
        if self.run_groups is None:
            raise ClusterError(f"cannot {what} node {index}'s CPU: the nodes have no CPU budget "
                               "(set cluster.cpus_per_node)")
        if not 0 <= index < len(self.run_groups.nodes):
            raise ClusterError(f"no node {index}: the cluster has {len(self.run_groups.nodes)} node(s)")
        return self.run_groups.nodes[index]

    def teardown(self) -> None:
        try:
            self._teardown_agents()
        finally:
            self._stop_fork_server()

    def _teardown_agents(self) -> None:
        procs, self.procs = self.procs, []
        for proc in procs:
            _signal_group(proc, signal.SIGTERM)
        deadline = time.time() + 5.0
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                pass
            # The group also holds the agent's task processes: make sure none outlives the job.
            _signal_group(proc, signal.SIGKILL)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        groups, self.run_groups = self.run_groups, None
        if groups is not None:
            # Also kills what escaped the process groups (a task that started its own session).
            try:
                groups.remove()
            except CgroupError as exc:
                # Teardown must not fail the run's summary; the next start removes it (its owner is gone).
                logger.warning("%s; it is removed at the next start", exc)


def _budgets(cpus: float, request: ProvisionRequest) -> list[float]:
    extra = request.options.get("cpus_per_ps") or 0.0
    return [cpus + (extra if i in request.ps_nodes else 0.0) for i in range(request.num_nodes)]


def _describe(cpus: float, request: ProvisionRequest) -> str:
    extra, nodes = request.options.get("cpus_per_ps"), ", ".join(map(str, request.ps_nodes))
    plural = "s" if len(request.ps_nodes) > 1 else ""
    return f"{cpus:g} CPU" + (f" (+{extra:g} for the PS task on node{plural} {nodes})" if extra and nodes else "")


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _report_stale(removed: list[str], problems: list[str]) -> None:
    if removed:
        logger.warning("removed %d CPU cgroup(s) left by manager(s) that died: %s", len(removed), ", ".join(removed))
    for problem in problems:
        logger.warning("a CPU cgroup left by a manager that died stays: %s", problem)
