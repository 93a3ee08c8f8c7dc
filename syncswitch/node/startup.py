"""Start-up of a node process: its stages' marks, printed to its log once it is ready (where submit-to-first-step
goes), and the event stream kept apart from what user code prints."""

from __future__ import annotations

import itertools
import os
import sys
import time

MARKS: list[tuple[str, float]] = [("process", time.time())]


def mark(name: str) -> None:
    """The stage `name` ended now."""
    MARKS.append((name, time.time()))


def line() -> str:
    """Each stage's seconds, in order, and the total since the process started."""
    stages = ", ".join(f"{name} {t - prev:.2f}" for (_, prev), (name, t) in itertools.pairwise(MARKS))
    return f"syncswitch: start-up (s per stage): {stages}; total {MARKS[-1][1] - MARKS[0][1]:.2f}"


def restart() -> None:
    """The clock starts again: a process forked from a warm parent begins now, its imports already done."""
    MARKS[:] = [("process", time.time())]


def take_stdout():
    """The process's stdout as it started, kept for event lines; fd 1 then points at the log (stderr), so what the
    user's script prints cannot corrupt or swallow an event. Call it in main(), not at import: a fork server
    imports a module once for every child it forks."""
    sys.stdout.flush()
    events = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    return events
