"""What runs inside the Ray actor of one node: it starts the node's syncswitch agent and owns it.

The agent is the same entry point the local and gce backends start (`python -m syncswitch.node.agent`), a
process of its own in its own session, so the training task it starts is not a Ray worker and its TensorFlow
threads are not Ray's. It exits within a second of the actor's process (`--manager-pid`): an actor killed, or a
node lost with its raylet, takes its agent and task with it, and the manager sees the node's agent go.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

GUARDIAN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "guardian.py")
# The job's own settings follow it to every node (debug output, the test harness's process marker).
FORWARDED_PREFIX = "SYNCSWITCH_"
# A node's logs travel back to the run folder through Ray's object store at teardown: each log keeps its
# last bytes only, so a runaway log cannot fill the manager's disk or memory.
LOG_TAIL_BYTES = 8 << 20


class NodeHost:
    """One node's agent, started on the node the actor was placed on, on ports free there."""

    def __init__(self):
        self.proc: subprocess.Popen | None = None  # the guardian (guardian.py), parent of the agent
        self.agent_pid: int | None = None
        self.work_dir = ""
        self.own_dir = False  # the work dir is this node's own temp folder, not the (shared) run folder

    def start(self, index: int, job_id: str, token: str, run_dir_work: str, shared: str, spare: bool,
              env: dict[str, str], ready_timeout_s: float, fork: dict | None = None, checkpoint_dir: str = "") -> dict:
        """Start the agent; returns once it listens (or raises with its last log line).

        `shared`: "always" (the run folder is on a mount every node sees), "never", or the manager's host name:
        the node works in the run folder (`run_dir_work`) where it sees it, else under its own temp dir.
        `fork`: the manager's fork server ({socket, host}), used where this node runs on the manager's machine.
        `checkpoint_dir`: checkpoint.dir's folder for the run, which the manager made; whether it is seen here is
        in the answer (a node-local path on a multi-machine cluster is not)."""
        import ray

        from syncswitch.backends.local import free_ports

        node_id = ray.get_runtime_context().get_node_id()
        host = _node_address(ray, node_id)
        agent_port, ps_port, worker_port = free_ports(3)
        in_run_dir = shared == "always" or shared == socket.gethostname()
        self.own_dir = not in_run_dir
        self.work_dir = run_dir_work if in_run_dir else \
            os.path.join(tempfile.gettempdir(), f"syncswitch-{job_id}", str(index))
        os.makedirs(self.work_dir, exist_ok=True)
        cmd = [sys.executable, "-m", "syncswitch.node.agent", "--host", host, "--port", str(agent_port),
               "--ps-port", str(ps_port), "--worker-port", str(worker_port), "--work-dir", self.work_dir]
        if not spare:
            cmd.append("--no-spare")
        forked = bool(fork) and fork["host"] == socket.gethostname() and os.path.isdir(os.path.dirname(fork["socket"]))
        if forked:
            cmd += ["--fork-server", fork["socket"]]
        child_env = {k: v for k, v in os.environ.items() if not k.startswith(FORWARDED_PREFIX)}
        child_env.update(env, SYNCSWITCH_TOKEN=token)
        log = os.path.join(self.work_dir, "agent.log")
        self.proc = subprocess.Popen([sys.executable, GUARDIAN, log, *cmd], env=child_env, stdout=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        line = self.proc.stdout.readline()  # the agent's pid, once it is started
        self.agent_pid = int(line) if line.strip().isdigit() else None
        self._wait_listening(host, agent_port, ready_timeout_s)
        return {"host": host, "agent_port": agent_port, "ps_port": ps_port, "worker_port": worker_port,
                "pid": self.agent_pid, "node_id": node_id,
                "work_dir": self.work_dir, "in_run_dir": in_run_dir, "actor_pid": os.getpid(), "forked": forked,
                "sees_checkpoint_dir": not checkpoint_dir or os.path.isdir(checkpoint_dir)}

    def _wait_listening(self, host: str, port: int, timeout_s: float) -> None:
        from syncswitch.backends import readiness

        readiness.wait_ready(f"the agent at {host}:{port}", lambda: readiness.answers(host, port), self.proc.poll,
                             timeout_s, self.work_dir)

    def exit_code(self) -> int | None:
        """The agent's exit code; None while it runs."""
        return None if self.proc is None else self.proc.poll()

    def stop(self) -> dict[str, bytes]:
        """End the agent and everything in its session (its training task), through its guardian. Where the node
        worked in a temp folder of its own, returns its logs ({name: bytes}) for the run folder and removes the
        folder (its checkpoints were copied to the manager as they were written); else returns nothing."""
        self._end_agent()
        if not self.own_dir or not os.path.isdir(self.work_dir):
            return {}
        logs = _read_logs(self.work_dir)
        shutil.rmtree(self.work_dir, ignore_errors=True)
        try:
            os.rmdir(os.path.dirname(self.work_dir))  # the job's folder, once its last node on this machine left
        except OSError:
            pass
        return logs

    def _end_agent(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        if self.agent_pid:
            _signal_group(self.agent_pid, signal.SIGKILL)  # already gone, unless the guardian was too slow


def _read_logs(work_dir: str) -> dict[str, bytes]:
    """The agent's and the tasks' logs in `work_dir` (its top level, where they write them), each cut to its tail."""
    logs = {}
    for name in sorted(os.listdir(work_dir)):
        path = os.path.join(work_dir, name)
        if name.endswith(".log") and os.path.isfile(path):
            with open(path, "rb") as fh:
                fh.seek(max(0, os.path.getsize(path) - LOG_TAIL_BYTES))
                logs[name] = fh.read()
    return logs


def _node_address(ray, node_id: str) -> str:
    """The address the node's raylet was started on (`--node-ip-address`): the one its peers reach it at;
    the interface an auto-detection would pick can differ (a local cluster on 127.0.0.1)."""
    for node in ray.nodes():
        if node.get("NodeID") == node_id and node.get("NodeManagerAddress"):
            return node["NodeManagerAddress"]
    return ray.util.get_node_ip_address()


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
