"""The readiness wait every agent-starting backend shares: a real process, a real listening socket."""

import socket
import subprocess
import sys
import time

import pytest

from syncswitch.backends import readiness
from syncswitch.errors import ClusterError


def _listens(port: int):
    def probe() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
            return True
        except OSError:
            return False
    return probe


def test_returns_once_the_process_listens(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = f"import socket,time; s=socket.socket(); time.sleep(0.5); s.bind(('127.0.0.1',{port})); s.listen(); " \
           "time.sleep(30)"
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        started = time.time()
        readiness.wait_ready("node 0 agent", _listens(port), proc.poll, 20, str(tmp_path))
        assert 0.4 < time.time() - started < 15
    finally:
        proc.kill()
        proc.wait()


def test_an_agent_that_exits_first_is_named_with_its_last_log_line(tmp_path):
    (tmp_path / "agent.log").write_text("starting\nsyncswitch agent: [Errno 98] Address already in use\n\n")
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    with pytest.raises(ClusterError) as info:
        readiness.wait_ready("node 2 agent", lambda: False, proc.poll, 20, str(tmp_path))
    assert str(info.value) == "node 2 agent exited with code 3 before answering: " \
                              "syncswitch agent: [Errno 98] Address already in use"


def test_an_agent_that_never_answers_times_out_in_bounded_time(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        started = time.time()
        with pytest.raises(ClusterError, match=r"^node 1 agent did not answer within 1 s: no log$"):
            readiness.wait_ready("node 1 agent", lambda: False, proc.poll, 1.0, str(tmp_path))
        assert time.time() - started < 5
    finally:
        proc.kill()
        proc.wait()
