"""Readiness probe: wait until a TCP port accepts connections (the manager then checks with gRPC)."""

from __future__ import annotations

import socket
import time


def wait_for_port(host: str, port: int, timeout: float, *, interval: float = 1.0) -> bool:
    """True once `host:port` accepts a TCP connection, False if `timeout` seconds pass first."""
    deadline = time.monotonic() + max(timeout, 0.0)
    while True:
        remaining = deadline - time.monotonic()
        try:
            with socket.create_connection((host, port), timeout=max(min(remaining, 5.0), 0.1)):
                return True
        except OSError:
            pass  # refused, unreachable or timed out: the VM or its agent is still booting
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(interval, remaining))
