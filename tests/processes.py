"""Helpers for tests that watch real processes end."""

import time

import psutil


def gone(pid: int, within_s: float = 10.0) -> bool:
    """Whether process `pid` exits (or is a zombie: exited, not yet reaped) within `within_s` seconds."""
    deadline = time.time() + within_s
    while time.time() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False
