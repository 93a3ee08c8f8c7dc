"""Comparing run folders by variant: a Markdown table and an accuracy/loss figure (`syncswitch report`)."""

from __future__ import annotations

import dataclasses
import math
import os
import statistics

from syncswitch import metrics
from syncswitch.errors import SpecError
from syncswitch.files import write_atomic, write_text_atomic
from syncswitch.runfolder import find_run_dirs, read_records, read_summary

LOSS_BINS = 50


@dataclasses.dataclass
class Run:
    """One run folder: its summary.json, evaluations and per-worker training losses."""

    path: str
    summary: dict
    label: str
    evaluations: list[dict]  # sorted by time_s
    losses: list[tuple[float, float]]  # (fraction of workload, loss) from every worker's metrics record

    @property
    def status(self) -> str:
        return self.summary.get("status") or "unknown"

    @property
    def completed(self) -> bool:
        return self.status == "completed"

    @property
    def total_time_s(self) -> float | None:
        return _number(self.summary.get("total_time_s"))

    @property
    def converged_accuracy(self) -> float | None:
        return _number(self.summary.get("converged_accuracy"))

    @property
    def switches(self) -> list[dict]:
        return [s for s in self.summary.get("switches") or [] if isinstance(s, dict)]

    @property
    def switch_overhead_s(self) -> float | None:
        """Summed overhead of this run's switches; None when it never switched."""
        overheads = [o for o in (_number(s.get("overhead_s")) for s in self.switches) if o is not None]
        return sum(overheads) if overheads else None

    def switch_times(self) -> list[float]:
        """Seconds since the first step at which each switch began: the phases before it plus earlier overheads."""
        phases = [p for p in self.summary.get("schedule") or [] if isinstance(p, dict)]
        times, elapsed = [], 0.0
        for k, switch in enumerate(self.switches):
            if k >= len(phases):
                break
            elapsed += _number(phases[k].get("wall_time_s")) or 0.0
            times.append(elapsed)
            elapsed += _number(switch.get("overhead_s")) or 0.0
        return times

    def time_to_accuracy(self, target: float | None) -> float | None:
        """Time of the first evaluation whose accuracy reached target (None if none did)."""
        return metrics.time_to_accuracy(self.evaluations, target)


@dataclasses.dataclass
class VariantRow:
    """Aggregates over the repeats of one variant; means cover completed runs only."""

    label: str
    runs: list[Run]
    completed: int
    time_mean: float | None = None
    time_std: float | None = None
    accuracy_mean: float | None = None
    accuracy_std: float | None = None
    accuracy_min: float | None = None
    accuracy_max: float | None = None
    tta_mean: float | None = None  # over the completed runs that reached the target
    tta_reached: int = 0
    tta_speedup_vs_bsp: float | None = None
    tta_speedup_vs_asp: float | None = None
    time_speedup_vs_bsp: float | None = None
    time_speedup_vs_asp: float | None = None
    overhead_mean: float | None = None


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def variant_label(summary: dict) -> str:
    """bsp, asp, switch@F, or the protocol sequence; +POLICY when a straggler policy was active."""
    protocols = [p.get("protocol") for p in summary.get("schedule") or [] if isinstance(p, dict)]
    switch_at = _number(summary.get("switch_at"))
    # switch_at comes from the planned schedule, so a run that failed early still lands in its variant.
    if switch_at == 1.0 or (switch_at is None and protocols and set(protocols) == {"bsp"}):
        label = "bsp"
    elif switch_at == 0.0 or (switch_at is None and protocols and set(protocols) == {"asp"}):
        label = "asp"
    elif switch_at is not None:
        label = f"switch@{switch_at:g}"
    else:
        label = "->".join(str(p) for p in protocols) or "unknown"
    policy = summary.get("straggler_policy")
    if isinstance(policy, dict):
        policy = policy.get("name")
    if policy and str(policy).lower() != "none":
        label += f"+{policy}"
    return label


def _read_metrics(run_dir: str) -> tuple[list[tuple[float, float]], list[dict]]:
    losses, evaluations = [], []
    for record in read_records(run_dir):
        if record.get("kind") == "metrics":
            fraction, loss = _number(record.get("fraction")), _number(record.get("loss"))
            if fraction is not None and loss is not None:
                losses.append((fraction, loss))
        elif record.get("kind") == "evaluation":
            evaluations.append(record)
    return losses, evaluations


def _clean_evaluations(records) -> list[dict]:
    out = []
    for e in records or []:
        if isinstance(e, dict) and _number(e.get("time_s")) is not None and _number(e.get("accuracy")) is not None:
            out.append({"fraction": _number(e.get("fraction")), "time_s": float(e["time_s"]),
                        "accuracy": float(e["accuracy"]), "loss": _number(e.get("loss"))})
    return sorted(out, key=lambda e: e["time_s"])


def load_run(path: str) -> Run:
    """Read one run folder; SpecError names the folder or file when it is not a readable run."""
    summary = read_summary(path).doc
    losses, metric_evaluations = _read_metrics(path)
    evaluations = _clean_evaluations(summary.get("evaluations") or metric_evaluations)
    return Run(path=path, summary=summary, label=variant_label(summary), evaluations=evaluations, losses=losses)


def load_runs(paths) -> list[Run]:
    """Every run under paths (run folders or their parents), in the order found."""
    return [load_run(d) for d in find_run_dirs(paths)]


def _variant_key(label: str):
    base, _, policy = label.partition("+")
    if base == "bsp":
        return (0, 0.0, base, policy)
    if base == "asp":
        return (1, 0.0, base, policy)
    if base.startswith("switch@"):
        return (2, float(base.split("@", 1)[1]), base, policy)
    return (3, 0.0, base, policy)


def _mean_std(values):
    if not values:
        return None, None
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else None)


def _ratio(numerator, denominator):
    return numerator / denominator if numerator is not None and denominator else None


def choose_target(runs: list[Run], target: float | None = None) -> tuple[float | None, str]:
    """The TTA target and a sentence on how it was chosen: explicit, the runs' shared one, or
    metrics.reference_target over the BSP runs."""
    if target is not None:
        return target, "given explicitly (--target-accuracy)"
    targets = {_number(r.summary.get("target_accuracy")) for r in runs}
    if len(targets) == 1 and None not in targets:
        return targets.pop(), "the target_accuracy every run's job spec set"
    bsp = [r.converged_accuracy for r in runs if r.label == "bsp" and r.completed and r.converged_accuracy is not None]
    if bsp:
        return metrics.reference_target(bsp), ("the runs share no target_accuracy, so the BSP variant's median "
                                               f"converged accuracy minus {metrics.TARGET_MARGIN}")
    return None, "the runs share no target_accuracy and there is no completed BSP run, so no TTA is computed"


def summarize(runs: list[Run], target: float | None) -> list[VariantRow]:
    """One row per variant (bsp, asp, switch@F ascending, others), speedups relative to bsp and asp."""
    groups: dict[str, list[Run]] = {}
    for run in runs:
        groups.setdefault(run.label, []).append(run)
    rows = []
    for label in sorted(groups, key=_variant_key):
        members = groups[label]
        done = [r for r in members if r.completed]
        row = VariantRow(label=label, runs=members, completed=len(done))
        row.time_mean, row.time_std = _mean_std([r.total_time_s for r in done if r.total_time_s is not None])
        accuracies = [r.converged_accuracy for r in done if r.converged_accuracy is not None]
        row.accuracy_mean, row.accuracy_std = _mean_std(accuracies)
        if accuracies:
            row.accuracy_min, row.accuracy_max = min(accuracies), max(accuracies)
        ttas = [t for t in (r.time_to_accuracy(target) for r in done) if t is not None]
        row.tta_mean, row.tta_reached = _mean_std(ttas)[0], len(ttas)
        row.overhead_mean = _mean_std([r.switch_overhead_s for r in done if r.switch_overhead_s is not None])[0]
        rows.append(row)
    base = {row.label: row for row in rows}
    for row in rows:
        for name in ("bsp", "asp"):
            ref = base.get(name)
            setattr(row, f"tta_speedup_vs_{name}", _ratio(ref and ref.tta_mean, row.tta_mean))
            setattr(row, f"time_speedup_vs_{name}", _ratio(ref and ref.time_mean, row.time_mean))
    return rows


def _fmt(value, spec=".1f", missing="–"):
    return missing if value is None else format(value, spec)


def markdown_table(rows: list[VariantRow], target: float | None) -> str:
    header = ["variant", "runs (completed/total)", "total time (s)", "converged acc", "acc std", "acc min–max",
              "TTA (s)", "TTA speedup vs BSP", "TTA speedup vs ASP", "time speedup vs BSP", "time speedup vs ASP",
              "switch overhead (s)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        time = "–" if r.time_mean is None else f"{r.time_mean:.1f} ± {_fmt(r.time_std, '.1f', '–')}"
        spread = "–" if r.accuracy_min is None else f"{r.accuracy_min:.4f}–{r.accuracy_max:.4f}"
        if target is None:
            tta = "n/a"
        elif not r.completed:
            tta = "–"
        elif r.tta_mean is None:
            tta = f"not reached (0/{r.completed})"
        else:
            tta = f"{r.tta_mean:.1f} ({r.tta_reached}/{r.completed} reached)"
        na = "n/a" if target is None else "–"
        cells = [r.label, f"{r.completed}/{len(r.runs)}", time, _fmt(r.accuracy_mean, ".4f"),
                 _fmt(r.accuracy_std, ".4f"), spread, tta, _fmt(r.tta_speedup_vs_bsp, ".2f", na),
                 _fmt(r.tta_speedup_vs_asp, ".2f", na), _fmt(r.time_speedup_vs_bsp, ".2f"),
                 _fmt(r.time_speedup_vs_asp, ".2f"), _fmt(r.overhead_mean, ".2f")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def render_markdown(runs: list[Run], rows: list[VariantRow], target: float | None, how: str) -> str:
    parts = ["# Sync-Switch report\n\n", markdown_table(rows, target)]
    if target is None:
        parts.append(f"\nNo target accuracy: {how}.\n")
    else:
        parts.append(f"\nTarget accuracy {target:.4f}: {how}. TTA is the time_s (seconds since the first "
                     "training step) of a run's first evaluation at or above it, averaged over the runs that "
                     "reached it.\n")
    parts.append("\nMeans cover completed runs only; std is the sample standard deviation (– for one run). "
                 "Speedups are the BSP (or ASP) variant's mean over this variant's mean; switch overhead is "
                 "the summed overhead_s of a run's switches.\n\n## Runs\n")
    for row in rows:
        parts.append(f"\n**{row.label}**\n\n")
        for run in row.runs:
            note = "" if run.completed else f" ({run.status}, excluded from means)"
            parts.append(f"- {run.path}{note}\n")
    return "".join(parts)


def _binned_loss(losses, bins=LOSS_BINS):
    sums, counts = [0.0] * bins, [0] * bins
    for fraction, loss in losses:
        k = min(max(int(fraction * bins), 0), bins - 1)  # fractions overshoot 1.0 by a last batch
        sums[k] += loss
        counts[k] += 1
    return [((k + 0.5) / bins, sums[k] / counts[k]) for k in range(bins) if counts[k]]


def plot(runs: list[Run], path: str, target: float | None = None) -> None:
    """Accuracy vs wall-clock time and binned training loss vs progress, one line per run, color per variant."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # Agg without touching pyplot's global backend
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    fig = Figure(figsize=(12, 4.5))
    FigureCanvasAgg(fig)
    left, right = fig.subplots(1, 2)
    labels = sorted({r.label for r in runs}, key=_variant_key)
    colors = {label: f"C{i % 10}" for i, label in enumerate(labels)}
    for run in runs:
        color = colors[run.label]
        style = dict(color=color, linestyle="-" if run.completed else ":", alpha=0.85)
        left.plot([e["time_s"] for e in run.evaluations], [e["accuracy"] for e in run.evaluations], **style)
        curve = _binned_loss(run.losses)
        right.plot([x for x, _ in curve], [y for _, y in curve], **style)
        for t in run.switch_times():
            left.axvline(t, color=color, linestyle="--", alpha=0.5, linewidth=1)
        for f in (_number(s.get("at_fraction")) for s in run.switches):
            if f is not None:
                right.axvline(f, color=color, linestyle="--", alpha=0.5, linewidth=1)
    handles = [Line2D([], [], color=colors[label], label=label) for label in labels]
    right.legend(handles=handles, fontsize="small")
    if target is not None:
        left.axhline(target, color="gray", linestyle=":", linewidth=1)
        handles.append(Line2D([], [], color="gray", linestyle=":", label=f"target {target:.4f}"))
    left.legend(handles=handles, fontsize="small")
    left.set(xlabel="wall-clock time since first step (s)", ylabel="test accuracy", title="Test accuracy")
    right.set(xlabel="progress (fraction of workload)", ylabel="training loss (worker mean)", title="Training loss")
    left.grid(alpha=0.3)
    right.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=110)


def write_report(runs: list[Run], out_dir: str, target: float | None = None) -> tuple[str, str]:
    """Write report.png and report.md under out_dir; target None picks the default (see choose_target)."""
    if not runs:
        raise SpecError("no runs to report")
    target, how = choose_target(runs, target)
    rows = summarize(runs, target)
    os.makedirs(out_dir, exist_ok=True)
    png, md = os.path.join(out_dir, "report.png"), os.path.join(out_dir, "report.md")
    write_atomic(png, lambda tmp: plot(runs, tmp, target))
    text = render_markdown(runs, rows, target, how)
    write_text_atomic(md, text)
    return png, md
