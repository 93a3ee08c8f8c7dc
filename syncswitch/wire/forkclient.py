"""The fork server's client end: start the training task or the evaluator as a child of a machine's fork server.

The manager (its evaluator) and the node's agent (its tasks) both start processes this way, so the protocol's
client lives with the other manager-node contracts; the server is `syncswitch.node.forkserver`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time

# What a request may start: the training task and the evaluator (never an arbitrary module).
ENTRIES = {"task": "syncswitch.node.task", "evaluator": "syncswitch.node.evaluator"}
CONNECT_TIMEOUT_S = 180.0  # the server imports TensorFlow before its socket appears
PRIVATE_PREFIX = "syncswitch-fork-"  # the folder a launcher made for the socket alone: the server removes it


class ForkServerError(Exception):
    """The fork server cannot be reached or refused a request."""


class ForkedProcess:
    """A process forked by the fork server, with the part of subprocess.Popen's interface the agent uses
    (pid, text stdin/stdout, poll, wait, kill, returncode)."""

    def __init__(self, server: str, entry: str, *, cwd: str, env: dict, stderr_fd: int,
                 cgroup_procs: str | None = None, timeout_s: float = CONNECT_TIMEOUT_S):
        if entry not in ENTRIES:
            raise ValueError(f"entry={entry!r}: valid are {', '.join(ENTRIES)}")
        self.entry = entry
        self._sock = _connect(server, timeout_s)
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        request = {"entry": entry, "cwd": cwd, "env": env, "cgroup_procs": cgroup_procs}
        try:
            socket.send_fds(self._sock, [json.dumps(request).encode() + b"\n"], [stdin_r, stdout_w, stderr_fd])
        finally:
            os.close(stdin_r)
            os.close(stdout_w)
        self._replies = self._sock.makefile("r", encoding="utf-8")
        reply = json.loads(self._replies.readline() or '{"error": "the fork server closed the connection"}')
        if "pid" not in reply:
            os.close(stdin_w)
            os.close(stdout_r)
            self._sock.close()
            raise ForkServerError(f"fork server {server}: {reply.get('error')}")
        self.pid: int = reply["pid"]
        self.stdin = os.fdopen(stdin_w, "w", buffering=1, encoding="utf-8")
        self.stdout = os.fdopen(stdout_r, "r", encoding="utf-8")
        self.returncode: int | None = None
        self._exited = threading.Event()
        threading.Thread(target=self._watch, name=f"forked-{self.pid}", daemon=True).start()

    def _watch(self) -> None:
        try:
            line = self._replies.readline()
            # No answer: the server died, and its children with it (their death signal is SIGKILL).
            code = json.loads(line)["exit"] if line else -signal.SIGKILL
        except (OSError, ValueError, KeyError):
            code = -signal.SIGKILL
        self.returncode = code
        self._exited.set()
        self._sock.close()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._exited.wait(timeout):
            raise subprocess.TimeoutExpired(f"forked {self.entry} {self.pid}", timeout)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _connect(path: str, timeout_s: float) -> socket.socket:
    deadline = time.time() + timeout_s
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
            return sock
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            sock.close()
            if time.time() > deadline:
                raise ForkServerError(f"no fork server at {path} after {timeout_s:.0f} s ({exc})") from None
            time.sleep(0.05)
