"""The run's durable checkpoints: a manifest rewritten atomically after each save, and its rotation.

TensorFlow's V2 saver writes a checkpoint's data under a temporary name and its `.index` last, by a
rename; the manifest (`checkpoints/durable.json`) names a checkpoint only after the chief reported the
save done, and is itself replaced in one rename. So whatever instant a crash hits, the manifest's
latest entry is a complete checkpoint, and recovery and `resume` start from it.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import os

from syncswitch.files import write_json_atomic
from syncswitch.wire import saved

MANIFEST = "durable.json"
ROTATED = ("periodic", "evaluation")  # kinds rotation may delete; switch and final checkpoints stay


@dataclasses.dataclass
class DurableCheckpoint:
    path: str
    fraction: float
    samples: int
    kind: str             # periodic | evaluation | switch | final | recovery
    phase: int | None     # the plan phase it was taken in
    time_s: float         # since submission


def checkpoint_folder(spec, run_dir: str) -> str:
    """Where the run's checkpoints and their manifest live: `checkpoint.dir` (a mount every node shares) in a
    folder named for the run folder, stable across resumes; else the run folder's checkpoints/."""
    if not spec.checkpoint.dir:
        return os.path.join(run_dir, "checkpoints")
    run_dir = os.path.abspath(run_dir)
    key = hashlib.sha1(run_dir.encode("utf-8")).hexdigest()[:10]
    return os.path.join(spec.checkpoint.dir, f"{os.path.basename(run_dir) or 'run'}-{key}")


def checkpoint_files(path: str) -> list[str]:
    """The files of the checkpoint with prefix `path` (its index and data shards, the chief's record)."""
    return sorted(glob.glob(glob.escape(path) + ".index") + glob.glob(glob.escape(path) + ".data-*")
                  + glob.glob(glob.escape(saved.record_path(path))))


def complete(path: str) -> bool:
    """Whether the checkpoint at `path` has its index and every data shard it names."""
    files = checkpoint_files(path)
    if not any(f.endswith(".index") for f in files):
        return False
    shards = [f for f in files if ".data-" in f]
    if not shards:
        return False
    total = shards[0].rsplit("-of-", 1)[-1]
    return len(shards) == int(total) if total.isdigit() else True


class DurableCheckpoints:
    """The checkpoints a lost node or manager restarts from, newest last, mirrored to the manifest."""

    def __init__(self, folder: str, keep: int | None = None, shared_filesystem: bool = True):
        self.folder = folder
        self.keep = keep
        self.shared = shared_filesystem  # without it, the files live on the chief: nothing to check or delete
        self.entries: list[DurableCheckpoint] = []
        self.pinned: set[str] = set()    # paths an evaluation still has to read
        self.deleted: list[str] = []
        self._written: dict | None = None  # the manifest as last written (or loaded)

    @property
    def manifest(self) -> str:
        return os.path.join(self.folder, MANIFEST)

    @classmethod
    def load(cls, folder: str, keep: int | None = None) -> "DurableCheckpoints":
        """The manifest a previous manager wrote (for `resume`); empty when there is none."""
        store = cls(folder, keep)
        try:
            with open(store.manifest, encoding="utf-8") as fh:
                doc = json.load(fh)
        except FileNotFoundError:
            return store
        store.entries = [DurableCheckpoint(**e) for e in doc.get("checkpoints", [])]
        store._written = doc
        return store

    def add(self, checkpoint: DurableCheckpoint) -> None:
        if any(c.path == checkpoint.path and c.kind == checkpoint.kind for c in self.entries):
            return  # adopted from the chief's record before its report came
        self.entries.append(checkpoint)
        self.entries.sort(key=lambda c: c.fraction)
        self._rotate()
        self._write()

    def adopt(self, checkpoints: list[DurableCheckpoint]) -> None:
        """Checkpoints a resumed manager found on disk: recorded, not rotated (nothing is pinned yet: an
        evaluation the dead manager still owed must not be deleted before it is scored)."""
        self.entries = sorted(self.entries + list(checkpoints), key=lambda c: c.fraction)
        self._write()

    def latest(self, at_most: float = 1.0) -> DurableCheckpoint | None:
        """The newest complete checkpoint at or below fraction `at_most`."""
        for checkpoint in reversed(self.entries):
            if checkpoint.fraction <= at_most and (not self.shared or complete(checkpoint.path)):
                return checkpoint
        return None

    def drop_after(self, fraction: float) -> None:
        """A rollback abandoned the branch past `fraction`: its checkpoints are not the run's any more."""
        self.entries = [c for c in self.entries if c.fraction <= fraction]
        self._write()

    def unpin(self, path: str) -> None:
        self.pinned.discard(path)
        self._rotate()
        self._write()

    def _rotate(self) -> None:
        """Delete the rotated kinds beyond the newest `keep` of them, never one still to be evaluated."""
        if self.keep is None or not self.shared:
            return
        rotated = [c for c in self.entries if c.kind in ROTATED]
        for checkpoint in rotated[:-self.keep]:
            if checkpoint.path in self.pinned:
                continue
            self.entries.remove(checkpoint)
            if any(c.path == checkpoint.path for c in self.entries):
                continue  # saved again at the same step as a kept kind (a switch at an evaluation point)
            # The manifest stops naming it first (written by the caller), then its files go.
            self._write()
            for path in checkpoint_files(checkpoint.path):
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass
            self.deleted.append(checkpoint.path)

    def _write(self) -> None:
        """Replace the manifest, unless it already says this: the unpin after each evaluation rotates nothing
        while the run keeps every checkpoint, and each rewrite is an fsync in the manager's event thread while
        the chief's checkpoint writes go on beside training."""
        doc = {"checkpoints": [dataclasses.asdict(c) for c in self.entries]}
        if doc == self._written:
            return
        write_json_atomic(self.manifest, doc)
        self._written = doc
