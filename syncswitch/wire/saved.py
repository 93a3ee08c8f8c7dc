"""The chief's record of a checkpoint it wrote, a small JSON file beside the checkpoint.

The manager learns of a save from the chief's report, over the agent's event stream. A manager killed
between the save and the report never learns of it, and `resume` then starts one interval further back.
The chief writes this record right after the save, so a resumed manager can adopt what the dead one missed.
The record is renamed into place after the checkpoint's own files, so a record names a complete checkpoint.
"""

from __future__ import annotations

import glob
import json
import os

from syncswitch.files import write_json_atomic
from syncswitch.wire import agent_pb2 as pb

SUFFIX = ".saved.json"
# A save the manager asked for, by its reason; the chief's own saves are "periodic" or "evaluation".
KINDS = {pb.SAVE_REASON_SWITCH: "switch", pb.SAVE_REASON_FINAL: "final", pb.SAVE_REASON_PERIODIC: "periodic"}


def record_path(checkpoint: str) -> str:
    return checkpoint + SUFFIX


def write(checkpoint: str, samples: int, fraction: float, kind: str) -> None:
    """Called by the chief once `checkpoint` is saved; `kind` is periodic, evaluation, switch or final."""
    write_json_atomic(record_path(checkpoint), {"samples": int(samples), "fraction": float(fraction), "kind": kind})


def read_all(prefix: str) -> list[dict]:
    """The records of every checkpoint saved under `prefix` (a branch's `folder/model-*.ckpt`), oldest first.

    A record that does not parse (a foreign file) is skipped; its checkpoint is then not adopted."""
    records = []
    for path in glob.glob(glob.escape(prefix) + "-*" + SUFFIX):
        try:
            with open(path, encoding="utf-8") as fh:
                doc = json.load(fh)
            records.append({"path": path[:-len(SUFFIX)], "samples": int(doc["samples"]),
                            "fraction": float(doc["fraction"]), "kind": str(doc["kind"])})
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return sorted(records, key=lambda r: r["fraction"])


def remove(checkpoint: str) -> None:
    try:
        os.unlink(record_path(checkpoint))
    except FileNotFoundError:
        pass
