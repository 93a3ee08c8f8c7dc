"""A JSON journal of the cloud resources a job created, rewritten atomically around every change."""

from __future__ import annotations

import glob
import json
import os
import tempfile
import threading
import time

from syncswitch.cluster_manager.backends.gce.resources import slug

FILENAME = "gce-journal.json"

# A resource is written as "creating" before its insert is sent, so a crash mid-call still leaves
# a trace; only "deleted" entries are known to be gone.
CREATING, CREATED, FAILED, DELETING, DELETED = "creating", "created", "failed", "deleting", "deleted"


def path_in(run_dir: str) -> str:
    return os.path.join(run_dir, FILENAME)


class Journal:
    """Resources of one job in one project; safe to update from several threads."""

    def __init__(self, path: str, job_id: str, project: str):
        self.path, self.job_id, self.project = path, job_id, project
        self.entries: dict[str, dict] = {}  # key "kind/zone/name" -> entry
        self._lock = threading.Lock()

    @staticmethod
    def key(kind: str, name: str, zone: str = "") -> str:
        return f"{kind}/{zone or 'global'}/{name}"

    @classmethod
    def load(cls, path: str) -> "Journal":
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
        journal = cls(path, doc["job_id"], doc["project"])
        for entry in doc.get("resources", []):
            journal.entries[cls.key(entry["kind"], entry["name"], entry.get("zone", ""))] = entry
        return journal

    @classmethod
    def open(cls, path: str, job_id: str, project: str) -> "Journal":
        """The journal at `path` if it belongs to this job and project (a re-run), else a new one."""
        if os.path.exists(path):
            try:
                old = cls.load(path)
            except (OSError, ValueError, KeyError):
                old = None  # unreadable: keep it aside rather than lose its record of leftovers
                os.replace(path, f"{path}.corrupt-{int(time.time())}")
            if old is not None and old.job_id == job_id and old.project == project:
                return old
            if old is not None:
                os.replace(path, f"{path}.{old.project}.{int(time.time())}")
        return cls(path, job_id, project)

    def record(self, kind: str, name: str, state: str, zone: str = "", **extra) -> None:
        with self._lock:
            key = self.key(kind, name, zone)
            entry = self.entries.setdefault(key, {"kind": kind, "name": name, "zone": zone})
            entry.update(extra, state=state, updated=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            self._write()

    def live(self, kind: str | None = None) -> list[dict]:
        """Entries that may still exist in the cloud."""
        with self._lock:
            return [dict(e) for e in self.entries.values()
                    if e["state"] != DELETED and (kind is None or e["kind"] == kind)]

    def _write(self) -> None:
        doc = {"job_id": self.job_id, "project": self.project,
               "resources": sorted(self.entries.values(), key=lambda e: (e["kind"], e["zone"], e["name"]))}
        directory = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".gce-journal.", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(doc, fh, indent=1)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)  # readers see the old or the new journal, never half of one
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise


def find(job_id: str, roots: list[str]) -> list[Journal]:
    """Journals of `job_id` in the given run folders or in their direct subfolders (runs/<name>/)."""
    found, seen = [], set()
    for root in roots:
        for path in [path_in(root)] + sorted(glob.glob(os.path.join(root, "*", FILENAME))):
            real = os.path.realpath(path)
            if real in seen or not os.path.isfile(path):
                continue
            seen.add(real)
            try:
                journal = Journal.load(path)
            except (OSError, ValueError, KeyError):
                continue
            # Users may pass the job id or its slug as shown by `syncswitch cluster list`.
            if journal.job_id == job_id or slug(journal.job_id) == slug(job_id) or slug(journal.job_id) == job_id:
                found.append(journal)
    return found
