"""An opt-in per-update staleness record: for every update of an asynchronous phase, the global step at its read,
at its gradients' arrival on the servers and just before it counted itself, and its worker.

The phase's mean staleness (StalenessMeter) says nothing of the distribution, and the simulator's arrival models are
judged by their tail (notebook 2026-11-27-simulator-8: the same mean, P(staleness >= 4) 0.035 simulated against
0.091 real). Off by default (`SYNCSWITCH_UPDATE_LOG=1` turns it on, Launch.update_log): every update pays one more
scatter on the parameter server while it is on, and the phase's end one fetch of the rows.

Each worker writes its own rows, indexed by its own counter on the parameter server: a worker runs one step at a time
and only it adds to its counter, so no two updates take one row (one shared counter's `assign_add`, read back after
a peer's, gave two updates the same row in the scratch version of this record).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

v1 = tf.compat.v1

# Rows kept per worker per phase; updates beyond it are counted (`update_log_dropped`) and not kept. A 4-worker
# phase of the shipped jobs has 200-400 updates a worker.
CAPACITY = 8192
COLUMNS = ("read", "arrival", "landed")


@dataclasses.dataclass(frozen=True)
class LogPlace:
    """Who writes: the cluster's worker count and this worker's index."""

    workers: int
    task: int


class UpdateLog:
    """The rows of one meter, on the parameter server beside the global step (`colocate`); `state_variable`: base.py's
    (passed in: base.py imports this module)."""

    def __init__(self, state_variable, colocate, name: str, place: LogPlace):
        self._task = place.task
        # One row past the capacity per worker: where updates beyond it write, never read back.
        self.rows = state_variable(f"syncswitch/{name}_update_log", [place.workers, CAPACITY + 1, len(COLUMNS)],
                                   tf.int64, colocate=colocate)
        self.filled = state_variable(f"syncswitch/{name}_update_log_filled", [place.workers], tf.int64,
                                     colocate=colocate)
        self.reset_op = self.filled.assign(tf.zeros([place.workers], tf.int64))

    def write(self, read, arrival, landed) -> tf.Operation:
        """Add this worker's row: the global step at the read, at the gradients' arrival, before its own count."""
        filled = v1.scatter_add(self.filled, [self._task], tf.ones([1], tf.int64))
        index = tf.minimum(filled[self._task] - 1, CAPACITY)
        row = tf.stack([tf.cast(x, tf.int64) for x in (read, arrival, landed)])
        return v1.scatter_nd_update(self.rows, tf.reshape(tf.stack([tf.constant(self._task, tf.int64), index]),
                                                          [1, 2]), tf.reshape(row, [1, len(COLUMNS)])).op

    def stats(self, session) -> dict:
        """The phase's rows as columns (`read`, `arrival`, `landed`, `worker`), in the order the updates counted."""
        rows, filled = session.run([self.rows, self.filled])
        return columns(rows, filled)


def columns(rows: np.ndarray, filled: np.ndarray) -> dict:
    """Every worker's kept rows (`rows[w, :filled[w]]`), merged and sorted by the step they counted at (then by
    worker), as lists; `update_log_dropped`: the updates past the capacity."""
    kept = [np.asarray(rows[w, :min(int(n), CAPACITY)]) for w, n in enumerate(filled)]
    worker = np.concatenate([np.full(len(k), w, np.int64) for w, k in enumerate(kept)])
    table = np.concatenate(kept) if kept else np.zeros((0, len(COLUMNS)), np.int64)
    order = np.lexsort((worker, table[:, 2]))
    log = {name: table[order, i].tolist() for i, name in enumerate(COLUMNS)}
    log["worker"] = worker[order].tolist()
    return {"update_log": log, "update_log_dropped": int(sum(max(int(n) - CAPACITY, 0) for n in filled))}
