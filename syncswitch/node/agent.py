"""The per-node agent: a token-checked gRPC service that runs, commands and streams the node's training task.

Entry point on every node (local processes and cloud VMs alike):
    python -m syncswitch.node.agent --host HOST --port PORT --ps-port P --worker-port W --work-dir DIR
with the job token in $SYNCSWITCH_TOKEN or --token-file.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import hmac
import os
import shutil
import signal
import tempfile
import threading
import time
import zipfile
from concurrent import futures

import grpc

from syncswitch import __version__
from syncswitch.files import inside, write_bytes_atomic
from syncswitch.node.task_process import AgentError, TaskProcess
from syncswitch.wire import agent_pb2 as pb
from syncswitch.wire import agent_pb2_grpc as pb_grpc
from syncswitch.wire import bundle as bundlemod
from syncswitch.wire import codec
from syncswitch.wire.client import server_keepalive_options
from syncswitch.wire.token import TOKEN_HEADER

CHUNK_BYTES = 1 << 20  # FetchCheckpoint's chunk size: well under gRPC's 4 MiB message limit


class Agent:
    """Domain logic: one current task, a warm spare for relaunches, and a replayable event log."""

    def __init__(self, work_dir: str, ps_port: int, worker_port: int, spare: bool = True, prewarm: bool = True,
                 chunk_bytes: int = CHUNK_BYTES, fork_server: str | None = None, cgroup_procs: str | None = None):
        self.work_dir = os.path.abspath(work_dir)
        # With a fork server every task starts warm in milliseconds: no spare process need wait beside it.
        self.fork_server, self.cgroup_procs = fork_server, cgroup_procs
        if fork_server:
            spare = prewarm = False
        self.chunk_bytes = chunk_bytes
        self.ps_port = ps_port
        self.worker_port = worker_port
        self.keep_spare = spare
        self.events: list[pb.Event] = []
        self.cond = threading.Condition()
        self.task: TaskProcess | None = None
        self.spare: TaskProcess | None = None
        self.closed = False
        self._spare_due = False
        os.makedirs(self.work_dir, exist_ok=True)
        if prewarm:  # TF imports for seconds: start now, while the manager provisions the other nodes
            self.spare = TaskProcess(self.work_dir, self._on_event)

    def _on_event(self, task: TaskProcess, event: pb.Event) -> None:
        name = codec.kind(event)
        if self._spare_due and task is self.task and name == "first_step":
            # Only now: a spare importing TensorFlow while the nodes build graphs and restore
            # would compete with them for the CPU, at start and at every relaunch.
            with self.cond:
                if self._spare_due and not self.closed:
                    self._spare_due = False
                    self.spare = TaskProcess(self.work_dir, self._on_event, nice=10)
        if task is not self.task or name == "warm":
            return  # a replaced task's last words, or a spare done importing TF: not this node's news
        with self.cond:
            event.seq = len(self.events)
            self.events.append(event)
            self.cond.notify_all()

    def launch(self, script_name: str, source: bytes, request_launch: pb.Launch,
               bundle: bytes = b"") -> pb.LaunchTaskReply:
        if self.closed:
            raise AgentError(grpc.StatusCode.UNAVAILABLE, "agent is shutting down")
        script_dir = os.path.join(self.work_dir, "script")
        if bundle:
            path = self._unpack(script_dir, script_name, bundle)
        elif os.path.isabs(script_name):
            # The manager shares this filesystem and names the script where it is (its folder was too large to ship).
            if not os.path.isfile(script_name):
                raise AgentError(grpc.StatusCode.INVALID_ARGUMENT, f"script {script_name}: no such file on this node")
            path = script_name
        else:
            os.makedirs(script_dir, exist_ok=True)
            path = os.path.join(script_dir, os.path.basename(script_name) or "train.py")
            write_bytes_atomic(path, source)
        launch = pb.Launch()
        launch.CopyFrom(request_launch)
        launch.script_path = path
        launch.checkpoint_dir = self.checkpoint_dir(launch.checkpoint_dir)
        old, self.task = self.task, None  # its exit is expected: keep it off the event log
        if old is not None:
            old.stop()
        task = self.spare if self.spare is not None and self.spare.proc.poll() is None else None
        if task is None:
            task = TaskProcess(self.work_dir, self._on_event, fork_server=self.fork_server,
                               cgroup_procs=self.cgroup_procs)
        self.spare = None
        task.launched = True
        self.task = task
        task.send(launch)
        # The next spare starts once this task trains (see _on_event), niced so its TF import does
        # not slow training much; the task resets its priority when launched, where it may.
        self._spare_due = self.keep_spare
        return pb.LaunchTaskReply(pid=task.proc.pid, warm_s=time.time() - task.started)

    def _unpack(self, script_dir: str, script_name: str, bundle: bytes) -> str:
        """The script's folder from its bundle, in place of the last one; the script's path in it."""
        path = os.path.join(script_dir, script_name)
        if not script_name or os.path.isabs(script_name) or not inside(path, script_dir):
            raise AgentError(grpc.StatusCode.INVALID_ARGUMENT, f"script {script_name!r} is not inside its bundle")
        digest = hashlib.sha256(bundle).hexdigest()
        stamp = os.path.join(self.work_dir, "script.sha256")
        try:
            with open(stamp, encoding="ascii") as fh:
                if fh.read() == digest and os.path.isfile(path):
                    return path  # a relaunch or a recovery sends the same folder again
        except FileNotFoundError:
            pass
        fresh = tempfile.mkdtemp(prefix="script.", dir=self.work_dir)
        try:
            bundlemod.unpack(bundle, fresh)
        except (ValueError, OSError, zipfile.BadZipFile) as exc:
            shutil.rmtree(fresh, ignore_errors=True)
            raise AgentError(grpc.StatusCode.INVALID_ARGUMENT, f"cannot unpack the script's folder: {exc}") from None
        shutil.rmtree(script_dir, ignore_errors=True)
        os.replace(fresh, script_dir)
        write_bytes_atomic(stamp, digest.encode("ascii"))
        if not os.path.isfile(path):
            raise AgentError(grpc.StatusCode.INVALID_ARGUMENT, f"the bundle holds no {script_name!r}")
        return path

    def checkpoint_dir(self, requested: str | None) -> str:
        """Where the task writes checkpoints: an absolute path is the manager's (a shared filesystem);
        none or a relative one is node-local, under the work dir, the same for every relaunch."""
        if requested and os.path.isabs(requested):
            return requested
        path = os.path.normpath(os.path.join(self.work_dir, requested or "checkpoints"))
        if not inside(path, self.work_dir):
            raise AgentError(grpc.StatusCode.INVALID_ARGUMENT,
                             f"checkpoint_dir {requested!r} leaves the agent's work dir")
        os.makedirs(path, exist_ok=True)
        return path

    def checkpoint_files(self, prefix: str) -> list[str]:
        """The files of the checkpoint at `prefix`, data files first and the .index last.

        Only files inside the work dir are served, whatever links or `..` the prefix holds.
        """
        if not prefix or "\0" in prefix:
            raise AgentError(grpc.StatusCode.INVALID_ARGUMENT, "no checkpoint prefix given")
        full = os.path.normpath(os.path.join(self.work_dir, prefix))
        if not inside(full, self.work_dir):
            raise AgentError(grpc.StatusCode.PERMISSION_DENIED,
                             f"{prefix} is outside the agent's work dir; only its checkpoints are served")
        index = full + ".index"
        if not os.path.isfile(index):
            raise AgentError(grpc.StatusCode.NOT_FOUND, f"no checkpoint at {prefix} ({index} is missing)")
        files = sorted(glob.glob(glob.escape(full) + ".data-*-of-*")) + [index]
        for path in files:
            if not inside(path, self.work_dir):
                raise AgentError(grpc.StatusCode.PERMISSION_DENIED, f"{path} links outside the agent's work dir")
        return files

    def fetch_checkpoint(self, prefix: str):
        """FileChunks of every file of a checkpoint; validation errors raise before the first chunk."""
        files = self.checkpoint_files(prefix)

        def chunks():
            for path in files:
                name = os.path.basename(path)
                with open(path, "rb") as fh:
                    size, offset = os.fstat(fh.fileno()).st_size, 0
                    while True:
                        data = fh.read(min(self.chunk_bytes, size - offset))
                        if offset + len(data) < size and not data:
                            raise AgentError(grpc.StatusCode.DATA_LOSS, f"{path} shrank while being read")
                        yield pb.FileChunk(name=name, offset=offset, data=data, last=offset + len(data) >= size)
                        offset += len(data)
                        if offset >= size:
                            break
        return chunks()

    def command(self, cmd: pb.Command) -> None:
        if self.task is None:
            raise AgentError(grpc.StatusCode.FAILED_PRECONDITION, "no training task has been launched")
        self.task.send(cmd)

    def stop_task(self, grace_s: float) -> int:
        task, self.task = self.task, None
        return task.stop(grace_s or 2.0) if task is not None else 0

    def status(self) -> pb.StatusReply:
        task = self.task
        if task is None:
            state, pid, code = (pb.TASK_STATE_WARMING if self.spare else pb.TASK_STATE_IDLE), 0, 0
        else:
            code = task.proc.poll()
            state, pid = (pb.TASK_STATE_RUNNING if code is None else pb.TASK_STATE_EXITED), task.proc.pid
        return pb.StatusReply(state=state, task_pid=pid, exit_code=code or 0, events=len(self.events),
                              version=__version__)

    def stream(self, from_seq: int, context):
        seq = max(0, from_seq)
        while context.is_active():
            with self.cond:
                while seq >= len(self.events) and not self.closed and context.is_active():
                    self.cond.wait(timeout=0.5)
                batch = self.events[seq:]
                closed = self.closed
            for event in batch:
                yield event
                seq += 1
            if closed and not batch:
                return

    def close(self) -> None:
        with self.cond:  # first, so no spare is started behind our back
            self.closed = True
            self._spare_due = False
            self.cond.notify_all()
        for task in (self.task, self.spare):
            if task is not None:
                task.stop(grace_s=1.0)


# Streaming methods need a streaming refusal; read from the service so a new method cannot be missed.
_SERVER_STREAMING = frozenset(f"/{m.containing_service.full_name}/{m.name}"
                              for m in pb.DESCRIPTOR.services_by_name["NodeAgent"].methods if m.server_streaming)


class TokenInterceptor(grpc.ServerInterceptor):
    """Refuses every call that does not carry the job token."""

    def __init__(self, token: str):
        self._token = token.encode()

        def deny(request, context):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong job token")

        self._deny = grpc.unary_unary_rpc_method_handler(deny)
        self._deny_stream = grpc.unary_stream_rpc_method_handler(deny)

    def intercept_service(self, continuation, handler_call_details):
        presented = dict(handler_call_details.invocation_metadata or ()).get(TOKEN_HEADER, "")
        if hmac.compare_digest(presented.encode(), self._token):
            return continuation(handler_call_details)
        return self._deny_stream if handler_call_details.method in _SERVER_STREAMING else self._deny


class AgentServicer(pb_grpc.NodeAgentServicer):
    """Thin adapter: decode requests, call the Agent, map AgentError to a status code."""

    def __init__(self, agent: Agent, on_shutdown):
        self.agent = agent
        self.on_shutdown = on_shutdown

    def _call(self, context, fn, *args):
        try:
            return fn(*args)
        except AgentError as exc:
            context.abort(exc.code, str(exc))
        except (ValueError, KeyError) as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{type(exc).__name__}: {exc}")

    def LaunchTask(self, request, context):
        return self._call(context, self.agent.launch, request.script_name, request.script_source, request.launch,
                          request.bundle)

    def Control(self, request, context):
        self._call(context, self.agent.command, request)
        return pb.ControlReply(delivered=True)

    def StopTask(self, request, context):
        return pb.StopTaskReply(exit_code=self._call(context, self.agent.stop_task, request.grace_s))

    def Status(self, request, context):
        return self.agent.status()

    def StreamEvents(self, request, context):
        yield from self.agent.stream(request.from_seq, context)

    def FetchCheckpoint(self, request, context):
        chunks = self._call(context, self.agent.fetch_checkpoint, request.prefix)
        try:
            yield from chunks
        except AgentError as exc:
            context.abort(exc.code, str(exc))
        except OSError as exc:  # a file went away or could not be read mid-stream
            code = grpc.StatusCode.NOT_FOUND if isinstance(exc, FileNotFoundError) else grpc.StatusCode.INTERNAL
            context.abort(code, f"reading checkpoint {request.prefix}: {exc}")

    def Shutdown(self, request, context):
        threading.Thread(target=self.on_shutdown, daemon=True).start()
        return pb.ShutdownReply()


def make_server(agent: Agent, token: str, host: str, port: int, on_shutdown=lambda: None):
    """A started-later gRPC server for `agent` bound to host:port (port 0 picks a free one)."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16), interceptors=[TokenInterceptor(token)],
                         options=[("grpc.so_reuseport", 0),
                                  # A launch request carries the script's folder (wire/bundle.py, up to its limit).
                                  ("grpc.max_receive_message_length", 2 * bundlemod.LIMIT_BYTES),
                                  # the manager's pings, which tell it this node is still there
                                  *server_keepalive_options()])
    pb_grpc.add_NodeAgentServicer_to_server(AgentServicer(agent, on_shutdown), server)
    try:
        bound = server.add_insecure_port(f"{host}:{port}")
    except RuntimeError:  # newer grpcio raises where older ones returned 0
        bound = 0
    if bound == 0:
        raise OSError(f"cannot listen on {host}:{port} (address in use?)")
    return server, bound


def _read_token(args) -> str:
    if args.token_file:
        with open(args.token_file, encoding="utf-8") as fh:
            return fh.read().strip()
    token = os.environ.get("SYNCSWITCH_TOKEN", "")
    if not token:
        raise SystemExit("syncswitch agent: no job token (set SYNCSWITCH_TOKEN or pass --token-file)")
    return token


def _exit_with(pid: int, done: threading.Event) -> None:
    """Set `done` once process `pid` is gone (polled every second)."""
    while not done.wait(1.0):
        if not os.path.exists(f"/proc/{pid}"):
            done.set()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="syncswitch-agent", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ps-port", type=int, required=True)
    parser.add_argument("--worker-port", type=int, required=True)
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--token-file")
    parser.add_argument("--no-spare", action="store_true", help="Do not keep a warm spare task (no relaunches).")
    parser.add_argument("--manager-pid", type=int, help="Exit, ending the task, once this process is gone (local).")
    parser.add_argument("--fork-server", help="Fork training tasks from the fork server at this Unix socket "
                        "(syncswitch.node.forkserver) instead of starting a Python process for each.")
    parser.add_argument("--task-cgroup", help="cgroup.procs file a forked task joins (the node's CPU budget).")
    args = parser.parse_args(argv)
    token = _read_token(args)
    os.environ.pop("SYNCSWITCH_TOKEN", None)
    agent = Agent(args.work_dir, args.ps_port, args.worker_port, spare=not args.no_spare,
                  fork_server=args.fork_server, cgroup_procs=args.task_cgroup)
    done = threading.Event()
    try:
        server, _ = make_server(agent, token, args.host, args.port, on_shutdown=done.set)
    except OSError as exc:
        agent.close()
        raise SystemExit(f"syncswitch agent: {exc}") from None
    server.start()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    print(f"syncswitch agent listening on {args.host}:{args.port}", flush=True)
    if args.manager_pid:  # a manager killed without teardown must not leave its nodes training on
        threading.Thread(target=_exit_with, args=(args.manager_pid, done), daemon=True).start()
    done.wait()
    agent.close()
    server.stop(grace=0.5).wait(2)


if __name__ == "__main__":
    main()
