"""A node's training task as a process the agent owns: spawned with Python, or forked from the fork server."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import grpc

from syncswitch.wire import agent_pb2 as pb
from syncswitch.wire import codec
from syncswitch.wire.forkclient import ForkedProcess, ForkServerError


class AgentError(Exception):
    """A request the agent cannot serve; mapped to a gRPC status by the servicer."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code = code


class TaskProcess:
    """A training task process, started early so TensorFlow is imported before the launch arrives."""

    def __init__(self, work_dir: str, on_event, nice: int = 0, fork_server: str | None = None,
                 cgroup_procs: str | None = None):
        self.started = time.time()
        log_path = os.path.join(work_dir, f"task-{int(self.started * 1000)}.log")
        self.log_path = log_path
        env = dict(os.environ)
        env.pop("SYNCSWITCH_TOKEN", None)  # the task needs no secret
        env["SYNCSWITCH_NICE"] = str(nice)  # applied by the task: preexec_fn would fork beside gRPC threads
        with open(log_path, "ab") as log:  # the child keeps its own descriptor
            if fork_server:
                try:
                    self.proc = ForkedProcess(fork_server, "task", cwd=work_dir, env=env, stderr_fd=log.fileno(),
                                              cgroup_procs=cgroup_procs)
                except (ForkServerError, OSError) as exc:
                    raise AgentError(grpc.StatusCode.UNAVAILABLE, f"cannot start the training task: {exc}") from None
            else:
                self.proc = subprocess.Popen(
                    [sys.executable, "-u", "-m", "syncswitch.node.task"], stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE, stderr=log, cwd=work_dir, env=env, text=True, bufsize=1)
        self.launched = False
        self._on_event = on_event
        self._write_lock = threading.Lock()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            try:
                event = codec.decode(line, pb.Event)
            except codec.WireError:
                continue  # not ours: the task's own output goes to its log
            if self.launched or codec.kind(event) == "warm":
                self._on_event(self, event)
        code = self.proc.wait()
        self._on_event(self, codec.event(exit=pb.TaskExit(code=code, log=self.log_path)))

    def send(self, message) -> None:
        """Write a Launch or Command to the task."""
        with self._write_lock:
            try:
                self.proc.stdin.write(codec.encode(message) + "\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, ValueError):
                raise AgentError(grpc.StatusCode.FAILED_PRECONDITION, "the training task has exited") from None

    def stop(self, grace_s: float = 2.0) -> int:
        if self.proc.poll() is None:
            try:
                self.send(pb.Command(stop=pb.Stop()))
            except AgentError:
                pass
            try:
                return self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait()
