"""The fork server: real forks of the real task entry from a process that imported TensorFlow once."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import psutil
import pytest

from syncswitch.wire.forkclient import ForkedProcess, ForkServerError
from syncswitch.wire import agent_pb2 as pb
from syncswitch.wire import codec

from tests.processes import gone

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A fork server for the module's tests (its TensorFlow import is paid once); stopped afterwards."""
    folder = tmp_path_factory.mktemp("fs")
    path = str(folder / "s")
    log = open(folder / "server.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "syncswitch.node.forkserver", "--socket", path],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + 180
    while not os.path.exists(path):
        assert proc.poll() is None and time.time() < deadline, (folder / "server.log").read_text()[-2000:]
        time.sleep(0.1)
    yield path, proc
    proc.terminate()
    proc.wait(timeout=20)
    log.close()


def _task(server_path, tmp_path, **kw):
    log = open(tmp_path / "task.log", "ab")
    try:
        return ForkedProcess(server_path, "task", cwd=str(tmp_path), env=dict(os.environ), stderr_fd=log.fileno(), **kw)
    finally:
        log.close()


def test_a_forked_task_starts_warm_in_its_folder_and_exits_when_its_stdin_closes(server, tmp_path):
    path, _ = server
    started = time.time()
    task = _task(path, tmp_path)
    warm = codec.decode(task.stdout.readline(), pb.Event)  # the task's first event: TensorFlow is in
    assert codec.kind(warm) == "warm" and warm.warm.pid == task.pid
    assert time.time() - started < 5  # a fresh Python process needs seconds for TensorFlow alone
    child = psutil.Process(task.pid)
    assert child.cwd() == str(tmp_path)
    assert child.name() == "syncswitch-task"
    task.stdin.close()  # no launch: the task ends cleanly
    assert task.wait(timeout=30) == 0
    assert task.poll() == 0


def test_a_killed_task_reports_the_signal_like_popen(server, tmp_path):
    task = _task(server[0], tmp_path)
    task.stdout.readline()
    task.kill()
    assert task.wait(timeout=10) == -signal.SIGKILL
    with pytest.raises(subprocess.TimeoutExpired):
        _task(server[0], tmp_path).wait(timeout=0.01)  # one still running: wait times out


def test_a_clients_death_kills_the_tasks_it_asked_for(server, tmp_path):
    """As killing an agent's process group killed the tasks it spawned."""
    code = (f"import os, sys, time\nfrom syncswitch.wire.forkclient import ForkedProcess\n"
            f"t = ForkedProcess({server[0]!r}, 'task', cwd={str(tmp_path)!r}, env=dict(os.environ), stderr_fd=2)\n"
            f"print(t.pid, flush=True)\ntime.sleep(600)\n")
    client = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(client.stdout.readline())
        assert psutil.pid_exists(pid)
    finally:
        client.kill()
        client.wait()
    assert gone(pid), "the forked task outlived its client"


def test_unknown_entries_and_missing_servers_are_refused(server, tmp_path):
    with pytest.raises(ValueError, match="entry='shell': valid are task, evaluator"):
        ForkedProcess(server[0], "shell", cwd=str(tmp_path), env={}, stderr_fd=2)
    with pytest.raises(ForkServerError, match="no fork server at"):
        ForkedProcess(str(tmp_path / "none"), "task", cwd=str(tmp_path), env={}, stderr_fd=2, timeout_s=0.2)
    # A raw request naming another entry gets an error, and nothing is forked.
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(server[0])
    r, w = os.pipe()
    socket.send_fds(sock, [json.dumps({"entry": "os.system", "cwd": "/", "env": {}}).encode() + b"\n"], [r, w, w])
    os.close(r)
    os.close(w)
    assert "bad request" in json.loads(sock.makefile().readline())["error"]
    sock.close()


def test_stopping_the_server_ends_its_tasks_and_its_socket(tmp_path):
    path = str(tmp_path / "s")
    proc = subprocess.Popen([sys.executable, "-m", "syncswitch.node.forkserver", "--socket", path],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        task = _task(path, tmp_path)
        task.stdout.readline()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        assert task.wait(timeout=10) == -signal.SIGKILL
        assert not os.path.exists(path)
    finally:
        if proc.poll() is None:
            proc.kill()
