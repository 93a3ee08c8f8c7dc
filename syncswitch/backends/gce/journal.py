"""A JSON journal of the cloud resources a job created, rewritten atomically around every change."""

from __future__ import annotations

import glob
import json
import os
import socket
import threading
import time

from syncswitch.backends.gce.resources import slug
from syncswitch.files import write_json_atomic

FILENAME = "gce-journal.json"

# A resource is written as "creating" before its insert is sent, so a crash mid-call still leaves
# a trace; only "deleted" entries are known to be gone.
CREATING, CREATED, FAILED, DELETING, DELETED = "creating", "created", "failed", "deleting", "deleted"
ALIVE, DEAD, UNKNOWN = "alive", "dead", "unknown"


def path_in(run_dir: str) -> str:
    return os.path.join(run_dir, FILENAME)


def _process_started(pid: int) -> float | None:
    try:
        import psutil

        return psutil.Process(pid).create_time()
    except Exception:  # noqa: BLE001 - no such process, or no psutil: the caller treats None as "not running"
        return None


def current_owner() -> dict:
    return {"host": socket.gethostname(), "pid": os.getpid(), "started": _process_started(os.getpid())}


class Journal:
    """Resources of one job in one project, and the manager process that owns them; thread-safe."""

    def __init__(self, path: str, job_id: str, project: str, owner: dict | None = None):
        self.path, self.job_id, self.project = path, job_id, project
        self.owner = owner if owner is not None else current_owner()
        self.entries: dict[str, dict] = {}  # key "kind/zone/name" -> entry
        self._lock = threading.Lock()

    @staticmethod
    def key(kind: str, name: str, zone: str = "") -> str:
        return f"{kind}/{zone or 'global'}/{name}"

    @classmethod
    def load(cls, path: str) -> "Journal":
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
        journal = cls(path, doc["job_id"], doc["project"], owner=doc.get("owner") or {})
        for entry in doc.get("resources", []):
            journal.entries[cls.key(entry["kind"], entry["name"], entry.get("zone", ""))] = entry
        return journal

    @classmethod
    def open(cls, path: str, job_id: str, project: str) -> tuple["Journal", "Journal | None"]:
        """(this job's journal at `path`, the journal an earlier job left there or None).

        The earlier journal is renamed first, never overwritten, so its leftovers stay on record
        until the caller has deleted them.
        """
        previous = None
        if os.path.exists(path):
            try:
                old = cls.load(path)
            except (OSError, ValueError, KeyError):
                os.replace(path, f"{path}.corrupt-{int(time.time())}")  # keep it for a human to read
            else:
                if old.job_id == job_id and old.project == project:
                    old.owner = current_owner()  # a re-run of the same job takes the journal over
                    return old, None
                old.path = f"{path}.{slug(old.job_id)}"
                os.replace(path, old.path)
                previous = old
        return cls(path, job_id, project), previous

    def owner_status(self) -> str:
        """Whether the manager that wrote this journal still runs (only knowable on its host)."""
        if not self.owner or self.owner.get("host") != socket.gethostname():
            return UNKNOWN
        started = _process_started(int(self.owner.get("pid", -1)))
        recorded = self.owner.get("started")
        if started is None:
            return DEAD
        # A recycled pid belongs to a process started later than the one recorded.
        return ALIVE if recorded is None or abs(started - recorded) < 1.0 else DEAD

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
        doc = {"job_id": self.job_id, "project": self.project, "owner": self.owner,
               "resources": sorted(self.entries.values(), key=lambda e: (e["kind"], e["zone"], e["name"]))}
        write_json_atomic(self.path, doc, indent=1)  # readers see the old or the new journal, never half of one


def _journal_files(folder: str) -> list[str]:
    return sorted(p for p in glob.glob(os.path.join(folder, FILENAME + "*"))
                  if ".corrupt-" not in p and not os.path.basename(p).startswith("."))


def _load_all(paths: list[str]) -> list[Journal]:
    out = []
    for path in paths:
        try:
            out.append(Journal.load(path))
        except (OSError, ValueError, KeyError):
            continue
    return out


def find(job_id: str, roots: list[str]) -> list[Journal]:
    """Journals of `job_id` in the given run folders or their direct subfolders (runs/<name>/)."""
    paths, seen = [], set()
    for root in roots:
        for path in _journal_files(root) + [p for d in sorted(glob.glob(os.path.join(root, "*")))
                                            for p in _journal_files(d)]:
            real = os.path.realpath(path)
            if real not in seen:
                seen.add(real)
                paths.append(path)
    wanted = {job_id, slug(job_id)}
    # Users may pass the job id or its slug as `syncswitch cluster list` shows it.
    return [j for j in _load_all(paths) if j.job_id in wanted or slug(j.job_id) in wanted]


def orphans_near(run_dir: str) -> tuple[list[Journal], list[Journal]]:
    """Journals with live resources in sibling run folders: (manager dead, manager maybe running)."""
    own = os.path.realpath(run_dir)
    parent = os.path.dirname(own)
    paths = [p for d in sorted(glob.glob(os.path.join(parent, "*"))) if os.path.realpath(d) != own
             for p in _journal_files(d)]
    dead, unsure = [], []
    for journal in _load_all(paths):
        if journal.live():
            (dead if journal.owner_status() == DEAD else unsure).append(journal)
    return dead, [j for j in unsure if j.owner_status() == UNKNOWN]
