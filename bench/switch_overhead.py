"""BSP->ASP switch overhead (summary switches[0].overhead_s) in place and by relaunch, for 2, 4 and 8 local workers."""

from __future__ import annotations

import os
import sys

import yaml

from bench import common

MODES = ("in-place", "relaunch")
SIZES = (2, 4, 8)
QUICK_SIZES = (2, 4)
# The relaunch run's BSP half must outlast the warm-up of the spare task each agent starts (niced) at launch,
# or the measured overhead includes a TensorFlow import; in place has no spare and needs no long phase.
SAMPLES = {"in-place": 16000, "relaunch": 48000}


def job_file(root: str) -> str:
    """A tiny digits-MLP job with one switch at half the workload and one evaluation at the end."""
    doc = {"name": "bench-switch-overhead", "script": os.path.join(common.ROOT, "examples", "digits_mlp.py"),
           "params": {}, "hyperparameters": {"batch_size": 16, "learning_rate": 0.05, "momentum": 0.9},
           "workload": {"samples": SAMPLES["in-place"]}, "cluster": {"backend": "local", "workers": 2},
           # The switch must happen for its pause to be measured, whatever the speed rule would judge of it, and at
           # the schedule's point: the loss rule read its first report of this 1.5 s run past its latest switch
           # point and stayed on BSP in 2 of 3 in-place runs at 2 workers (10a5d37).
           "policy": {"switch_at": 0.5, "switch_speed": False, "switch_rule": "fixed"}, "evaluation": {"every": 1.0}}
    path = os.path.join(root, "switch-overhead-job.yaml")
    with open(path, "w", encoding="utf-8") as fh:
        yaml.safe_dump(doc, fh, sort_keys=False)
    return path


def cold_spares(run_dir: str | None) -> int | None:
    """Nodes whose warm spare was still importing TensorFlow at a relaunch switch (its overhead then includes
    the import): the agent reports a spare's "warm" only once it is the current task, so a "warm" event after
    the switch checkpoint means the spare warmed up after the switch had begun."""
    import json

    try:
        with open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") as fh:
            events = [json.loads(line) for line in fh if '"metrics"' not in line[:40]]
    except (OSError, TypeError, ValueError):
        return None
    switched = False
    late = set()
    for e in events:
        if e.get("kind") == "saved" and e.get("reason") == "switch":
            switched = True
        elif switched and e.get("kind") == "warm":
            late.add(e.get("source"))
    return len(late)


def measure(repeats: int, root: str, sizes=SIZES, samples: int | None = None) -> dict:
    """For each size, modes interleaved per repeat: (in-place, relaunch) x repeats; `samples` sets both workloads."""
    job = job_file(root)
    workload = {mode: samples or SAMPLES[mode] for mode in MODES}
    out = {"job": job, "workload_samples": workload, "repeats": repeats, "sizes": list(sizes),
           "note": "digits MLP, batch 16, switch at 0.5; overhead_s = last worker's first ASP step minus the "
                   "first worker's pause at the BSP boundary; relaunch_cold_spares counts nodes whose warm spare "
                   "task had not finished importing TensorFlow when the relaunch began (their import is then "
                   "part of the overhead)"}
    failures = 0
    for n in sizes:
        specs = {mode: (common.load_spec(job, common.with_workers([f"policy.switch_mode={mode}",
                                                                   f"workload.samples={workload[mode]}"], n)),
                        "switch@0.5") for mode in MODES}
        per_mode = common.interleaved(specs, repeats, os.path.join(root, f"w{n}"))
        row = {}
        for mode, summaries in per_mode.items():
            values = [s["switches"][0]["overhead_s"] if s.get("status") == "completed" and s.get("switches")
                      else None for s in summaries]
            failures += sum(v is None for v in values)
            name = mode.replace("-", "_")  # in_place | relaunch
            row[f"{name}_s"] = common.spread(values)
            row[f"{name}_errors"] = [s.get("message") for s in summaries if s.get("status") != "completed"]
            if mode == "relaunch":
                row["relaunch_cold_spares"] = [cold_spares(s.get("run_dir")) for s in summaries]
        out[str(n)] = row
    if failures == len(sizes) * repeats * len(MODES):
        raise RuntimeError(f"no switch-overhead run completed: {out[str(sizes[0])]['in_place_errors'][:1]}")
    return out


RESULT_SCHEMA = {
    "job": "the generated digits-MLP job", "workload_samples": "samples per mode", "repeats": "runs per mode and size",
    "sizes": "worker counts; each size's key holds in_place_s and relaunch_s as {median, min, max, n, runs}",
}


def add_options(parser) -> None:
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--sizes", help="Comma-separated worker counts (default 2,4,8; --quick 2,4).")
    parser.add_argument("--samples", type=int, help="Workload of both modes in samples (switch at half; default "
                                                    f"{SAMPLES['in-place']} in place, {SAMPLES['relaunch']} relaunch).")


def run_part(args, root) -> dict:
    sizes = tuple(int(s) for s in args.sizes.split(",")) if args.sizes else (QUICK_SIZES if args.quick else SIZES)
    return measure(args.repeats or (1 if args.quick else 3), root, sizes, args.samples)


if __name__ == "__main__":
    from bench import parts

    sys.exit(parts.main_of(__spec__.name))
