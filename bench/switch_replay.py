"""Replay the switch rule over stored runs: where would it have switched out of BSP, or kept the run synchronous?

Reads each run folder's metrics.jsonl (the loss reports of every worker, as the manager received them) and feeds the
rule the reports in order, as the runtime does: from the earliest point on, the furthest progress any worker
reported is where it decides. Pure replay (no cluster): `python -m bench switch-replay RUN_DIR... [--earliest F]
[--set KEY=VALUE]`; `--sweep` tries the grid of thresholds below and prints, per setting and run, the decision.
`--observe F` prints instead what the rule reads at F in each run (initial loss, loss, drop): whether a BSP run
was still on its initial plateau there.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import sys

from bench import common
from syncswitch.policies.timing import SWITCH, LossRegimeTiming, TimingSettings

SWEEP = {"min_drop": (0.3, 0.5, 0.7), "max_rate": (0.1, 0.15, 0.25), "latest": (0.5, 0.6, 0.75)}


def losses(run_dir: str) -> list[tuple[float, float]]:
    """(fraction, loss) of every metrics report of the run's synchronous phase, in arrival order."""
    out = []
    with open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") as fh:
        for line in fh:
            event = json.loads(line)
            if event.get("kind") == "metrics" and "loss" in event:
                out.append((float(event["fraction"]), float(event["loss"])))
    return out


def replay(reports, settings: TimingSettings, earliest: float) -> dict:
    """The rule's decision over `reports`: {action, fraction, reason} (action "none" when the stream ends first)."""
    rule, reached = LossRegimeTiming(settings), 0.0
    for fraction, loss in reports:
        rule.on_loss(fraction, loss)
        reached = max(reached, fraction)
        if reached < earliest - settings.smoothing:
            continue
        decision = rule.decide(reached, earliest)
        if decision is None or (reached < earliest and decision.action != SWITCH):
            continue
        return {"action": decision.action, "fraction": round(max(reached, earliest), 4), "reason": decision.reason}
    return {"action": "none", "fraction": reached, "reason": "the stream ended first"}


def observe(reports, settings: TimingSettings, fraction: float) -> dict:
    """What the rule reads at `fraction` from the reports up to it: initial loss, loss, loss a window ago, drop."""
    rule = LossRegimeTiming(settings)
    for at, loss in reports:
        if at <= fraction:
            rule.on_loss(at, loss)
    return rule.observed(fraction)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="Run folders (metrics.jsonl of a BSP run, or its BSP phase).")
    parser.add_argument("--earliest", type=float, default=0.25, help="The schedule's switch point (default 0.25).")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--sweep", action="store_true", help=f"Every combination of {SWEEP}.")
    parser.add_argument("--observe", type=float, metavar="F", help="Print what the rule reads at F instead.")
    parser.add_argument("--out", help="Also write the JSON here.")
    args = parser.parse_args(argv)
    base = TimingSettings(**{k: float(v) for k, v in (s.split("=", 1) for s in args.sets)})
    if args.observe is not None:
        seen = {r: observe(losses(r), base, args.observe) for r in args.runs}
        print(json.dumps({"at": args.observe, "runs": seen}, indent=2))
        return 0
    grid = [dict(zip(SWEEP, values)) for values in itertools.product(*SWEEP.values())] if args.sweep else [{}]
    streams = {os.path.basename(os.path.normpath(r)): losses(r) for r in args.runs}
    result = []
    for changes in grid:
        settings = dataclasses.replace(base, **changes)
        decisions = {name: replay(reports, settings, args.earliest) for name, reports in streams.items()}
        result.append({"settings": dataclasses.asdict(settings), "decisions": decisions})
    doc = {"earliest": args.earliest, "runs": list(streams), "replays": result}
    common.emit(doc, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
