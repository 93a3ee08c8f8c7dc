"""A run folder's outputs: metrics.jsonl, TensorBoard event files and an atomically written summary.json."""

from __future__ import annotations

import json
import os
import threading

from syncswitch.cluster_manager.tbevents import ScalarWriter


def write_json_atomic(path: str, obj) -> None:
    """Write JSON via a temporary file and a rename, so readers never see half a file."""
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=2, sort_keys=False, default=float)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class RunOutputs:
    """Appends metric records and TensorBoard scalars for one run."""

    def __init__(self, run_dir: str):
        self.run_dir = run_dir
        os.makedirs(run_dir, exist_ok=True)
        self._metrics = open(os.path.join(run_dir, "metrics.jsonl"), "a", encoding="utf-8", buffering=1)
        self._tb = None
        self._lock = threading.Lock()

    def record(self, record: dict) -> None:
        with self._lock:
            self._metrics.write(json.dumps(record, default=float) + "\n")

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
