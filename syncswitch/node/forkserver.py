"""A fork server: one process per machine imports TensorFlow once, then forks every training task from it.

Importing TensorFlow costs each process about 4 CPU-seconds. On one machine with n local nodes, n tasks and the
evaluator each paid it at once (five imports on the reference machine's 2 cores: 8-9 s of a 12 s start-up), and
every relaunch or recovery paid it again. A forked child starts with TensorFlow already imported, in
milliseconds. Nothing TensorFlow runs before the fork (no session, server or graph), which is what makes forking
safe: the parent holds no TensorFlow state or locks a child could inherit half-taken.

Run as `python -m syncswitch.node.forkserver --socket PATH [--manager-pid PID]`; the socket appears once the
imports are done. A client (`ForkedProcess`, syncswitch/wire/forkclient.py) sends one JSON request and its stdin,
stdout and stderr descriptors over a connection; the server forks, answers `{"pid": N}`, and later
`{"exit": CODE}`. A task lives only as long as its connection: when the client (the node's agent) dies, the server
kills the tasks it asked for, as killing an agent's process group kills the tasks it spawned. Children die with the
server too (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import signal
import socket
import struct
import sys
import time

from syncswitch.wire.forkclient import ENTRIES, PRIVATE_PREFIX


# -- the server side -----------------------------------------------------------------------------

# The environment TensorFlow was imported under here. A child takes its requester's environment, and these on top:
# TF reads some of them lazily, long after the import (TF_USE_LEGACY_KERAS when a script first touches
# tf.compat.v1.layers), and a child without them got Keras 3 there ("`dense` is not available with Keras 3").
RUNTIME_ENV: dict[str, str] = {}


def warm_up() -> None:
    """Import what every child needs, and nothing that starts TensorFlow's runtime."""
    for key, default in (("TF_USE_LEGACY_KERAS", "1"), ("TF_CPP_MIN_LOG_LEVEL", "2")):
        RUNTIME_ENV[key] = os.environ.setdefault(key, default)
    import tensorflow as tf

    # In the order a task runs them: graph mode first, then tf.keras (a lazy import of about a second). Keras
    # imported while eager execution was still on keeps an eager-mode graph for its layer names, and a task's
    # variables came out as conv1d_1_1/... where the evaluator expected conv1d_1/...
    tf.compat.v1.disable_eager_execution()
    tf.keras.layers.Dense  # the attribute access is the import

    # imported for what importing them does: the modules a forked task and evaluator run are warm
    import syncswitch.node.evaluator
    import syncswitch.node.task  # noqa: F401


class Server:
    """Accepts requests, forks children, reports their exits; kills a client's children when it goes."""

    def __init__(self, listener: socket.socket, manager_pid: int | None = None):
        self.listener = listener
        self.manager_pid = manager_pid
        self.selector = selectors.DefaultSelector()
        self.children: dict[int, socket.socket] = {}   # pid -> the connection that asked for it
        self.stopping = False
        wake_r, self._wake_w = os.pipe()
        for fd in (wake_r, self._wake_w):
            os.set_blocking(fd, False)
        self._wake_r = wake_r
        signal.set_wakeup_fd(self._wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # the wake-up pipe does the work
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        self.selector.register(listener, selectors.EVENT_READ, "accept")
        self.selector.register(wake_r, selectors.EVENT_READ, "signal")

    def _stop(self, *_):
        self.stopping = True

    def serve(self) -> None:
        try:
            while not self.stopping:
                for key, _ in self.selector.select(timeout=1.0):
                    if key.data == "accept":
                        conn, _ = self.listener.accept()
                        self.selector.register(conn, selectors.EVENT_READ, "request")
                    elif key.data == "signal":
                        try:
                            os.read(self._wake_r, 512)
                        except BlockingIOError:
                            pass
                        self._reap()
                    else:
                        self._on_request(key.fileobj)
                if self.manager_pid and not _alive(self.manager_pid):
                    self.stopping = True  # a manager killed without teardown must not leave this behind
        finally:
            for pid in list(self.children):
                _kill(pid)
            self._reap(block_s=5.0)

    def _on_request(self, conn: socket.socket) -> None:
        try:
            message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
        except OSError:
            message, fds = b"", []
        if not message:  # the client is gone: so are the tasks it asked for
            for fd in fds:
                os.close(fd)
            self.selector.unregister(conn)
            for pid, owner in list(self.children.items()):
                if owner is conn:
                    _kill(pid)
            conn.close()
            return
        try:
            request = json.loads(message)
            if request.get("entry") not in ENTRIES or len(fds) != 3:
                raise ValueError(f"bad request: entry {request.get('entry')!r}, {len(fds)} descriptors")
            if _peer_uid(conn) != os.getuid():
                raise PermissionError("the client runs as another user")
        except (ValueError, PermissionError) as exc:
            for fd in fds:
                os.close(fd)
            _send(conn, {"error": str(exc)})
            return
        pid = os.fork()
        if pid == 0:
            self._child(request, fds)  # never returns
        for fd in fds:
            os.close(fd)
        self.children[pid] = conn
        _send(conn, {"pid": pid})

    def _child(self, request: dict, fds: list[int]) -> None:
        code = 1
        try:
            signal.set_wakeup_fd(-1)
            for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, signal.SIG_DFL)
            _die_with_parent()
            _name(f"syncswitch-{request['entry']}")  # its command line is the server's: tell it apart by name
            for key in list(self.selector.get_map().values()):
                key.fileobj.close() if hasattr(key.fileobj, "close") else os.close(key.fileobj)
            os.close(self._wake_w)
            os.setsid()  # its own process group, as a spawned task has its agent's
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
                os.close(fd)
            if request.get("cgroup_procs"):
                with open(request["cgroup_procs"], "w", encoding="ascii") as fh:
                    fh.write(str(os.getpid()))
            os.chdir(request["cwd"])
            os.environ.clear()
            os.environ.update(request["env"])
            os.environ.update(RUNTIME_ENV)
            sys.stdin = open(0, encoding="utf-8", closefd=False)
            sys.stdout = open(1, "w", buffering=1, encoding="utf-8", closefd=False)
            sys.stderr = open(2, "w", buffering=1, encoding="utf-8", closefd=False)
            from syncswitch.node import startup

            startup.restart()
            import importlib

            importlib.import_module(ENTRIES[request["entry"]]).main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # noqa: BLE001 - the child must never return into the server's loop
            import traceback

            traceback.print_exc()
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)

    def _reap(self, block_s: float = 0.0) -> None:
        deadline = time.time() + block_s
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                if time.time() >= deadline:
                    return
                time.sleep(0.05)
                continue
            conn = self.children.pop(pid, None)
            if conn is not None:
                _send(conn, {"exit": os.waitstatus_to_exitcode(status)})


def _send(conn: socket.socket, message: dict) -> None:
    try:
        conn.sendall(json.dumps(message).encode() + b"\n")
    except OSError:
        pass  # the client is gone; its connection's end is handled by the loop


def _peer_uid(conn: socket.socket) -> int:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _die_with_parent() -> None:
    """SIGKILL this process when the fork server dies (Linux prctl PR_SET_PDEATHSIG)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: children then end when their agent closes their stdin


def _name(name: str) -> None:
    """Set this process's name (/proc/self/comm, what ps and psutil's name() show; at most 15 bytes)."""
    try:
        with open("/proc/self/comm", "w", encoding="ascii") as fh:
            fh.write(name[:15])
    except OSError:
        pass


def listen(path: str) -> socket.socket:
    """A listening socket at `path`, bound under a temporary name and renamed, so it appears ready."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    temporary = f"{path}.{os.getpid()}.tmp"
    listener.bind(temporary)
    os.chmod(temporary, 0o600)
    listener.listen(64)
    os.rename(temporary, path)
    return listener


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--socket", required=True, help="Path of the Unix socket to serve on.")
    parser.add_argument("--manager-pid", type=int, help="Exit, killing every child, once this process is gone.")
    args = parser.parse_args(argv)
    warm_up()
    listener = listen(args.socket)
    print(f"syncswitch fork server ready at {args.socket} (pid {os.getpid()})", flush=True)
    try:
        Server(listener, args.manager_pid).serve()
    finally:
        listener.close()
        try:
            os.unlink(args.socket)
        except FileNotFoundError:
            pass
        folder = os.path.dirname(os.path.abspath(args.socket))
        if os.path.basename(folder).startswith(PRIVATE_PREFIX):  # the local backend's private folder for it
            try:
                os.rmdir(folder)
            except OSError:
                pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
