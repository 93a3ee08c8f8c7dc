"""Replay the speed rule over stored switched runs: would a trial have kept the switch target, or gone back to BSP?

Reads each run folder's summary.json (where it switched, into what) and metrics.jsonl (every worker's throughput
report, as the manager received them) and feeds the rule the reports in order, as the runtime does: BSP's before
the switch, then the target phase's, one at a time, until the trial decides. Pure replay (no cluster):
`python -m bench speed-replay RUN_DIR... [--set margin=1.2] [--set trial_reports=2] [--out F]`. Where the summary
gives the workload (total_samples, BSP's configured global batch) the rule weighs what going back costs against the work
left, as the runtime does. Runs recorded before
a phase's first step was left out of the workers' step times hold it in their first report of the target.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

from bench import common
from syncswitch.policies.speed import MEASURE, MeasuredSpeed, RunCosts, SpeedSettings
from syncswitch.runfolder import read_json, read_records


def _workload(summary: dict) -> tuple[int | None, RunCosts]:
    """(the run's samples in all, what its switch costs are worked out from: BSP's global batch as its first phase
    was configured, which the runtime hands the rule: cluster_manager/job.py) where the summary says them; a run
    without them is replayed as if the work left were unknown (the rule's weighing of what a trial costs against the
    time left is then skipped)."""
    total = summary.get("total_samples")
    phases = summary.get("schedule") or [{}]
    global_batch = (phases[0].get("config") or {}).get("global_batch") if phases[0].get("protocol") == "bsp" else None
    return (total if isinstance(total, int) and total > 0 else None), RunCosts(global_batch=global_batch)


def _left(total: int | None, fraction: float) -> float | None:
    return None if total is None else total * (1 - fraction)


def replay(run_dir: str, settings: SpeedSettings) -> dict | None:
    """The trial's decision in a run that switched out of BSP: {target, switched_at, action, fraction, ratio, ...};
    None for a run that did not switch."""
    summary = read_json(run_dir, "summary.json") or {}
    switches = summary.get("switches") or []
    if not switches:
        return None
    at, target = float(switches[0]["at_fraction"]), switches[0]["to"]
    total, costs = _workload(summary)
    rule = MeasuredSpeed(settings, costs=costs)
    reports = [r for r in read_records(run_dir) if r.get("kind") == "metrics"]
    for r in reports:
        if r.get("phase") == 0 and r.get("protocol") == "bsp" and r["fraction"] < at:
            rule.on_rate("bsp", r["worker"], r["examples_per_s"])
    rule.before_switch(at, target, _left(total, at))
    rule.start_trial()
    out = {"target": target, "switched_at": round(at, 4), "measuring_on_ratio": None}
    for r in reports:
        if r.get("phase") == 1 and r.get("protocol") == target:
            rule.on_rate("target", r["worker"], r["examples_per_s"])
            decision = rule.after_trial(r["fraction"], target, _left(total, r["fraction"]))
            if decision is not None and decision.action == MEASURE:  # within the noise of the bar
                out["measuring_on_ratio"] = out["measuring_on_ratio"] or round(decision.values["ratio"], 3)
            elif decision is not None:
                values = decision.values
                return {**out, "action": decision.action, "fraction": round(decision.fraction, 4),
                        "ratio": round(values["ratio"], 3), "reports": values.get("reports"),
                        "reports_used": values.get("reports_used"),
                        "bsp_examples_per_s": round(values["bsp_examples_per_s"]),
                        "target_examples_per_s": round(values["target_examples_per_s"]),
                        **{k: round(values[k], 3) for k in ("going_back_s", "keeping_worst_s") if k in values}}
    # The run's own trial decided sooner, and its phase ended: the stream holds too few reports to decide on.
    return {**out, "action": "undecided", "fraction": None, "ratio": None}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="Run folders of runs that switched out of BSP.")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                        help="A speed rule threshold (margin, noise, pause_cpu_s, pause_steps, trial_reports, "
                             "trial_max_reports, sigmas, bsp_reports).")
    parser.add_argument("--out", help="Also write the JSON here.")
    args = parser.parse_args(argv)
    given = dict(s.split("=", 1) for s in args.sets)
    settings = SpeedSettings(**{k: (int(v) if k.endswith("_reports") else float(v)) for k, v in given.items()})
    decisions = {os.path.normpath(r): replay(r, settings) for r in args.runs}
    doc = {"settings": dataclasses.asdict(settings), "runs": {k: v for k, v in decisions.items() if v is not None}}
    common.emit(doc, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
