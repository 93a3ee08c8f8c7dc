"""Logged runs for the simulator: trace manifests (YAML + CSV) and syncswitch run folders (summary.json)."""

from __future__ import annotations

import csv
import dataclasses
import math
import os
import statistics
from collections import defaultdict

import yaml

from syncswitch.errors import SyncSwitchError
from syncswitch.metrics import converged_accuracy
from syncswitch.runfolder import SUMMARY_FILE, RunFolderError, read_summary

MIN_COMPLETION = 0.8  # a run whose last step is below 80% of its setting's median run stopped early
PROTOCOLS = ("bsp", "asp")


class TraceError(SyncSwitchError):
    """A manifest, CSV log or run folder cannot be read; the message names the file and field."""

    exit_code = 2


@dataclasses.dataclass(frozen=True)
class TraceRun:
    """One logged training: its BSP share, protocol order, converged accuracy and total time."""

    bsp_fraction: float
    order: tuple[str, ...]
    converged_accuracy: float | None
    total_time_s: float
    complete: bool
    converged: bool  # False: never stable by the 0.1%/5-evaluation rule, accuracy is the fallback
    source: str
    last_step: float | None = None

    @property
    def bsp_first(self) -> bool:
        """True for the schedules a BSP->ASP search can pick: pure ASP, pure BSP, or BSP then ASP."""
        return self.bsp_fraction in (0.0, 1.0) or tuple(self.order[:1]) == ("bsp",)

    @property
    def usable(self) -> bool:
        return self.complete and self.converged_accuracy is not None


@dataclasses.dataclass(frozen=True)
class TraceSet:
    name: str
    source: str
    runs: tuple[TraceRun, ...]

    def pools(self) -> dict[float, list[TraceRun]]:
        """Usable BSP->ASP runs grouped by BSP share (0.0 = ASP, 1.0 = BSP)."""
        out: dict[float, list[TraceRun]] = defaultdict(list)
        for r in self.runs:
            if r.usable and r.bsp_first:
                out[round(r.bsp_fraction, 9)].append(r)
        return dict(sorted(out.items()))

    def skipped(self) -> list[TraceRun]:
        return [r for r in self.runs if not r.usable]


def _num(value, where: str, field: str, lo: float | None = None, hi: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TraceError(f"{where}: {field}={value!r} must be a number")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise TraceError(f"{where}: {field}={value!r} must be in [{lo}, {hi}]")
    return float(value)


def read_csv_log(path: str) -> tuple[list[float], list[float], list[float] | None]:
    """(times since start, accuracies, steps or None) from a `Wall time,Step,[Time,]Value` CSV."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    except FileNotFoundError:
        raise TraceError(f"{path}: no such CSV log") from None
    except (OSError, csv.Error, UnicodeDecodeError) as exc:
        raise TraceError(f"{path}: unreadable CSV ({exc})") from None
    if not rows:
        raise TraceError(f"{path}: no rows")
    header = rows[0].keys()
    if "Value" not in header:
        raise TraceError(f"{path}: no 'Value' column (columns: {', '.join(header)})")
    time_col = "Time" if "Time" in header else "Wall time" if "Wall time" in header else None
    if time_col is None:
        raise TraceError(f"{path}: needs a 'Time' or 'Wall time' column (columns: {', '.join(header)})")
    times, accs, steps = [], [], []
    for i, row in enumerate(rows, start=2):
        try:
            times.append(float(row[time_col]))
            accs.append(float(row["Value"]))
            steps.append(float(row["Step"]) if row.get("Step") not in (None, "") else math.nan)
        except (TypeError, ValueError):
            raise TraceError(f"{path}: line {i}: non-numeric {time_col!r} or 'Value'") from None
    if time_col == "Wall time":
        times = [t - times[0] for t in times]
    return times, accs, (None if all(math.isnan(s) for s in steps) else steps)


def _manifest_runs(path: str) -> TraceSet:
    try:
        with open(path, encoding="utf-8") as fh:
            doc = yaml.safe_load(fh)
    except FileNotFoundError:
        raise TraceError(f"{path}: no such manifest") from None
    except yaml.YAMLError as exc:
        raise TraceError(f"{path}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("runs"), list) or not doc["runs"]:
        raise TraceError(f"{path}: a manifest needs a non-empty 'runs' list")
    base = os.path.dirname(os.path.abspath(path))
    raw = []
    for i, item in enumerate(doc["runs"]):
        where = f"{path}: runs[{i}]"
        if not isinstance(item, dict):
            raise TraceError(f"{where} must be a mapping with bsp_fraction, order, path")
        frac = _num(item.get("bsp_fraction"), where, "bsp_fraction", 0.0, 1.0)
        order = item.get("order", ["bsp", "asp"])
        if not isinstance(order, list) or not order or any(p not in PROTOCOLS for p in order):
            raise TraceError(f"{where}: order={order!r} must be a list of protocols from {PROTOCOLS}")
        rel = item.get("path")
        if not isinstance(rel, str) or not rel:
            raise TraceError(f"{where}: path is required (the CSV log, relative to the manifest)")
        csv_path = os.path.normpath(os.path.join(base, rel))
        times, accs, steps = read_csv_log(csv_path)
        raw.append((frac, tuple(order), times, accs, steps, csv_path, item.get("complete")))
    last_steps: dict[tuple, list[float]] = defaultdict(list)
    for frac, order, _, _, steps, _, _ in raw:
        if steps:
            last_steps[(frac, order)].append(max(s for s in steps if not math.isnan(s)))
    # The median, not the longest: one run logged with a different step count must not flag the rest.
    typical = {key: statistics.median(v) for key, v in last_steps.items()}
    runs = []
    for frac, order, times, accs, steps, csv_path, complete in raw:
        last = max((s for s in steps if not math.isnan(s)), default=None) if steps else None
        if complete is None:
            # Logs cut short (a crashed or aborted run) never reached the workload's accuracy;
            # counting them would drag the BSP target down by about the margin itself.
            top = typical.get((frac, order), 0.0)
            complete = last is None or top <= 0 or last >= MIN_COMPLETION * top
        acc, conv = converged_accuracy(accs)
        runs.append(TraceRun(frac, order, acc, max(times), bool(complete), conv, csv_path, last))
    return TraceSet(str(doc.get("name") or os.path.basename(base)), path, tuple(runs))


def _order_and_share(schedule, where: str) -> tuple[tuple[str, ...], float]:
    order: list[str] = []
    share = 0.0
    for j, phase in enumerate(schedule):
        if not isinstance(phase, dict) or phase.get("protocol") not in PROTOCOLS:
            raise TraceError(f"{where}: schedule[{j}].protocol must be one of {PROTOCOLS}")
        start = _num(phase.get("start_fraction", 0.0), where, f"schedule[{j}].start_fraction", 0.0, 1.0)
        end = _num(phase.get("end_fraction", 1.0), where, f"schedule[{j}].end_fraction", 0.0, 1.0)
        if not order or order[-1] != phase["protocol"]:
            order.append(phase["protocol"])
        if phase["protocol"] == "bsp":
            share += max(0.0, end - start)
    return tuple(order), min(1.0, share)


def read_run_folder(folder: str) -> TraceRun:
    """A syncswitch run folder as a TraceRun (its summary.json's switch_at, accuracy and time)."""
    path = os.path.join(folder, SUMMARY_FILE)
    try:
        doc = read_summary(folder).doc
    except RunFolderError as exc:
        raise TraceError(str(exc)) from None
    schedule = doc.get("schedule") or []
    if not isinstance(schedule, list):
        raise TraceError(f"{path}: schedule must be a list of phases")
    order, share = _order_and_share(schedule, path) if schedule else ((), None)
    switch_at = doc.get("switch_at")
    if switch_at is not None:
        share = _num(switch_at, path, "switch_at", 0.0, 1.0)
        order = order or (("bsp", "asp") if 0 < share < 1 else ("bsp",) if share == 1 else ("asp",))
    if share is None:
        raise TraceError(f"{path}: needs switch_at or a schedule to place the run on [ASP, BSP]")
    evals = [e for e in doc.get("evaluations") or [] if isinstance(e, dict)]
    status = str(doc.get("status", "completed")).lower()
    complete = status == "completed"
    acc = doc.get("converged_accuracy")
    if acc is None:
        acc, conv = converged_accuracy([e.get("accuracy") for e in evals
                                        if isinstance(e.get("accuracy"), (int, float))])
    else:
        acc, conv = _num(acc, path, "converged_accuracy", 0.0, 1.0), True
    total = doc.get("total_time_s")
    if total is None:
        total = max((e["time_s"] for e in evals if isinstance(e.get("time_s"), (int, float))), default=None)
    if total is None and complete:
        raise TraceError(f"{path}: needs total_time_s (or timed evaluations) to cost the run")
    total = 0.0 if total is None else _num(total, path, "total_time_s", 0.0)
    return TraceRun(share, order or ("bsp", "asp"), acc, total, complete, conv, folder)


def _run_folders(root: str) -> list[str]:
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        if SUMMARY_FILE in filenames:
            found.append(dirpath)
            dirnames[:] = []  # a run folder's own subfolders are its artefacts, not runs
        elif os.path.relpath(dirpath, root).count(os.sep) >= 2:
            dirnames[:] = []
    return sorted(found)


def load(path: str) -> TraceSet:
    """A manifest file, a folder holding manifest.yaml, one run folder, or a folder of run folders."""
    path = os.path.expanduser(str(path))
    if os.path.isfile(path):
        return _manifest_runs(path)
    if not os.path.isdir(path):
        raise TraceError(f"{path}: no such manifest file or run folder")
    for name in ("manifest.yaml", "manifest.yml"):
        if os.path.isfile(os.path.join(path, name)):
            return _manifest_runs(os.path.join(path, name))
    folders = _run_folders(path)
    if not folders:
        raise TraceError(f"{path}: holds no manifest.yaml and no run folders with summary.json")
    runs = tuple(read_run_folder(f) for f in folders)
    return TraceSet(os.path.basename(os.path.abspath(path)), path, runs)
