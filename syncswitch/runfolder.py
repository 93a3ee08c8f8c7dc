"""A run folder as the analysis reads it: summary.json, run.json, job.json and metrics.jsonl, and what they mean.

One reader for every consumer of finished or interrupted runs (reports, the guard's replay, the search's traces,
`syncswitch resume`), on the ground floor so that none of them needs another's floor.
"""

from __future__ import annotations

import dataclasses
import json
import os

SUMMARY_FILE, RUN_FILE, JOB_FILE, METRICS_FILE = "summary.json", "run.json", "job.json", "metrics.jsonl"
NO_ACTION = "none"  # a guard event whose action starts with it recorded a verdict nothing was done about
REPAIRS = ("rollback", "fall back")


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

    def repaired_by(self, kind: str) -> bool:
        """Whether one of the guard's repairs was `kind` ("rollback" or "fall back")."""
        return any(repair_of(e) == kind for e in self.guard_events)


def read_json(run_dir: str, name: str) -> dict | None:
    """One JSON file of the folder, or None where it is missing."""
    try:
        with open(os.path.join(run_dir, name), encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        return None


def read_summary(run_dir: str) -> RunSummary | None:
    doc = read_json(run_dir, SUMMARY_FILE)
    return None if doc is None else RunSummary(doc)


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
