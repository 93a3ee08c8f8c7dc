"""The manager machine's fork server (syncswitch.node.forkserver), for every backend whose nodes run there."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile


def start(run_dir: str) -> tuple[subprocess.Popen, str]:
    """Start a fork server for this manager; (its process, its socket path). It imports TensorFlow while the
    agents start; the socket appears once it is ready (a client waits for it)."""
    from syncswitch.wire.forkclient import PRIVATE_PREFIX

    # A private directory (0700): the socket forks processes as this user, so no one else may reach it. Under
    # /tmp, not the run folder: a Unix socket path must stay under ~100 bytes.
    folder = tempfile.mkdtemp(prefix=PRIVATE_PREFIX)
    socket_path = os.path.join(folder, "socket")
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "forkserver.log"), "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "syncswitch.node.forkserver", "--socket", socket_path,
             "--manager-pid", str(os.getpid())],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    return proc, socket_path


def stop(proc: subprocess.Popen | None, socket_path: str | None) -> None:
    """End the fork server (it kills what it forked) and remove its socket's folder; either may be None."""
    if proc is not None:
        _signal_group(proc, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)  # its children die with it (PR_SET_PDEATHSIG)
            proc.wait(timeout=5)
    if socket_path:
        shutil.rmtree(os.path.dirname(socket_path), ignore_errors=True)


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
