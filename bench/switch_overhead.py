"""BSP->ASP switch overhead (summary switches[0].overhead_s) in place and by relaunch, for 2, 4 and 8 local workers."""

from __future__ import annotations

import os
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench import common  # noqa: E402

MODES = ("in-place", "relaunch")
SIZES = (2, 4, 8)
QUICK_SIZES = (2, 4)
SAMPLES = 24000


def job_file(root: str, samples: int) -> str:
    """A tiny digits-MLP job with one switch at half the workload and one evaluation at the end."""
    doc = {"name": "bench-switch-overhead", "script": os.path.join(common.ROOT, "examples", "digits_mlp.py"),
           "params": {}, "hyperparameters": {"batch_size": 16, "learning_rate": 0.05, "momentum": 0.9},
           "workload": {"samples": samples}, "cluster": {"backend": "local", "workers": 2},
           "policy": {"switch_at": 0.5}, "evaluation": {"every": 1.0}}
    path = os.path.join(root, "switch-overhead-job.yaml")
    with open(path, "w", encoding="utf-8") as fh:
        yaml.safe_dump(doc, fh, sort_keys=False)
    return path


def measure(repeats: int, root: str, sizes=SIZES, samples: int = SAMPLES) -> dict:
    """For each size, modes interleaved per repeat: (in-place, relaunch) x repeats."""
    job = job_file(root, samples)
    out = {"job": job, "workload_samples": samples, "repeats": repeats, "sizes": list(sizes),
           "note": "digits MLP, batch 16, switch at 0.5; overhead_s = last worker's first ASP step minus the "
                   "first worker's pause at the BSP boundary"}
    failures = 0
    for n in sizes:
        per_mode = {mode: [] for mode in MODES}
        for r in range(repeats):
            for mode in MODES:
                spec = common.load_spec(job, [f"cluster.workers={n}", f"policy.switch_mode={mode}"])
                summary = common.run_summary(spec, "switch@0.5", os.path.join(root, f"w{n}-{mode}-r{r}"))
                per_mode[mode].append(summary)
        row = {}
        for mode, summaries in per_mode.items():
            values = [s["switches"][0]["overhead_s"] if s.get("status") == "completed" and s.get("switches")
                      else None for s in summaries]
            failures += sum(v is None for v in values)
            name = mode.replace("-", "_")  # in_place | relaunch
            row[f"{name}_s"] = common.spread(values)
            row[f"{name}_errors"] = [s.get("message") for s in summaries if s.get("status") != "completed"]
        out[str(n)] = row
    if failures == len(sizes) * repeats * len(MODES):
        raise RuntimeError(f"no switch-overhead run completed: {out[str(sizes[0])]['in_place_errors'][:1]}")
    return out


def _args(parser) -> None:
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--sizes", help="Comma-separated worker counts (default 2,4,8; --quick 2,4).")
    parser.add_argument("--samples", type=int, default=SAMPLES, help="Workload in samples (switch at half).")


def _run(args, root) -> dict:
    sizes = tuple(int(s) for s in args.sizes.split(",")) if args.sizes else (QUICK_SIZES if args.quick else SIZES)
    return measure(args.repeats or (1 if args.quick else 3), root, sizes, args.samples)


if __name__ == "__main__":
    sys.exit(common.standalone(__doc__.splitlines()[0], _args, _run))
