"""Start-up marks of a task process, printed to its log once it is ready: where submit-to-first-step goes."""

from __future__ import annotations

import itertools
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
