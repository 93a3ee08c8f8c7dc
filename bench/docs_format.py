"""How the generated pages write numbers and tables: a median with its spread, a ratio, a markdown table, the
commit a result file records."""

from __future__ import annotations


def spread_text(s: dict, digits: int = 3) -> str:
    if not s or s.get("median") is None:
        return "–"
    m, lo, hi = (f"{round(s[k], digits) + 0.0:.{digits}f}" for k in ("median", "min", "max"))  # no "-0.00"
    return m if s.get("n") == 1 else f"{m} [{lo}, {hi}]"


def x(value) -> str:
    return "–" if value is None else f"{value:.2f}x"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + \
        ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]


def recorded_commit(doc: dict) -> str | None:
    """The commit a result file records (`machine.git_commit`), short, `-dirty` kept; None where it records none."""
    commit = doc["machine"].get("git_commit") if isinstance(doc.get("machine"), dict) else None
    return commit[:7] + ("-dirty" if commit.endswith("-dirty") else "") if commit else None
