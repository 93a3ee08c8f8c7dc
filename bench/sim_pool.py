"""Simulated runs in a child process, watched: a run that stops making progress is killed and run again.

A long simulator process has hung under load (every thread waiting, none on a CPU; the main thread in glibc's
free(), inside TensorFlow's prefetch of the training stream), so the benches do not simulate in their own
process. A child serves the runs one at a time (replaced after `recycle` runs, so no process lives long), and the
parent watches the run's folder: when it has not grown for `stall_s` seconds, or the child died, the child is
killed and the run retried in a fresh one (at most `retries` times). The child runs TensorFlow with one thread per
pool and glibc with at most two malloc arenas: fewer threads freeing into fewer arenas. One thread also makes a
run's bits independent of the machine's core count; they are not those of `syncswitch simulate` (TensorFlow's
default pools) wherever the thread count changes an op's rounding (the digits CNN's convolutions do; the digits
MLP does not), and an asynchronous run, chaotic, can then end elsewhere: same seed, another draw.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import time
import traceback

POLL_S = 2.0


class RunStalled(RuntimeError):
    """A run made no progress (or its child died) on every try."""


def _serve(conn, threads: int | None) -> None:
    """The child: `(function path, args, kwargs)` in, `("ok", result)` or `("error", traceback)` out, until None.
    `threads`: TensorFlow's inter- and intra-op pool sizes (None: TensorFlow's defaults, not imported here)."""
    if threads is not None:
        import tensorflow as tf

        tf.config.threading.set_inter_op_parallelism_threads(threads)
        tf.config.threading.set_intra_op_parallelism_threads(threads)
    while True:
        task = conn.recv()
        if task is None:
            return
        where, args, kwargs = task
        module, _, name = where.partition(":")
        try:
            conn.send(("ok", getattr(importlib.import_module(module), name)(*args, **kwargs)))
        except Exception:  # noqa: BLE001 - the parent raises it with the child's traceback
            conn.send(("error", traceback.format_exc()))


def folder_size(path: str) -> int:
    """Bytes under `path` (0 if absent): what a simulated run has written so far."""
    total = 0
    for base, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(base, f))
            except OSError:  # written and replaced meanwhile
                pass
    return total


class SimPool:
    """`pool.call("module:function", out_dir, *args)`: the function run in the child, its result returned.

    `out_dir` is the folder the run writes as it goes (its growth is the progress the watchdog sees)."""

    def __init__(self, stall_s: float = 180.0, retries: int = 2, recycle: int = 20, threads: int | None = 1,
                 log=print):
        self.stall_s, self.retries, self.recycle, self.threads, self.log = stall_s, retries, recycle, threads, log
        self._ctx = multiprocessing.get_context("spawn")  # a fresh interpreter: nothing of this process's threads
        self._proc = self._conn = None
        self._served = 0
        self.restarts = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _start(self) -> None:
        parent, child = self._ctx.Pipe()
        before = os.environ.get("MALLOC_ARENA_MAX")
        os.environ["MALLOC_ARENA_MAX"] = "2"  # read by glibc at the child's start
        try:
            self._proc = self._ctx.Process(target=_serve, args=(child, self.threads), daemon=True)
            self._proc.start()
        finally:
            if before is None:
                os.environ.pop("MALLOC_ARENA_MAX")
            else:
                os.environ["MALLOC_ARENA_MAX"] = before
        child.close()
        self._conn, self._served = parent, 0

    def _kill(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.join(10)
            self._conn.close()
        self._proc = self._conn = None

    def close(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            try:
                self._conn.send(None)
            except OSError:  # the child is gone already
                pass
            self._proc.join(30)
        self._kill()

    def call(self, where: str, out_dir: str, *args, **kwargs):
        for attempt in range(self.retries + 1):
            if self._proc is None or self._served >= self.recycle:
                self.close()
                self._start()
            self._conn.send((where, args, kwargs))
            self._served += 1
            outcome = self._wait(out_dir)
            if outcome is not None:
                kind, value = outcome
                if kind == "error":
                    raise RuntimeError(f"{where} failed in the simulation child:\n{value}")
                return value
            self.restarts += 1
            then = "retrying" if attempt < self.retries else "giving up"
            self.log(f"{where} {out_dir}: no progress for {self.stall_s:.0f} s or the child died "
                     f"(try {attempt + 1} of {self.retries + 1}); killed, {then}")
            self._kill()
        raise RunStalled(f"{out_dir}: no progress on {self.retries + 1} tries")

    def _wait(self, out_dir: str):
        """The child's answer, or None when the run stalled or the child died."""
        size, moved = -1, time.monotonic()
        while True:
            if self._conn.poll(POLL_S):
                try:
                    return self._conn.recv()
                except EOFError:  # died while answering
                    return None
            if not self._proc.is_alive():
                return None
            now_size = folder_size(out_dir)
            if now_size != size:
                size, moved = now_size, time.monotonic()
            elif time.monotonic() - moved > self.stall_s:
                return None
