"""A run folder's outputs: metrics.jsonl, TensorBoard event files, manager.log and an atomic summary.json."""

from __future__ import annotations

import json
import logging
import os
import threading

from syncswitch.cluster_manager.tbevents import ScalarWriter
from syncswitch.errors import SpecError
from syncswitch.files import write_json_atomic


def make_run_dir(path: str) -> None:
    """Create the run folder, or say in one line why not (a read-only place, a file in the way)."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise SpecError(f"output folder {path}: cannot create it: {exc.strerror or exc}") from None


class run_log:
    """Everything `syncswitch.*` logs at INFO and above, into the run folder's manager.log, until closed."""

    def __init__(self, path: str):
        self.logger = logging.getLogger("syncswitch")
        self.handler = logging.FileHandler(path, encoding="utf-8")
        self.handler.setLevel(logging.INFO)
        self.handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        self._level = self.logger.level
        if self.logger.getEffectiveLevel() > logging.INFO:
            self.logger.setLevel(logging.INFO)  # handlers decide what each destination shows
        self.logger.addHandler(self.handler)

    def close(self) -> None:
        self.logger.removeHandler(self.handler)
        self.handler.close()
        self.logger.setLevel(self._level)


class RunOutputs:
    """Appends metric records and TensorBoard scalars for one run."""

    def __init__(self, run_dir: str):
        self.run_dir = run_dir
        os.makedirs(run_dir, exist_ok=True)
        self._metrics = open(os.path.join(run_dir, "metrics.jsonl"), "a", encoding="utf-8", buffering=1)
        self._tb = None
        self._lock = threading.Lock()

    def append(self, entry: dict) -> None:
        """One line of metrics.jsonl."""
        with self._lock:
            self._metrics.write(json.dumps(entry, default=float) + "\n")

    def scalar(self, tag: str, value: float, step: int, wall_time: float) -> None:
        with self._lock:
            if self._tb is None:
                self._tb = ScalarWriter(os.path.join(self.run_dir, "tensorboard"))
            self._tb.scalar(tag, value, step, wall_time)

    def write_summary(self, summary: dict) -> str:
        path = os.path.join(self.run_dir, "summary.json")
        write_json_atomic(path, summary)
        return path

    def close(self) -> None:
        with self._lock:
            self._metrics.close()
        if self._tb is not None:
            self._tb.close()
