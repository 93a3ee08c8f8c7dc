"""The agent's gRPC service: token enforcement, status codes of the thin servicer, and the event replay."""

import os

import grpc
import pytest

from syncswitch.wire.client import AgentClient
from syncswitch.errors import ClusterError
from syncswitch.node.agent import Agent, make_server
from syncswitch.wire import agent_pb2 as pb
from syncswitch.wire import agent_pb2_grpc as pb_grpc
from syncswitch.wire import codec


@pytest.fixture
def served(tmp_path):
    agent = Agent(str(tmp_path), 0, 0, spare=False, prewarm=False)
    server, port = make_server(agent, "secret-token", "127.0.0.1", 0)
    server.start()
    yield agent, f"127.0.0.1:{port}"
    agent.close()
    server.stop(0).wait()


def test_calls_without_the_token_are_refused(served):
    _, address = served
    stub = pb_grpc.NodeAgentStub(grpc.insecure_channel(address))
    with pytest.raises(grpc.RpcError) as info:
        stub.Status(pb.StatusRequest(), timeout=5)
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
    with pytest.raises(grpc.RpcError) as info:
        stub.Status(pb.StatusRequest(), metadata=(("x-syncswitch-token", "wrong"),), timeout=5)
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
    with pytest.raises(grpc.RpcError) as info:
        list(stub.StreamEvents(pb.StreamEventsRequest(), timeout=5))
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_status_and_domain_errors_map_to_codes(served):
    _, address = served
    client = AgentClient(0, address, "secret-token", timeout_s=5)
    status = client.status()
    assert status.state == pb.TASK_STATE_IDLE and status.version
    with pytest.raises(ClusterError, match="FAILED_PRECONDITION: no training task has been launched"):
        client.control(codec.command(go=pb.Go(phase=0, protocol="bsp", until=0.5)))
    client.close()


def test_events_replay_from_a_sequence_number(served):
    agent, address = served
    for i in range(3):
        agent.events.append(pb.Event(seq=i, metrics=pb.Metrics(local_steps=10 * i)))
    client = AgentClient(0, address, "secret-token")
    stream = client.events(from_seq=1)
    got = [next(stream), next(stream)]
    assert [(e.seq, e.metrics.local_steps) for e in got] == [(1, 10), (2, 20)]
    client.close()


def test_a_port_in_use_is_reported(served, tmp_path):
    _, address = served
    port = int(address.rsplit(":", 1)[1])
    other = Agent(str(tmp_path / "b"), 0, 0, spare=False, prewarm=False)
    with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}"):
        make_server(other, "t", "127.0.0.1", port)


def test_a_bundle_replaces_the_script_folder_and_a_resend_is_not_unpacked_again(tmp_path):
    from syncswitch.wire import bundle

    src = tmp_path / "proj"
    (src / "data").mkdir(parents=True)
    (src / "train.py").write_text("v1")
    (src / "data" / "x.csv").write_text("1")
    agent = Agent(str(tmp_path / "node"), 0, 0, spare=False, prewarm=False)
    script_dir = str(tmp_path / "node" / "script")
    made = bundle.make(str(src / "train.py"), str(src))
    path = agent._unpack(script_dir, made.script_name, made.data)
    assert open(path).read() == "v1" and open(os.path.join(script_dir, "data", "x.csv")).read() == "1"
    stamp = os.path.getmtime(path)
    assert agent._unpack(script_dir, made.script_name, made.data) == path and os.path.getmtime(path) == stamp
    (src / "train.py").write_text("v2")
    (src / "data" / "x.csv").unlink()
    made = bundle.make(str(src / "train.py"), str(src))
    assert open(agent._unpack(script_dir, made.script_name, made.data)).read() == "v2"
    assert not os.path.exists(os.path.join(script_dir, "data", "x.csv"))  # the old folder went, not merged
    agent.close()


def test_a_script_name_outside_its_bundle_is_an_invalid_argument(served):
    from syncswitch.wire import bundle  # noqa: F401 - the request carries a real (empty-folder) zip

    _, address = served
    client = AgentClient(0, address, "secret-token", timeout_s=5)
    with pytest.raises(ClusterError, match="INVALID_ARGUMENT: script '../x.py' is not inside its bundle"):
        client.launch("../x.py", b"", pb.Launch(), bundle=b"PK\x05\x06" + b"\x00" * 18)
    client.close()


def _agent_process(tmp_path):
    """A real agent server in a process of its own (no training task), and its address."""
    import subprocess
    import sys

    code = ("import sys, threading\nfrom syncswitch.node.agent import Agent, make_server\n"
            f"agent = Agent({str(tmp_path)!r}, 0, 0, spare=False, prewarm=False)\n"
            "server, port = make_server(agent, 'secret-token', '127.0.0.1', 0)\nserver.start()\n"
            "print(port, flush=True)\nthreading.Event().wait()\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    return proc, f"127.0.0.1:{int(proc.stdout.readline())}"


def test_a_frozen_agent_breaks_its_event_stream_within_the_keepalive(tmp_path):
    """A node that vanishes sends no reset (a frozen process stands in for a machine gone off the network: the
    kernel still holds its socket open, but nothing answers): the manager's pings break the stream, a lost node,
    instead of a stream that waits forever. The agent's server admits pings this often (no GOAWAY)."""
    import signal
    import threading
    import time

    proc, address = _agent_process(tmp_path)
    client = AgentClient(0, address, "secret-token", keepalive_s=0.5, keepalive_timeout_s=1.0)
    broke: list = []

    def follow():
        try:
            for _ in client.events():
                pass
        except ClusterError as exc:
            broke.append((time.time(), str(exc)))

    try:
        threading.Thread(target=follow, daemon=True).start()
        assert client.status(timeout_s=10).state == pb.TASK_STATE_IDLE
        time.sleep(3.0)  # pings answered for several intervals: no GOAWAY, the stream stays open
        assert not broke, broke
        proc.send_signal(signal.SIGSTOP)
        frozen = time.time()
        deadline = frozen + 20
        while not broke and time.time() < deadline:
            time.sleep(0.1)
        assert broke, "the stream to a frozen agent did not break"
        when, message = broke[0]
        assert when - frozen < 10, when - frozen
        assert "event stream broke: UNAVAILABLE" in message
    finally:
        client.close()
        proc.kill()
        proc.wait()
