"""The fault-tolerance sections: `checkpoint` (durable checkpoints) and `recovery` (what a lost node costs)."""

from __future__ import annotations

import os
from typing import Any

from syncswitch.spec.fields import check_keys, choice, fail, mapping, number
from syncswitch.spec.model import CheckpointSpec, RecoverySpec

WORKER_LOSS = ("restore", "continue")
# Every syncswitch node hosts a parameter-server shard beside its worker: losing a node loses part of the
# model's variables, so the others cannot train on without it. `continue` would need worker-only nodes.
WHY_NOT_CONTINUE = ("every node hosts a parameter-server shard, so a lost node takes part of the model with it "
                    "and the others cannot go on without it; use 'restore'")


def checkpoint_section(doc: Any) -> CheckpointSpec:
    doc = mapping(doc, "checkpoint")
    check_keys(doc, ("every", "every_s", "keep", "dir"), "checkpoint.")
    every, every_s, keep = doc.get("every"), doc.get("every_s"), doc.get("keep")
    return CheckpointSpec(
        dir=None if doc.get("dir") is None else checkpoint_dir(doc["dir"]),
        every=None if every is None else number(every, "checkpoint.every", lo=0.001, hi=1.0),
        every_s=None if every_s is None else number(every_s, "checkpoint.every_s", lo=1.0),
        keep=None if keep is None else number(keep, "checkpoint.keep", lo=1, integer=True),
    )


def checkpoint_dir(value: Any) -> str:
    """An absolute path every node reads and writes at the same place (a shared mount: NFS, Filestore, a bucket
    mounted with gcsfuse); the run's checkpoints go in a folder of its own below it."""
    field = "checkpoint.dir"
    if not isinstance(value, str) or not value.strip():
        raise fail(field, value, "must be a folder path every node sees (a shared mount)")
    if "://" in value:
        raise fail(field, value, "URLs are not written to directly; mount the bucket or share (gcsfuse, NFS, "
                                 "Filestore) at the same path on every node and give that path")
    path = os.path.expanduser(value)
    if not os.path.isabs(path):
        raise fail(field, value, "must be an absolute path: every node resolves it the same way, whatever its "
                                 "working folder")
    return os.path.normpath(path)


def recovery_section(doc: Any) -> RecoverySpec:
    doc = mapping(doc, "recovery")
    check_keys(doc, ("max_restarts", "on_worker_loss", "step_timeout_s", "silence_s"), "recovery.")
    on_worker_loss = choice(doc.get("on_worker_loss", "restore"), "recovery.on_worker_loss", WORKER_LOSS)
    if on_worker_loss == "continue":
        raise fail("recovery.on_worker_loss", on_worker_loss, WHY_NOT_CONTINUE)
    return RecoverySpec(
        max_restarts=number(doc.get("max_restarts", 3), "recovery.max_restarts", lo=0, hi=100, integer=True),
        on_worker_loss=on_worker_loss,
        step_timeout_s=number(doc.get("step_timeout_s", 60.0), "recovery.step_timeout_s", lo=1, hi=86400),
        silence_s=number(doc.get("silence_s", 180.0), "recovery.silence_s", lo=1, hi=86400),
    )
