"""The base of docs/results.md's figures: a `Figure` (the result files it reads, the command that measured them, how
to show it), the folder of those files and their reader, and helpers the figures share. The figure modules
(bench/*_docs.py) import this, never bench/docs.py, which puts their figures on the pages in order."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable

from bench import common

RESULTS = os.path.join(common.ROOT, "bench", "results")


@dataclasses.dataclass(frozen=True)
class Figure:
    """One current figure: the result files it reads, the command that measured them, how to show it.

    `commit`: the code the files measured, for files that do not record it (`machine.git_commit`); `headline`, if
    set, gives the README's one-line claim and value.
    """

    key: str
    title: str
    files: tuple[str, ...]
    command: str | tuple[str, ...]  # one per file where they differ
    render: Callable[[list[dict]], list[str]]
    commit: str | None = None
    headline: Callable[[list[dict]], tuple[str, str]] | None = None
    note: str = ""


def load(name: str) -> dict:
    with open(os.path.join(RESULTS, name), encoding="utf-8") as fh:
        return json.load(fh)


def pooled(stats: list[dict]) -> dict:
    """{median, min, max, n} over the runs of several `common.spread` results."""
    return common.spread([v for s in stats for v in (s or {}).get("runs") or []])
