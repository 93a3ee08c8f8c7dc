"""The loopback limit of `bench peers --loopback-mbit`: its tc commands through a recording fake, then for real."""

import socket
import subprocess
import threading
import time
from types import SimpleNamespace

import pytest

from bench import loopback

SHOWN = ("qdisc tbf 8002: root refcnt 2 rate 200Mbit burst 262125b lat 2s \n Sent 50079745 bytes 1208 pkt "
         "(dropped 0, overlimits 1199 requeues 0) \n backlog 0b 0p requeues 0\n")
NONE = "qdisc noqueue 0: root refcnt 2 \n"


class FakeTc:
    """`subprocess.run` for `tc`: records each command; `show` answers with the qdisc now on lo."""

    def __init__(self, present=NONE):
        self.present, self.calls = present, []

    def __call__(self, cmd, **_):
        self.calls.append(cmd[1:])
        if "add" in cmd:
            self.present = SHOWN
        elif "del" in cmd:
            self.present = NONE
        return SimpleNamespace(returncode=0, stdout=self.present if "show" in cmd else "", stderr="")


def test_the_bytes_sent_are_read_from_tc_s():
    assert loopback.parse_sent(SHOWN) == 50079745
    assert loopback.parse_sent(NONE) is None


def test_no_limit_asked_touches_nothing():
    tc = FakeTc()
    with loopback.limited(None, run=tc) as got:
        assert got is None
    assert tc.calls == []


def test_the_limit_is_added_and_removed_even_when_the_part_fails():
    tc = FakeTc()
    with pytest.raises(RuntimeError), loopback.limited(50, run=tc, is_root=True) as got:
        assert got["loopback_mbit"] == 50 and "tbf" in got["qdisc"]
        assert loopback.sent_bytes(run=tc) == 50079745
        raise RuntimeError("a run failed")
    assert ["qdisc", "add", "dev", "lo", "root", "tbf", "rate", "50mbit", "burst", "256kb", "latency", "4s"] in tc.calls
    assert tc.calls[-1] == ["qdisc", "del", "dev", "lo", "root"]
    assert loopback.sent_bytes(run=tc) is None


def test_another_qdisc_on_lo_is_never_replaced_and_root_is_needed():
    theirs = FakeTc(present="qdisc netem 8001: root refcnt 2 limit 1000 delay 1ms\n")
    with pytest.raises(SystemExit, match="lo already has a qdisc .*netem"), loopback.limited(50, run=theirs,
                                                                                          is_root=True):
        pass
    assert not any("add" in c or "del" in c for c in theirs.calls)
    with pytest.raises(SystemExit, match="--loopback-mbit: needs root"), loopback.limited(50, run=FakeTc(),
                                                                                       is_root=False):
        pass


def _rate_mbit(size: int) -> float:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)

        def drain():
            conn, _ = server.accept()
            with conn:
                got = 0
                while got < size:
                    got += len(conn.recv(1 << 20) or b"x" * size)
                conn.sendall(b"k")

        thread = threading.Thread(target=drain)
        thread.start()
        with socket.create_connection(server.getsockname()) as client:
            began = time.perf_counter()
            client.sendall(b"\0" * size)
            client.recv(1)
            took = time.perf_counter() - began
        thread.join()
    return size * 8 / took / 1e6


@pytest.mark.slow
def test_a_real_limit_holds_the_loopbacks_rate_and_is_gone_after():
    with loopback.limited(200) as got:
        before = loopback.sent_bytes()
        rate = _rate_mbit(20_000_000)
        assert loopback.sent_bytes() - before >= 20_000_000
    assert got["loopback_mbit"] == 200
    assert 150 <= rate <= 260, rate
    shown = subprocess.run(["tc", "qdisc", "show", "dev", "lo"], capture_output=True, text=True, check=True).stdout
    assert "tbf" not in shown


@pytest.mark.slow
def test_a_bench_killed_by_sigterm_lifts_its_limit_and_dies_of_the_signal(tmp_path):
    import os
    import signal
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    script = tmp_path / "held.py"
    script.write_text("import time\nfrom bench import loopback\nwith loopback.limited(100):\n"
                      "    print('set', flush=True)\n    time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": root})
    assert proc.stdout.readline().strip() == "set"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == -signal.SIGTERM
    shown = subprocess.run(["tc", "qdisc", "show", "dev", "lo"], capture_output=True, text=True, check=True).stdout
    assert "tbf" not in shown
