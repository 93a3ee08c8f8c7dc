"""Simulated against real: each protocol's simulated accuracy at 4 workers against the real runs' seed spread.

The real side is what earlier protocol benchmarks recorded (bench/results/protocols-*.json, 5 seeds, 4 local
workers on 2 cores, guard off); the simulated side a `bench.scale` result at the same worker count. A protocol
agrees when the simulated median lies within the real runs' [min, max].

    python -m bench.scale_vs_real --sim bench/results/scale-sim-4workers-quickstart-2026-11-25.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from bench.common import ROOT

# (real result file, the job's name there) -> the variants taken from it; a protocol alone is its own variant.
REAL = {
    "protocols-quickstart-digits-4workers-5seeds-2026-11-24.json": ["bsp", "asp", "ssp", "dc-asgd", "fasgd",
                                                                    "specsync"],
    "protocols-bfasgd-quickstart-digits-4workers-2026-11-25.json": ["b-fasgd"],
    "protocols-local-sgd-quickstart-digits-4workers-2026-11-25.json": ["lookahead", "local-sgd"],
}
NAMES = {"quickstart": "quickstart", "digits_cnn": "digits-cnn"}


def real_cells(job: str) -> dict:
    out = {}
    for name, variants in REAL.items():
        with open(os.path.join(ROOT, "bench", "results", name), encoding="utf-8") as fh:
            doc = json.load(fh)
        found = doc["jobs"].get(NAMES[job], {}).get("variants", {})
        for v in variants:
            if v in found:
                out[v] = {**found[v]["final_accuracy"], "file": name}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sim", action="append", required=True, help="a bench.scale result JSON (repeatable)")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    rows = []
    for path in args.sim:
        with open(path, encoding="utf-8") as fh:
            sim = json.load(fh)
        for job, doc in sim["jobs"].items():
            real = real_cells(job)
            for key, cell in doc["cells"].items():
                variant, workers = key.rsplit("@", 1)
                r = real.get(variant)
                if r is None:
                    continue
                inside = r["min"] <= cell["median"] <= r["max"]
                rows.append({"job": job, "variant": variant, "workers": int(workers), "sim": cell,
                             "real": r, "within_real_spread": inside})
    print("| job | protocol | simulated median [min-max] | real median [min-max] (n) | within the real spread |")
    print("|---|---|---|---|---|")
    for r in rows:
        s, q = r["sim"], r["real"]
        print(f"| {r['job']} | {r['variant']} | {s['median']:.3f} [{s['min']:.3f}-{s['max']:.3f}] | "
              f"{q['median']:.3f} [{q['min']:.3f}-{q['max']:.3f}] ({q['n']}) | "
              f"{'yes' if r['within_real_spread'] else 'no'} |")
    agree = sum(r["within_real_spread"] for r in rows)
    print(f"\n{agree} of {len(rows)} protocol cells within the real runs' seed spread")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump({"rows": rows, "agree": agree, "cells": len(rows)}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
