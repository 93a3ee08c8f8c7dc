"""A recurring job after `syncswitch search`: is each later run as good as BSP, and does it finish sooner?

A user's loop for a job trained again and again: `syncswitch search JOB` once (real pilots, each of which tries the
switch target, so a job too short for one run to risk a speed trial still gets its target's speed measured and
stored), then `syncswitch submit JOB` as before, which adopts the stored switch point and speed. This part types
those commands, in a SYNCSWITCH_HOME of its own (no other store is read or written), then per seed the job's BSP run
(`--protocol bsp`) and its run at the defaults, taking turns. It reports what the search stored and cost, and per
variant median [min-max] of final accuracy and training time, with each recurring run's time over the same seed's
BSP run's.

    python -m bench recurring --job bench/workloads/tabular_mlp.yaml --out bench/results/recurring-x.json
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from bench import common
from syncswitch.runfolder import read_json

VARIANTS = {"bsp": ["--protocol", "bsp"], "recurring": []}


def syncswitch(args: list[str], home: str, timeout_s: float) -> subprocess.CompletedProcess:
    """One syncswitch command as a user types it, with this part's own policy store."""
    return subprocess.run([sys.executable, "-m", "syncswitch", *args], capture_output=True, text=True,
                          cwd=common.ROOT, timeout=timeout_s, check=False, env={**os.environ, "SYNCSWITCH_HOME": home})


def search(job: str, root: str, home: str, extra: list[str], timeout_s: float) -> dict:
    """`syncswitch search JOB`: what it stored (switch point, the target's measured speed) and what it cost."""
    common.log(f"search {job} {' '.join(extra)}")
    proc = syncswitch(["search", job, "--output-dir", os.path.join(root, "pilots"), "--format", "json", *extra],
                      home, timeout_s)
    if proc.returncode != 0:
        raise RuntimeError(f"syncswitch search failed (code {proc.returncode}): {proc.stderr.strip()[-600:]}")
    policy = json.loads(proc.stdout)["policy"]
    common.log(f"  -> switch at {policy['switch_at']:.4g}, speed {policy.get('speed')}")
    return {key: policy.get(key) for key in ("switch_at", "target_accuracy", "achieved_mean", "speed", "runs",
                                             "search_cost_s", "search_cost_bsp", "target_params")}


def submit(variant: str, job: str, seed: int, root: str, home: str, timeout_s: float) -> dict:
    """One run of the job, BSP or at its defaults (which read the stored policy); what it did."""
    out = os.path.join(root, f"{variant}-s{seed}")
    proc = syncswitch(["submit", job, "--quiet", "--output-dir", out, "--set", f"seed={seed}", *VARIANTS[variant]],
                      home, timeout_s)
    s = read_json(out, "summary.json")
    if s is None:
        return {"variant": variant, "seed": seed, "error": f"no summary (code {proc.returncode}): "
                                                           f"{proc.stderr.strip()[-400:]}"}
    speed = [d for d in (s.get("switch_speed") or {}).get("decisions", []) if d.get("action") != "abandoned"]
    run = {"variant": variant, "seed": seed, "status": s.get("status"), "final_accuracy": s.get("final_accuracy"),
           "train_time_s": s.get("total_time_s"),
           "switched_at": [sw.get("at_fraction") for sw in s.get("switches") or []],
           # where the run's switch point came from: the policy store, or a switch_at the spec names (which wins)
           "switch_point_source": (s.get("timing_policy") or {}).get("source"),
           "speed_decision": speed[-1].get("reason") if speed else None,
           "guard_events": [e.get("reason") for e in s.get("guard_events") or []], "run_dir": out}
    common.log(f"  {variant} seed {seed} -> acc {common.fmt(run['final_accuracy'], 3)}, "
               f"{common.fmt(run['train_time_s'])} s, switched at {run['switched_at']}")
    return run


def summarize(runs: list[dict]) -> dict:
    """Per variant median [min, max] of accuracy and time; each recurring run's time over its seed's BSP run's."""
    done = [r for r in runs if r.get("status") == "completed"]
    table = {v: {f: common.spread([r[f] for r in done if r["variant"] == v]) for f in ("final_accuracy",
                                                                                      "train_time_s")}
             for v in VARIANTS}
    bsp = {r["seed"]: r for r in done if r["variant"] == "bsp"}
    rec = [r for r in done if r["variant"] == "recurring"]
    pairs = [(r, bsp[r["seed"]]) for r in rec if r["seed"] in bsp]  # each recurring run and its seed's BSP run
    table["recurring"]["time_vs_same_seed_bsp"] = common.spread(
        [common.ratio(r["train_time_s"], b["train_time_s"]) for r, b in pairs])
    table["recurring"]["points_vs_same_seed_bsp"] = common.spread(
        [100 * (r["final_accuracy"] - b["final_accuracy"]) for r, b in pairs])
    table["recurring"]["switched"] = sum(bool(r["switched_at"]) for r in rec)
    return table


RESULT_SCHEMA = {"job": "the job spec", "seeds": "the seeds of the runs after the search",
                 "search_args": "the options given to `syncswitch search` beyond its defaults",
                 "search": "what the search stored (switch point, the target's speed) and what it cost",
                 "table": "per variant: median [min, max] of accuracy and training time; the recurring runs' time "
                          "and accuracy against the same seed's BSP run",
                 "runs": "every run after the search"}


def add_options(parser) -> None:
    parser.add_argument("--job", default=os.path.join("bench", "workloads", "tabular_mlp.yaml"))
    parser.add_argument("--seeds", default="11,12,13,14,15", help="seeds of the runs after the search")
    parser.add_argument("--search-args", default="", help="options for `syncswitch search` (e.g. '--runs 2')")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds for the search; a run gets 900")


def run_part(args, root) -> dict:
    seeds = [int(s) for s in args.seeds.split(",") if s] if not args.quick else [11, 12]
    extra = args.search_args.split() + (["--runs", "2", "--max-settings", "3"] if args.quick else [])
    home = os.path.join(root, "home")
    os.makedirs(home, exist_ok=True)
    found = search(args.job, root, home, extra, args.timeout)
    runs = []
    for i, seed in enumerate(seeds):
        order = list(VARIANTS) if i % 2 == 0 else list(VARIANTS)[::-1]  # taking turns: neither always first
        runs += [submit(v, args.job, seed, root, home, 900.0) for v in order]
    return {"job": args.job, "seeds": seeds, "search_args": extra, "search": found, "table": summarize(runs),
            "runs": runs}


if __name__ == "__main__":
    from bench import parts

    sys.exit(parts.main_of(__spec__.name))
