"""What a search's pilots measured of their switch target's speed, for the policy store: a later run of the job
weighs its switch by it before it has switched (policies/speed.py, `known`)."""

from __future__ import annotations

import statistics

from syncswitch.runfolder import read_json


def speed_from_runs(run_dirs, target: str, rule: str) -> dict:
    """The switch target's throughput as a share of BSP's, the median over the runs whose speed rule measured it
    side by side with BSP's in a trial (summary.json `switch_speed`; `kept_phase_ratio` for a run that kept the
    target to the end), and the median pause of the runs' switches out of BSP (`switches[].overhead_s`): a later
    run's speed rule weighs a switch by it before it has switched. {} where the runs measured neither. Simulated
    runs measure nothing here: their updates and switches cost nothing, so a simulated pause of 0 s would have real
    runs of the policy weigh a switch as free."""
    ratios, pauses = [], []
    for run_dir in run_dirs:
        summary = (read_json(run_dir, "summary.json") or {}) if run_dir else {}
        if summary.get("backend") == "simulator":
            continue
        for decision in (summary.get("switch_speed") or {}).get("decisions", []):
            values = decision.get("values") or {}
            decided = decision.get("action") in ("keep", "back")  # a trial's verdict, not its measuring on
            if decided and values.get("source") == "trial" and values.get("target") == target and values.get("ratio"):
                kept = kept_phase_ratio(summary, target) if decision["action"] == "keep" else None
                ratios.append(kept or float(values["ratio"]))
        pauses += [(s.get("mode", "in-place"), float(s["overhead_s"])) for s in summary.get("switches") or []
                   if s.get("from") == "bsp" and isinstance(s.get("overhead_s"), (int, float))]
    out = {"target": target, "ratio": statistics.median(ratios), "runs": len(ratios), "rule": rule} if ratios else {}
    if pauses:  # the pilots switch one way; a pause by relaunch says nothing of one in place
        mode = statistics.mode(m for m, _ in pauses)
        chosen = [p for m, p in pauses if m == mode]
        out.update(pause_s=statistics.median(chosen), pauses=len(chosen), pause_mode=mode)
    return out


def kept_phase_ratio(summary: dict, target: str) -> float | None:
    """The throughput a run's kept target phase delivered, over the BSP phase's before it (summary.json
    `schedule`), where the target ran from its switch to the workload's end; None otherwise.

    A trial decides on its first reports, and it keeps a target as soon as the ratio clears the bar by its noise,
    often after one report a worker, so its ratios lean high: of 39 kept trials of search pilots (a tabular MLP and
    MNIST-1D, 4 workers, local SGD), the trial read 1.32x BSP's throughput (median; 1.12-1.53x) where the whole
    phase after it gave 1.19x (1.02-1.46x), the most where one report decided
    (bench/notebook/2026-11-29-coordinator-24.md). The phase also pays what the trial does not: the guard's
    evaluations, held during the trial. A later run gets the phase."""
    phases = summary.get("schedule") or []
    last = phases[-1] if phases else {}
    if len(phases) < 2 or last.get("protocol") != target or float(last.get("end_fraction") or 0.0) < 1.0:
        return None
    before = phases[-2]
    if before.get("protocol") != "bsp" or not before.get("examples_per_s") or not last.get("examples_per_s"):
        return None
    return float(last["examples_per_s"]) / float(before["examples_per_s"])
