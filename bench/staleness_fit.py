"""Arrival models against real runs' per-update staleness: which stall model gives the real distribution.

The real side is a `bench protocols` result run with the per-update record on (`SYNCSWITCH_UPDATE_LOG=1`): each run's
updates, pooled over its seeds, for one variant (ASP: the protocol the comparison calibrates on). The simulated side
is the comparison's model (`--speeds` on one shared core, calibrated to the real mean) with each `--stalls` P/M and
without, `--seeds` seeds of as many updates as a real run has, no gradients. Each model's row: the chi-square of the
real counts against its pmf (bins 0-9, 10+; syncswitch/simulator/staleness_fit.py) and the pmf's shape.

    SYNCSWITCH_UPDATE_LOG=1 python -m bench protocols --job jobs/quickstart.yaml --workers 4 --variants asp ... \\
        --out REAL.json
    python -m bench staleness-fit --real REAL.json --stalls 0.05/5,0.12/2,0.16/1.5,0.16/2 --out FIT.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import numpy as np

from bench.scale_vs_real import SIGMA, shared_model
from syncswitch.errors import SpecError
from syncswitch.simulator.arrivals import arrival_model
from syncswitch.simulator.staleness_fit import chi_square, counted_staleness, model_staleness, shape

STALLS = "0.05/5,0.08/3,0.12/2,0.16/1.5,0.16/2,0.24/1.5"


def real_staleness(doc: dict, variant: str, into: dict) -> None:
    """Add each job's runs of a protocols result to `into` (job -> its workers and each run's per-update counted
    staleness, one array a run): several results of one job pool, at one worker count."""
    for job, entry in doc["jobs"].items():
        runs = entry["variants"].get(variant, {}).get("runs") or []
        logged = [counted_staleness(r.get("measured") or {}) for r in runs if (r.get("measured") or {}).get(
            "update_log")]
        if not logged:
            continue
        pooled = into.setdefault(job, {"workers": doc["workers"], "runs": []})
        if pooled["workers"] != doc["workers"]:
            raise ValueError(f"{job} at {pooled['workers']} and {doc['workers']} workers; give one worker count")
        pooled["runs"].extend(logged)


def fit_job(real_runs: list, workers: int, speeds: str, stalls: list[str], seeds: int) -> dict:
    """Every model's chi-square and shape against one job's pooled real updates."""
    real = np.concatenate(real_runs)
    mean = float(real.mean())
    updates = int(statistics.median(len(r) for r in real_runs))
    rows = []
    for stall in [""] + stalls:
        model = shared_model(speeds, 1, mean, stall, call=0.0)  # the comparison's model, ASP (no call priced)
        sim = model_staleness(model, workers, range(seeds), updates)
        rows.append({"stall": stall or None, "model": model, "chi_square": round(chi_square(real, sim), 1),
                     **shape(sim)})
    best = min(rows, key=lambda r: r["chi_square"])
    return {"workers": workers, "real": shape(real), "real_runs": [shape(r) for r in real_runs],
            "updates_per_run": updates, "models": rows, "best": best["stall"]}


def markdown(jobs: dict) -> list[str]:
    lines = ["| job | model | chi-square | mean | sd | P(0) | P(1) | P(2) | P(3) | P(>=4) | P(>=6) | max |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]

    def row(job, name, chi, s):
        return (f"| {job} | {name} | {chi} | {s['mean']:.3f} | {s['sd']:.2f} | {s['p0']:.3f} | {s['p1']:.3f} | "
                f"{s['p2']:.3f} | {s['p3']:.3f} | {s['p_ge4']:.3f} | {s['p_ge6']:.3f} | {s['max']} |")

    for job, fit in jobs.items():
        lines.append(row(job, "real", "-", fit["real"]))
        lines += [row(job, f"stall {m['stall']}" if m["stall"] else "no stall", m["chi_square"], m) for m in
                  fit["models"]]
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--real", action="append", required=True,
                        help="a bench protocols result run with SYNCSWITCH_UPDATE_LOG=1 (repeatable: one job's runs "
                             "in several results pool)")
    parser.add_argument("--variant", default="asp", help="the variant whose updates are fitted (default asp)")
    parser.add_argument("--stalls", default=STALLS, help=f"stall models P/M, comma-separated (default {STALLS})")
    parser.add_argument("--speeds", default=SIGMA, help=f"the workers' speeds before the shared core (default {SIGMA})")
    parser.add_argument("--seeds", type=int, default=5, help="simulated seeds per model (default 5)")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    stalls = [s for s in args.stalls.split(",") if s]
    try:
        for stall in stalls:
            arrival_model(f"{args.speeds}+cores:1:stall={stall}", 2, 0)
        real = {}
        for path in args.real:
            with open(path, encoding="utf-8") as fh:
                real_staleness(json.load(fh), args.variant, real)
    except SpecError as exc:
        parser.exit(2, f"staleness-fit: {exc}\n")
    except (OSError, ValueError, KeyError) as exc:
        parser.exit(2, f"staleness-fit: --real: {exc}\n")
    if not real:
        parser.exit(2, f"staleness-fit: --real: no {args.variant} runs with a per-update record "
                       "(run bench protocols with SYNCSWITCH_UPDATE_LOG=1)\n")
    jobs = {job: fit_job(r["runs"], r["workers"], args.speeds, stalls, args.seeds) for job, r in real.items()}
    print("\n".join(markdown(jobs)))
    doc = {"part": "staleness-fit", "real": args.real, "variant": args.variant, "speeds": args.speeds,
           "seeds": args.seeds, "bins": "0-9, 10+", "jobs": jobs}
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
