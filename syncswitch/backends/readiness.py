"""Waiting for a node's freshly started agent: the one loop every backend that starts agent processes needs."""

from __future__ import annotations

import os
import socket
import time
from typing import Callable

from syncswitch.errors import ClusterError

POLL_S = 0.05


def wait_ready(what: str, answers: Callable[[], bool], exit_code: Callable[[], int | None], timeout_s: float,
               work_dir: str, deadline: float | None = None) -> None:
    """Return once `answers()` is true; a ClusterError naming `what` (with the last line of its agent.log in
    `work_dir`) when the agent exits first or does not answer by the deadline (now + `timeout_s` when not
    given). `answers` must itself return within about a second."""
    deadline = time.time() + timeout_s if deadline is None else deadline
    while True:
        code = exit_code()
        if code is not None:
            raise ClusterError(f"{what} exited with code {code} before answering: {last_line(work_dir)}")
        if answers():
            return
        if time.time() > deadline:
            raise ClusterError(f"{what} did not answer within {timeout_s:.0f} s: {last_line(work_dir)}")
        time.sleep(POLL_S)


def answers(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """Whether something accepts a TCP connection at host:port within `timeout_s`."""
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
        return True
    except OSError:
        return False


def last_line(work_dir: str) -> str:
    """The last non-empty line of the agent's log in `work_dir`: usually why it could not start."""
    try:
        with open(os.path.join(work_dir, "agent.log"), encoding="utf-8", errors="replace") as fh:
            lines = [line.strip() for line in fh if line.strip()]
        return lines[-1] if lines else "no output"
    except OSError:
        return "no log"
