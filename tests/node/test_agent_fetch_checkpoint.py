"""FetchCheckpoint: chunked streaming of a node's checkpoint files, confined to the agent's work dir,
the client's atomic copy, node-local checkpoint folders, and the manager-side shipper's ordering."""

import os
import threading
import time

import grpc
import pytest

from syncswitch.cluster_manager.checkpoint_copies import CheckpointShipper
from syncswitch.wire.client import AgentClient
from syncswitch.errors import ClusterError
from syncswitch.node.agent import CHUNK_BYTES, Agent, AgentError, make_server
from syncswitch.wire import agent_pb2 as pb
from syncswitch.wire import agent_pb2_grpc as pb_grpc

TOKEN = "secret-token"
DATA = "model.ckpt-7.data-00000-of-00001"


def _write_checkpoint(folder, prefix="model.ckpt-7", data_bytes=2 * CHUNK_BYTES + 12345):
    os.makedirs(folder, exist_ok=True)
    payload = os.urandom(data_bytes)
    with open(os.path.join(folder, f"{prefix}.data-00000-of-00001"), "wb") as fh:
        fh.write(payload)
    with open(os.path.join(folder, f"{prefix}.index"), "wb") as fh:
        fh.write(b"index-bytes")
    return os.path.join(folder, prefix), payload


def _serve(agent):
    server, port = make_server(agent, TOKEN, "127.0.0.1", 0)
    server.start()
    return server, f"127.0.0.1:{port}"


@pytest.fixture
def served(tmp_path):
    agent = Agent(str(tmp_path / "work"), 0, 0, spare=False, prewarm=False)
    server, address = _serve(agent)
    yield agent, address
    agent.close()
    server.stop(0).wait()


def _stub(address):
    return pb_grpc.NodeAgentStub(grpc.insecure_channel(address))


def _fetch(address, prefix, metadata=(("x-syncswitch-token", TOKEN),)):
    return list(_stub(address).FetchCheckpoint(pb.FetchCheckpointRequest(prefix=prefix), metadata=metadata,
                                                timeout=10))


def test_checkpoint_streams_in_1mib_chunks_index_last(served):
    agent, address = served
    prefix, payload = _write_checkpoint(os.path.join(agent.work_dir, "checkpoints"))
    chunks = _fetch(address, prefix)
    assert [(c.name, c.offset, len(c.data), c.last) for c in chunks] == [
        (DATA, 0, CHUNK_BYTES, False), (DATA, CHUNK_BYTES, CHUNK_BYTES, False),
        (DATA, 2 * CHUNK_BYTES, 12345, True), ("model.ckpt-7.index", 0, len(b"index-bytes"), True)]
    assert b"".join(c.data for c in chunks[:3]) == payload
    # a prefix relative to the work dir names the same checkpoint
    assert [c.name for c in _fetch(address, "checkpoints/model.ckpt-7")][-1] == "model.ckpt-7.index"


def test_an_empty_file_is_one_empty_last_chunk(served):
    agent, address = served
    prefix, _ = _write_checkpoint(agent.work_dir, data_bytes=0)
    assert [(c.name, c.data, c.last) for c in _fetch(address, prefix)][0] == (DATA, b"", True)


def test_client_copies_the_checkpoint_atomically(served, tmp_path):
    agent, address = served
    prefix, payload = _write_checkpoint(os.path.join(agent.work_dir, "checkpoints"))
    client = AgentClient(0, address, TOKEN, timeout_s=5)
    dest = tmp_path / "run" / "checkpoints"
    local = client.fetch_checkpoint(prefix, str(dest))
    client.close()
    assert local == str(dest / "model.ckpt-7")
    assert sorted(os.listdir(dest)) == [DATA, "model.ckpt-7.index"]  # no temporary files left
    assert (dest / DATA).read_bytes() == payload
    assert (dest / "model.ckpt-7.index").read_bytes() == b"index-bytes"


@pytest.mark.parametrize("prefix", ["../outside/model.ckpt-7", "OUTSIDE/model.ckpt-7", "link/model.ckpt-7"])
def test_paths_outside_the_work_dir_are_refused(served, tmp_path, prefix):
    agent, address = served
    outside, _ = _write_checkpoint(str(tmp_path / "outside"))
    os.symlink(str(tmp_path / "outside"), os.path.join(agent.work_dir, "link"))
    with pytest.raises(grpc.RpcError) as info:
        _fetch(address, prefix.replace("OUTSIDE", str(tmp_path / "outside")))
    assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "outside the agent's work dir" in info.value.details()


def test_a_file_linking_out_of_the_work_dir_is_refused(served, tmp_path):
    agent, address = served
    _write_checkpoint(str(tmp_path / "outside"))
    os.symlink(str(tmp_path / "outside" / "model.ckpt-7.index"), os.path.join(agent.work_dir, "model.ckpt-7.index"))
    with pytest.raises(grpc.RpcError) as info:
        _fetch(address, "model.ckpt-7")
    assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_missing_checkpoint_and_empty_prefix(served, tmp_path):
    agent, address = served
    with pytest.raises(grpc.RpcError) as info:
        _fetch(address, os.path.join(agent.work_dir, "checkpoints", "model.ckpt-99"))
    assert info.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as info:
        _fetch(address, "")
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    client = AgentClient(0, address, TOKEN, timeout_s=5)
    with pytest.raises(ClusterError, match="FetchCheckpoint .* failed: NOT_FOUND"):
        client.fetch_checkpoint("checkpoints/model.ckpt-99", str(tmp_path / "dest"))
    client.close()
    assert os.listdir(tmp_path / "dest") == []


def test_the_token_is_required(served):
    agent, address = served
    prefix, _ = _write_checkpoint(agent.work_dir)
    for metadata in ((), (("x-syncswitch-token", "wrong"),)):
        with pytest.raises(grpc.RpcError) as info:
            _fetch(address, prefix, metadata=metadata)
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_a_broken_stream_leaves_no_partial_checkpoint(tmp_path):
    class Failing(Agent):
        def fetch_checkpoint(self, prefix):
            def chunks():
                yield pb.FileChunk(name="model.ckpt-7.data-00000-of-00001", offset=0, data=b"abc", last=True)
                raise AgentError(grpc.StatusCode.DATA_LOSS, "disk went away")
            return chunks()

    agent = Failing(str(tmp_path / "work"), 0, 0, spare=False, prewarm=False)
    server, address = _serve(agent)
    client = AgentClient(0, address, TOKEN, timeout_s=5)
    try:
        with pytest.raises(ClusterError, match="DATA_LOSS: disk went away"):
            client.fetch_checkpoint("model.ckpt-7", str(tmp_path / "dest"))
    finally:
        client.close()
        agent.close()
        server.stop(0).wait()
    assert os.listdir(tmp_path / "dest") == []


def test_checkpoint_dir_is_node_local_unless_absolute(tmp_path):
    agent = Agent(str(tmp_path / "work"), 0, 0, spare=False, prewarm=False)
    local = os.path.join(agent.work_dir, "checkpoints")
    assert agent.checkpoint_dir(None) == local and os.path.isdir(local)
    assert agent.checkpoint_dir(None) == local  # the same folder for every relaunch
    assert agent.checkpoint_dir("ckpt") == os.path.join(agent.work_dir, "ckpt")
    assert agent.checkpoint_dir("/shared/run/checkpoints") == "/shared/run/checkpoints"
    with pytest.raises(AgentError) as info:
        agent.checkpoint_dir("../elsewhere")
    assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT


def test_shipper_delivers_in_order_and_reports_failures(tmp_path):
    class SlowClient:
        index = 0

        def fetch_checkpoint(self, prefix, dest_dir):
            time.sleep({"a": 0.2, "b": 0.0, "c": 0.05}.get(prefix, 0))
            if prefix == "bad":
                raise ClusterError("NOT_FOUND")
            return os.path.join(dest_dir, prefix)

    got, errors, closed = [], [], threading.Event()
    shipper = CheckpointShipper(SlowClient(), str(tmp_path), on_error=errors.append)
    for prefix in ("a", "bad", "b", "c"):
        shipper.ship(prefix, got.append)
    shipper.then(closed.set)
    assert closed.wait(5)
    assert got == [str(tmp_path / p) for p in ("a", "b", "c")]
    assert len(errors) == 1 and "cannot copy checkpoint bad from node 0" in errors[0]
