"""The local backend: one agent process per node on 127.0.0.1, on free ports, the same entry point a VM runs."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

from syncswitch.cluster_manager.backends import BACKENDS
from syncswitch.cluster_manager.backends.base import Backend, ClusterInfo, NodeInfo, ProvisionRequest
from syncswitch.errors import ClusterError, SpecError

HOST = "127.0.0.1"


def _bool(value, field: str) -> bool:
    if not isinstance(value, bool):
        raise SpecError(f"{field}={value!r}: must be true or false")
    return value


def free_ports(count: int) -> list[int]:
    """`count` distinct ports the kernel says are free now (held open together so they differ)."""
    sockets = []
    try:
        for _ in range(count):
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
    option_validators = {"shared_filesystem": _bool}

    def __init__(self, ready_timeout_s: float = 60.0):
        self.ready_timeout_s = ready_timeout_s
        self.procs: list[subprocess.Popen] = []

    def dry_run(self, request: ProvisionRequest) -> str:
        return (f"local backend: {request.num_nodes} agent process(es) on {HOST} (one PS and one worker "
                f"task each), run folder {request.run_dir}")

    def provision(self, request: ProvisionRequest) -> ClusterInfo:
        from syncswitch.cluster_manager.agent_client import AgentClient

        ports = free_ports(3 * request.num_nodes)
        nodes = []
        env = dict(os.environ, SYNCSWITCH_TOKEN=request.token)
        for i in range(request.num_nodes):
            agent_port, ps_port, worker_port = ports[3 * i:3 * i + 3]
            work_dir = os.path.join(request.run_dir, "nodes", str(i))
            os.makedirs(work_dir, exist_ok=True)
            cmd = [sys.executable, "-m", "syncswitch.hooks.agent", "--host", HOST, "--port", str(agent_port),
                   "--ps-port", str(ps_port), "--worker-port", str(worker_port), "--work-dir", work_dir]
            if not request.spare_task:
                cmd.append("--no-spare")
            log = open(os.path.join(work_dir, "agent.log"), "ab")
            proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
            log.close()
            self.procs.append(proc)
            nodes.append(NodeInfo(i, HOST, f"{HOST}:{agent_port}", ps_port, worker_port, resource_id=str(proc.pid)))
        deadline = time.time() + self.ready_timeout_s
        for node, proc in zip(nodes, self.procs):
            client = AgentClient(node.index, node.agent_address, request.token)
            try:
                while True:
                    if proc.poll() is not None:
                        raise ClusterError(f"node {node.index} agent exited with code {proc.returncode} "
                                           f"before answering: {_last_line(request.run_dir, node.index)}")
                    try:
                        client.status(timeout_s=1.0)
                        break
                    except ClusterError:
                        if time.time() > deadline:
                            raise ClusterError(f"node {node.index} agent at {node.agent_address} did not answer "
                                               f"within {self.ready_timeout_s:.0f} s") from None
                        time.sleep(0.05)
            finally:
                client.close()
        shared = request.options.get("shared_filesystem", True)
        return ClusterInfo(request.job_id, tuple(nodes), shared_filesystem=shared)

    def teardown(self) -> None:
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

    def node_alive(self, node: NodeInfo) -> bool:
        return any(str(p.pid) == node.resource_id and p.poll() is None for p in self.procs)


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _last_line(run_dir: str, index: int) -> str:
    try:
        with open(os.path.join(run_dir, "nodes", str(index), "agent.log"), encoding="utf-8", errors="replace") as fh:
            lines = [line.strip() for line in fh if line.strip()]
        return lines[-1] if lines else "no output"
    except OSError:
        return "no log"
