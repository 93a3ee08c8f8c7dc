"""Submit-to-first-step time of the quickstart job on a 4-worker local cluster (target: under 20 s).

Each repeat runs `syncswitch submit` on a tiny workload in its own process (a cold start, as a user's) and reads
`init_time_s` from its summary.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from bench import common

RESULT_SCHEMA = {"init_time_s": "median submit-to-first-step seconds", "min": "fastest", "max": "slowest",
                 "runs": "every repeat's seconds", "workers": "cluster size"}


def add_options(parser) -> None:
    parser.add_argument("--repeats", type=int, help="Submits (default 1 quick, 3).")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--job", default=common.QUICKSTART)


def run_part(args, root) -> dict:
    times = []
    for r in range(args.repeats or (1 if args.quick else 3)):
        run_dir = os.path.join(root, f"run-{r}")
        subprocess.run([sys.executable, "-m", "syncswitch", "submit", args.job, "--workers", str(args.workers),
                        "--set", "workload.epochs=0.3", "--protocol", "asp", "--output-dir", run_dir, "--quiet"],
                       check=True, cwd=common.ROOT, timeout=600)
        with open(os.path.join(run_dir, "summary.json"), encoding="utf-8") as fh:
            times.append(json.load(fh)["init_time_s"])
    stats = common.spread(times)
    return {"init_time_s": stats["median"], "min": stats["min"], "max": stats["max"], "runs": times,
            "workers": args.workers}


if __name__ == "__main__":
    from bench import parts

    sys.exit(parts.main_of(__spec__.name))
