"""Checkpoint writes beside training: one at a time on a thread, finished before anything that needs them.

A chief whose workers step on replicas takes a checkpoint as a copy in its own memory at the step
(replica_training.Snapshot); the file is written while training goes on, instead of the whole group waiting in
the next step's all-reduce while the chief publishes its replica and the saver reads it back. Whatever reads the
checkpoints or moves what they hold (a pause, a restore, a synchronous save, the end) waits for the write first.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading


class BackgroundWrites:
    """Runs `start(fn)`'s writes on one thread, one at a time; `wait()` finishes the one in flight and raises what
    it raised, so a failed write fails the task at its next wait as a synchronous save would have.

    The thread lives as long as the task and sleeps on a condition between writes: a thread started per write
    made the training thread wait, inside `Thread.start`, until the new thread was scheduled and had the GIL
    (py-spy on the chief of the synthetic ResNet, 4 workers on 2 cores: up to ~30 ms per evaluation checkpoint
    on a busy machine, while the other workers waited in the next all-reduce). Handing a write over is now a
    notify."""

    def __init__(self):
        self._cond = threading.Condition()
        self._fn = None
        self._busy = False
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, name="checkpoint-write", daemon=True)
        self._thread.start()

    def start(self, fn) -> None:
        """Run `fn()` on the writer thread, after the previous write ended (checkpoints land in the order taken)."""
        self.wait()
        with self._cond:
            self._fn, self._busy = fn, True
            self._cond.notify_all()

    def wait(self) -> None:
        with self._cond:
            while self._busy:
                self._cond.wait()
            error, self._error = self._error, None
        if error is not None:
            raise error

    @property
    def busy(self) -> bool:
        return self._busy

    def _serve(self) -> None:
        while True:
            with self._cond:
                while self._fn is None:
                    self._cond.wait()
                fn, self._fn = self._fn, None
            error = None
            try:
                fn()
            except BaseException as exc:  # noqa: BLE001 - handed to the training thread at its next wait
                error = exc
            with self._cond:
                self._error, self._busy = error, False
                self._cond.notify_all()


def warm_up(session, saver, snapshots) -> None:
    """The chief's first save with `saver` and with each of `snapshots` (a copy, then its write), into a folder
    thrown away: as a step's callable, a save's and a snapshot's are made at their first call (graph partitions
    registered on every task they touch). Measured on the synthetic ResNet (4 workers on 2 cores), the first
    snapshot at an evaluation point took 150-170 ms while the whole group waited in its next step, and the chief
    spent 0.35 CPU-s more in training than with this. Paid before training, as the warm-up steps are."""
    folder = tempfile.mkdtemp(prefix="syncswitch-warm-")
    try:
        prefix = os.path.join(folder, "warm")
        saver.save(session, prefix, write_meta_graph=False, write_state=False)
        for snapshot in snapshots:
            session.run([snapshot.take, snapshot.global_step])
            snapshot.saver.save(session, prefix, write_meta_graph=False, write_state=False)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
