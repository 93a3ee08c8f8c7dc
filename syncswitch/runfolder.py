"""A run folder as the analysis reads it: summary.json, run.json, job.json and metrics.jsonl, and what they mean.

One reader for every consumer of finished or interrupted runs (reports, the guard's replay, the search's traces,
`syncswitch resume`), on the ground floor so that none of them needs another's floor.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import statistics

from syncswitch.errors import SpecError

SUMMARY_FILE, RUN_FILE, JOB_FILE, METRICS_FILE = "summary.json", "run.json", "job.json", "metrics.jsonl"
NO_ACTION = "none"  # a guard event whose action starts with it recorded a verdict nothing was done about
REPAIRS = ("rollback", "fall back")


class RunFolderError(SpecError):
    """A run folder, or one of its files, cannot be read; the message names the folder or the file."""


def repair_of(event: dict) -> str | None:
    """The repair a guard event records ("rollback" or "fall back"), or None for a verdict not acted on."""
    action = str(event.get("action") or "")
    return next((kind for kind in REPAIRS if action.startswith(kind)), None)


def guard_acted(events) -> bool:
    """Whether the guard repaired anything (rolled back, or fell back from the current weights)."""
    return any(repair_of(e) for e in events or ())


@dataclasses.dataclass(frozen=True)
class RunSummary:
    """A run's summary.json with the questions the analysis asks of it."""

    doc: dict

    @property
    def status(self) -> str | None:
        return self.doc.get("status")

    @property
    def completed(self) -> bool:
        return self.status == "completed"

    @property
    def guard_events(self) -> list[dict]:
        return list(self.doc.get("guard_events") or [])

    @property
    def guard_acted(self) -> bool:
        """The guard repaired the run, by whichever repair; a verdict it could not act on does not count."""
        return guard_acted(self.guard_events)

    @property
    def went_back_slower(self) -> bool:
        """The speed rule's trial found the switch target slower than BSP and the run went back to BSP."""
        return any(e.get("reason") == "slower" and repair_of(e) for e in self.guard_events)

    def repaired_by(self, kind: str) -> bool:
        """Whether one of the guard's repairs was `kind` ("rollback" or "fall back")."""
        return any(repair_of(e) == kind for e in self.guard_events)


def is_run_folder(path: str) -> bool:
    """A folder a run wrote to: it has a summary, or at least the metrics of a run that never finished."""
    return any(os.path.isfile(os.path.join(path, name)) for name in (SUMMARY_FILE, METRICS_FILE))


def find_run_dirs(paths) -> list[str]:
    """Expand each path: a run folder stays, a parent folder gives its immediate run subfolders."""
    found, seen = [], set()
    for path in paths:
        if not os.path.isdir(path):
            raise RunFolderError(f"{path}: no such folder")
        if is_run_folder(path):
            candidates = [path]
        else:
            candidates = [os.path.join(path, d) for d in sorted(os.listdir(path))]
            candidates = [d for d in candidates if os.path.isdir(d) and is_run_folder(d)]
            if not candidates:
                raise RunFolderError(f"{path}: neither a run folder (summary.json, metrics.jsonl) "
                                "nor a folder of run folders")
        for candidate in candidates:
            key = os.path.realpath(candidate)
            if key not in seen:
                seen.add(key)
                found.append(candidate)
    return found


def read_json(run_dir: str, name: str) -> dict | None:
    """One JSON object file of the folder (job.json, run.json, summary.json), or None where it is missing."""
    path = os.path.join(run_dir, name)
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        return None
    except (ValueError, UnicodeDecodeError) as exc:
        raise RunFolderError(f"{path}: corrupt JSON ({exc})") from None
    except OSError as exc:
        raise RunFolderError(f"{path}: {exc.strerror}") from None
    if not isinstance(doc, dict):
        raise RunFolderError(f"{path}: expected a JSON object")
    return doc


def read_summary(run_dir: str) -> RunSummary:
    """The folder's summary.json; RunFolderError where it has none or it cannot be read."""
    doc = read_json(run_dir, SUMMARY_FILE)
    if doc is None:
        raise RunFolderError(f"{run_dir}: no {SUMMARY_FILE} (not a run folder, or the run never finished)")
    return RunSummary(doc)


def read_records(run_dir: str, required: bool = False) -> list[dict]:
    """metrics.jsonl's records in order. A torn last line (a run killed mid-write) is left out; any other line that
    is not a JSON record is an error naming it. Without the file: [] (RunFolderError where `required`)."""
    path = os.path.join(run_dir, METRICS_FILE)
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except FileNotFoundError:
        if required:
            raise RunFolderError(f"{path}: missing; not a finished run folder") from None
        return []
    records = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            if n == len(lines):
                break
            raise RunFolderError(f"{path}:{n}: not a JSON record") from None
        if isinstance(record, dict):
            records.append(record)
    return records


def training_loss_ends(run_dir: str, span: float = 0.02) -> tuple[float, float] | None:
    """(where the training loss began, where it ended): the medians of the workers' loss reports over the first and
    the last `span` of the workload they cover; None without finite reports."""
    reports = sorted((float(r["fraction"]), float(r["loss"])) for r in read_records(run_dir)
                     if r.get("kind") == "metrics" and isinstance(r.get("loss"), (int, float))
                     and isinstance(r.get("fraction"), (int, float)) and math.isfinite(r["loss"]))
    if not reports:
        return None
    first, last = reports[0][0], reports[-1][0]
    began = [loss for f, loss in reports if f <= first + span]
    ended = [loss for f, loss in reports if f >= last - span]
    return statistics.median(began), statistics.median(ended)


def metrics_reached(run_dir: str) -> float:
    """The furthest progress any worker reported in the run's metrics.jsonl (0.0 without one)."""
    best = 0.0
    try:
        with open(os.path.join(run_dir, METRICS_FILE), encoding="utf-8") as fh:
            for line in fh:
                if line.startswith('{"kind": "metrics"'):
                    try:
                        best = max(best, float(json.loads(line).get("fraction", 0.0)))
                    except ValueError:
                        continue  # the line the dead manager was writing
    except FileNotFoundError:
        pass
    return best
