"""Terminal progress: an in-place bar on a TTY, a line every 10% otherwise, and the closing table."""

from __future__ import annotations

import sys
import time


class ProgressBar:
    """Shows progress, examples/s, loss and the test accuracy of the newest checkpoint scored so far."""

    def __init__(self, enabled: bool = True, stream=None, width: int = 24):
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = enabled and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.width = width
        self._last_draw = 0.0
        self._last_decile = -1
        self.accuracy: float | None = None
        self._scored_at = -1.0

    def evaluated(self, fraction: float, accuracy: float) -> None:
        """An evaluation came in; the evaluator fills in older checkpoints after newer ones, which stay shown."""
        if fraction >= self._scored_at:
            self._scored_at, self.accuracy = fraction, accuracy

    def rolled_back(self) -> None:
        """The branch the shown accuracy belongs to was abandoned."""
        self._scored_at, self.accuracy = -1.0, None

    def update(self, fraction: float, protocol: str | None, examples_per_s: float, loss: float | None) -> None:
        if not self.enabled:
            return
        fraction = min(max(fraction, 0.0), 1.0)
        acc = "-" if self.accuracy is None else f"{self.accuracy:.3f}"
        loss_s = "-" if loss is None else f"{loss:.3f}"
        filled = int(fraction * self.width)
        line = (f"[{'#' * filled}{'.' * (self.width - filled)}] {fraction * 100:5.1f}% {protocol or '-':>3} "
                f"{examples_per_s:8.0f} ex/s  loss {loss_s}  acc {acc}")
        now = time.time()
        if self.tty:
            if now - self._last_draw >= 0.2:
                self.stream.write("\r" + line)
                self.stream.flush()
                self._last_draw = now
        elif int(fraction * 10) > self._last_decile:
            self._last_decile = int(fraction * 10)
            self.stream.write(line + "\n")
            self.stream.flush()

    def message(self, text: str) -> None:
        if not self.enabled:
            return
        if self.tty:
            self.stream.write("\r\033[K")
        self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def summary_table(summary: dict) -> str:
    """A short human table of a finished run."""
    def fmt(v, spec="{:.4f}"):
        return "-" if v is None else spec.format(v)

    rows = [
        ("status", summary.get("status")),
        ("workers", summary.get("workers")),
        ("total time", fmt(summary.get("total_time_s"), "{:.1f} s")),
        ("submit to first step", fmt(summary.get("init_time_s"), "{:.1f} s")),
        ("final accuracy", fmt(summary.get("final_accuracy"))),
        ("converged accuracy", fmt(summary.get("converged_accuracy"))),
        ("time to accuracy", fmt(summary.get("time_to_accuracy_s"), "{:.1f} s")
         + (f" (target {summary['target_accuracy']:.4f})" if summary.get("target_accuracy") is not None else "")),
    ]
    for phase in summary.get("schedule", []):
        share = collective_share(phase)
        rows.append((f"phase {phase['protocol']} {phase['start_fraction']:.2f}-{phase['end_fraction']:.2f}",
                     f"{fmt(phase.get('wall_time_s'), '{:.1f} s')}, {fmt(phase.get('examples_per_s'), '{:.0f}')} ex/s"
                     + (f", all-reduce {share:.0%} of it" if share is not None else "")))
    for sw in summary.get("switches", []):
        rows.append((f"switch {sw['from']}->{sw['to']} @ {sw['at_fraction']:.3f}",
                     f"{sw['mode']}, overhead {sw['overhead_s']:.3f} s"))
    rows.append(("outputs", summary.get("run_dir")))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"  {k:<{width}}  {v}" for k, v in rows)


def collective_share(phase: dict) -> float | None:
    """The share of a phase's time its all-reduces took on the last worker to pause (the group's slowest, whose
    time in them is the collective's own, not a wait for a peer): BSP's every step, local SGD's averages. It is
    the bytes' time on a slow network and a large model, the round trips' on a small model: only the former is
    what `hyperparameters.compression` shortens (docs/protocols.md)."""
    measured, wall = phase.get("measured") or {}, phase.get("wall_time_s")
    spent = measured.get("allreduce_s", measured.get("average_s") if measured.get("allreduce") else None)
    return min(1.0, spent / wall) if spent is not None and wall else None
