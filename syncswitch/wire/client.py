"""The typed client of a node agent: one stub with the job token attached to every call."""

from __future__ import annotations

import os
import secrets

import grpc

from syncswitch.errors import ClusterError
from syncswitch.wire import agent_pb2 as pb
from syncswitch.wire import agent_pb2_grpc as pb_grpc
from syncswitch.wire.token import TOKEN_HEADER


# A node that vanishes (a machine powered off, a network cut) sends no reset: without pings, its event stream would
# wait for TCP's own timeouts, many minutes. With them the stream breaks about KEEPALIVE_S + its timeout after the
# last answer, and the manager treats the node as lost. The agent's server admits pings this often.
KEEPALIVE_S = 5.0
KEEPALIVE_TIMEOUT_S = 10.0  # generous: a loaded machine may take seconds to answer, and a false loss costs a restart


def keepalive_options(every_s: float = KEEPALIVE_S, timeout_s: float = KEEPALIVE_TIMEOUT_S) -> list[tuple]:
    """The client channel's options: ping every `every_s` while a call (the event stream) is open, even when no
    data flows (a long graph build), and give up after `timeout_s` without an answer."""
    return [("grpc.keepalive_time_ms", int(every_s * 1000)), ("grpc.keepalive_timeout_ms", int(timeout_s * 1000)),
            ("grpc.http2.max_pings_without_data", 0), ("grpc.http2.ping_timeout_ms", int(timeout_s * 1000))]


def server_keepalive_options(min_every_s: float = 1.0) -> list[tuple]:
    """The agent server's options: admit a client's pings as often as every `min_every_s`, without data, and never
    answer them with GOAWAY (gRPC's defaults allow one every 5 minutes)."""
    return [("grpc.http2.min_recv_ping_interval_without_data_ms", int(min_every_s * 1000)),
            ("grpc.http2.max_ping_strikes", 0)]


class AgentClient:
    """One agent's stub with the job token attached to every call."""

    def __init__(self, index: int, address: str, token: str, timeout_s: float = 30.0,
                 keepalive_s: float = KEEPALIVE_S, keepalive_timeout_s: float = KEEPALIVE_TIMEOUT_S):
        self.index = index
        self.address = address
        self.timeout_s = timeout_s
        self._metadata = ((TOKEN_HEADER, token),)
        self._channel = grpc.insecure_channel(address, options=keepalive_options(keepalive_s, keepalive_timeout_s))
        self._stub = pb_grpc.NodeAgentStub(self._channel)

    def _call(self, method: str, request, timeout_s: float | None = None):
        try:
            return getattr(self._stub, method)(request, metadata=self._metadata,
                                               timeout=timeout_s or self.timeout_s)
        except grpc.RpcError as exc:
            raise ClusterError(f"node {self.index} agent {self.address}: {method} failed: "
                               f"{exc.code().name}: {exc.details()}") from None

    def status(self, timeout_s: float | None = None) -> pb.StatusReply:
        return self._call("Status", pb.StatusRequest(), timeout_s)

    def launch(self, script_name: str, source: bytes, launch: pb.Launch, bundle: bytes = b"") -> pb.LaunchTaskReply:
        request = pb.LaunchTaskRequest(script_name=script_name, script_source=source, launch=launch, bundle=bundle)
        return self._call("LaunchTask", request)

    def control(self, command: pb.Command) -> None:
        """Deliver one command to the node's task."""
        self._call("Control", command)

    def stop_task(self, grace_s: float = 2.0) -> int:
        return self._call("StopTask", pb.StopTaskRequest(grace_s=grace_s), timeout_s=grace_s + 10).exit_code

    def shutdown(self) -> None:
        self._call("Shutdown", pb.ShutdownRequest(), timeout_s=5)

    def fetch_checkpoint(self, prefix: str, dest_dir: str, timeout_s: float = 600.0) -> str:
        """Copy the node's checkpoint at `prefix` into `dest_dir`; returns the local prefix.

        Files arrive under temporary names and are renamed once all have arrived, the .index last:
        a reader that restores from the local prefix never sees part of a checkpoint.
        """
        base = os.path.basename(prefix.rstrip("/"))
        os.makedirs(dest_dir, exist_ok=True)
        tag = secrets.token_hex(4)
        temps: dict[str, str] = {}   # file name -> temporary path
        done: set[str] = set()
        handle, current, stream = None, None, None
        try:
            stream = self._stub.FetchCheckpoint(pb.FetchCheckpointRequest(prefix=prefix), metadata=self._metadata,
                                                timeout=timeout_s)
            for chunk in stream:
                name = chunk.name
                if name != os.path.basename(name) or not name.startswith(base + ".") or name in done:
                    raise ClusterError(f"node {self.index} agent {self.address}: unexpected file {name!r} "
                                       f"in checkpoint {prefix}")
                if name != current:
                    if handle is not None:
                        raise ClusterError(f"node {self.index} agent {self.address}: {current} of checkpoint "
                                           f"{prefix} ended without its last chunk")
                    temps[name] = os.path.join(dest_dir, f".{name}.{tag}.part")
                    handle, current = open(temps[name], "wb"), name
                if chunk.offset != handle.tell():
                    raise ClusterError(f"node {self.index} agent {self.address}: {name} of checkpoint {prefix}: "
                                       f"chunk at offset {chunk.offset}, expected {handle.tell()}")
                handle.write(chunk.data)
                if chunk.last:
                    handle.close()
                    handle, current = None, None
                    done.add(name)
            index = base + ".index"
            if handle is not None or index not in done:
                raise ClusterError(f"node {self.index} agent {self.address}: checkpoint {prefix} arrived incomplete")
            for name in sorted(done, key=lambda n: n == index):  # the .index last
                os.replace(temps.pop(name), os.path.join(dest_dir, name))
            return os.path.join(dest_dir, base)
        except grpc.RpcError as exc:
            raise ClusterError(f"node {self.index} agent {self.address}: FetchCheckpoint {prefix} failed: "
                               f"{exc.code().name}: {exc.details()}") from None
        finally:
            if stream is not None:
                stream.cancel()  # a no-op once the stream has ended; frees the call after an early exit
            if handle is not None:
                handle.close()
            for path in temps.values():
                try:
                    os.unlink(path)
                except OSError:
                    pass

    def events(self, from_seq: int = 0):
        """Yield Events until the stream ends; raises ClusterError if the agent goes away."""
        stream = self._stub.StreamEvents(pb.StreamEventsRequest(from_seq=from_seq), metadata=self._metadata)
        self._stream = stream
        try:
            yield from stream
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.CANCELLED:
                return
            raise ClusterError(f"node {self.index} agent {self.address}: event stream broke: "
                               f"{exc.code().name}: {exc.details()}") from None

    def close(self) -> None:
        stream = getattr(self, "_stream", None)
        if stream is not None:
            stream.cancel()
        self._channel.close()
