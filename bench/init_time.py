"""Submit-to-first-step time of the quickstart job on a 4-worker local cluster (target: under 20 s).

Each repeat runs `syncswitch submit` on a tiny workload and reads `init_time_s` from its summary.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    times = []
    for _ in range(args.repeats):
        out = tempfile.mkdtemp(prefix="syncswitch-bench-init-")
        subprocess.run([sys.executable, "-m", "syncswitch", "submit", os.path.join(ROOT, "jobs", "quickstart.yaml"),
                        "--workers", str(args.workers), "--set", "workload.epochs=0.3", "--protocol", "asp",
                        "--output-dir", os.path.join(out, "run"), "--quiet"], check=True, cwd=ROOT)
        with open(os.path.join(out, "run", "summary.json")) as fh:
            times.append(json.load(fh)["init_time_s"])
    print(json.dumps({"init_time_s": statistics.median(times), "runs": times, "workers": args.workers}, indent=2))


if __name__ == "__main__":
    main()
