"""The simulator's network model (`+link:`) against real runs through a limited loopback, and what it projects.

Validation (the default): one seed of the job's BSP by all-reduce, in float32 and in each `--wires` type, run for
real (`syncswitch submit`) with every process's traffic through one token bucket on `lo` at each `--mbits` rate
(bench/loopback.py, as `peers --loopback-mbit`), and simulated: the unlimited float32 run's own step times replayed
(`replay:`; a worker's busy time, its all-reduce left out) on `+link:R:burst=256:shared`, the loopback's bucket.
One number is fitted, on one run: the latency of a ring message, so that the unlimited run's simulation takes the
real run's time. Every other cell is a prediction.

    python -m bench network --job jobs/resnet_synthetic.yaml --seed 1 --mbits 200,100,50 --wires bf16

Projection (`--project`): one real unlimited BSP run of the job gives the compute (its step times, replayed;
`--replay DIR` instead reuses a run folder), then the job's variants are simulated on links of each node's own (a
switched cluster) at each `--mbits`, `--seeds` seeds, the ring message's latency `--latency-ms` (a validation's
fitted one: `--from F`): training time, time to `--target` and final accuracy against BSP in float32, which moves
the bytes MultiWorkerMirroredStrategy's ring moves. `switch` is the job's own schedule (the switch rule and the
guard as they run live; the speed rule is not simulated, so the switch is taken where the rule says, never weighed
first).

    python -m bench network --project --job jobs/mnist1d_cnn.yaml --set hyperparameters.lr_decay... --from F \
        --mbits 1000,200,50 --seeds 5 --target 0.95
"""

from __future__ import annotations

import json
import os
import time

from bench import loopback
from bench.common import ROOT, load_spec, log, median_with_misses, ratio, run_summary, spread
from bench.sim_pool import SimPool

BURST_KB = 256  # bench/loopback.py's bucket
SWITCH = "switch"

RESULT_SCHEMA = {
    "mode": "validate or project",
    "job": "the job spec",
    "rows": "validate: {mbit, wire, real_s, sim_s, sim_over_real, real_accuracy, sim_accuracy}; project: one per "
            "(mbit, variant) with spreads of time, time to target and accuracy over the seeds",
    "latency_ms": "the ring message's latency fitted on the unlimited run (validate) or taken from --from",
    "replay": "the real run folder whose step times the simulations replay",
}


def add_options(parser) -> None:
    parser.add_argument("--job", default="jobs/resnet_synthetic.yaml")
    parser.add_argument("--mbits", default="200,100,50", help="link rates, Mbit/s (comma-separated)")
    parser.add_argument("--seed", type=int, default=1, help="validate: the one seed")
    parser.add_argument("--wires", default="bf16", help="validate: compressed types beside float32 (none: only it)")
    parser.add_argument("--project", action="store_true", help="simulate --variants on per-node links instead")
    parser.add_argument("--from", dest="source", help="project: a validate result JSON (its fitted latency)")
    parser.add_argument("--latency-ms", type=float, help="project: a ring message's latency (instead of --from's)")
    parser.add_argument("--replay", help="project: a real run folder whose step times to replay (default: one "
                                         "real unlimited BSP run of the job, made first)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a spec override, real "
                                                                                       "and simulated runs alike")
    parser.add_argument("--variants", default="bsp,bsp+bf16,switch,switch+bf16",
                        help="project: bsp, switch (the job's schedule), each with +fp16 or +bf16")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--target", type=float, default=0.9, help="project: the accuracy of time to accuracy")
    parser.add_argument("--stall-s", type=float, default=180.0)


def run_part(args, root) -> dict:
    mbits = [float(m) for m in args.mbits.split(",") if m]
    if args.project:
        return project(args, mbits, root)
    return validate(args, mbits, root)


# -- validation -------------------------------------------------------------------------------------------------

def real_run(job: str, seed: int, wire: str, out: str, sets=()) -> dict:
    """One real BSP run of `job` (its summary), on the loopback as it is now."""
    summary = run_summary(load_spec(job, [f"seed={seed}", f"hyperparameters.compression={wire}", *sets]), "bsp", out)
    if summary.get("status") != "completed":
        raise RuntimeError(f"the real bsp run in {out} ended {summary.get('status')}: {summary.get('message')}")
    return summary


def simulate_one(job: str, variant: str, seed: int, arrivals: str, out: str, target: float | None = None,
                 extra=()) -> dict:
    """One simulated run (in a SimPool child): its time, time to `target` and final accuracy."""
    from syncswitch.simulator.arrivals import arrival_model
    from syncswitch.simulator.run import Options, Simulation

    base, _, wire = variant.partition("+")
    sets = [*extra, f"seed={seed}", f"hyperparameters.compression={wire or 'none'}"]
    if base != SWITCH:
        sets.append(f"policy.schedule=[{{protocol: {base}}}]")
    if target is not None:
        sets.append(f"evaluation.target_accuracy={target}")
    spec = load_spec(job, sets)
    n = spec.cluster.workers
    summary = Simulation(spec, Options(n, arrival_model(arrivals, n, seed), seed, out)).run()
    return {"variant": variant, "seed": seed, "status": summary["status"], "time_s": summary["total_time_s"],
            "updates": summary["simulation"]["updates"],
            "time_to_accuracy_s": summary["time_to_accuracy_s"], "final_accuracy": summary["final_accuracy"],
            "schedule": [p["protocol"] for p in summary["schedule"]],
            "guard_actions": [e.get("action") for e in summary["guard_events"]
                              if not str(e.get("action", "")).startswith("none")]}


def link(mbit: float | None, latency_ms: float, shared: bool) -> str:
    """The `+link:` suffix; None: the unlimited loopback (its latency alone, at a rate nothing waits on)."""
    if mbit is None:
        return f"+link:1e6:latency={latency_ms:.6g}"
    return f"+link:{mbit:g}:latency={latency_ms:.6g}" + (f":burst={BURST_KB}:shared" if shared else "")


def validate(args, mbits: list[float], root: str) -> dict:
    wires = ["none"] + [w for w in args.wires.split(",") if w and w != "none"]
    job = os.path.join(ROOT, args.job)
    real = {}
    for mbit in [None, *mbits]:
        with loopback.limited(mbit):
            for wire in wires:
                out = os.path.join(root, f"real-{mbit or 'free'}-{wire}")
                log(f"real bsp, {wire}, loopback {mbit or 'unlimited'}")
                real[(mbit, wire)] = real_run(job, args.seed, wire, out, args.set)
    replay = real[(None, "none")]["run_dir"]
    latency_ms, sims = fit_and_simulate(args, job, replay, real, [None, *mbits], wires, root)
    rows = [{"mbit": m, "wire": w, "real_s": r["total_time_s"], "sim_s": sims[(m, w)]["time_s"],
             "sim_over_real": ratio(sims[(m, w)]["time_s"], r["total_time_s"]),
             "real_accuracy": r["final_accuracy"], "sim_accuracy": sims[(m, w)]["final_accuracy"]}
            for (m, w), r in real.items()]
    return {"mode": "validate", "job": args.job, "seed": args.seed, "rows": rows, "latency_ms": latency_ms,
            "replay": replay, "burst_kb": BURST_KB, "sets": args.set}


def fit_and_simulate(args, job, replay, real, mbits, wires, root):
    """The latency at which the unlimited float32 run's simulation takes its real time, then every cell's."""
    with SimPool(stall_s=args.stall_s, log=log) as pool:
        def sim(mbit, wire, latency_ms):
            out = os.path.join(root, f"sim-{mbit or 'free'}-{wire}-{latency_ms:.4g}")
            return pool.call("bench.network:simulate_one", out, job, "bsp" + ("" if wire == "none" else f"+{wire}"),
                             args.seed, f"replay:{replay}" + link(mbit, latency_ms, True), out, None, args.set)

        free = sim(None, "none", 0.0)
        target = real[(None, "none")]["total_time_s"]
        messages = 2 * (real[(None, "none")]["workers"] - 1)  # a ring all-reduce's, one all-reduce an update
        latency_ms = max(0.0, (target - free["time_s"]) / free["updates"] / messages * 1e3)  # time is linear in it
        return latency_ms, {(m, w): sim(m, w, latency_ms) for m in mbits for w in wires}


# -- projection -------------------------------------------------------------------------------------------------

def project(args, mbits: list[float], root: str) -> dict:
    latency_ms = args.latency_ms
    if latency_ms is None and args.source:
        with open(args.source, encoding="utf-8") as fh:
            latency_ms = json.load(fh)["latency_ms"]
    if latency_ms is None:
        raise SystemExit("python -m bench network --project: give --latency-ms or --from (a validate result JSON)")
    job, variants = os.path.join(ROOT, args.job), [v for v in args.variants.split(",") if v]
    replay = args.replay
    if not replay:
        log("real bsp, float32, unlimited loopback: the compute to replay")
        replay = real_run(job, args.first_seed, "none", os.path.join(root, "real-compute"), args.set)["run_dir"]
    runs = {}
    with SimPool(stall_s=args.stall_s, log=log) as pool:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            for mbit in mbits:
                for variant in variants:
                    out = os.path.join(root, f"{variant}-{mbit:g}-s{seed}")
                    began = time.time()
                    runs.setdefault((mbit, variant), []).append(pool.call(
                        "bench.network:simulate_one", out, job, variant, seed,
                        f"replay:{replay}" + link(mbit, latency_ms, False), out, args.target, args.set))
                    log(f"{variant} at {mbit:g} Mbit/s, seed {seed}: {time.time() - began:.0f} s")
    return {"mode": "project", "job": args.job, "target": args.target, "latency_ms": latency_ms, "replay": replay,
            "rows": project_rows(runs), "seeds": args.seeds, "first_seed": args.first_seed, "sets": args.set}


def project_rows(runs: dict) -> list[dict]:
    """Per (link, variant): spreads over the seeds, and medians against float32 BSP's on the same link."""
    rows = []
    for (mbit, variant), done in runs.items():
        bsp = runs.get((mbit, "bsp"), [])
        times, tta = spread([r["time_s"] for r in done]), median_with_misses([r["time_to_accuracy_s"] for r in done])
        rows.append({"mbit": mbit, "variant": variant, "time_s": times,
                     "time_to_accuracy_s": spread([r["time_to_accuracy_s"] for r in done]), "median_tta_s": tta,
                     "final_accuracy": spread([r["final_accuracy"] for r in done]),
                     "time_over_bsp": ratio(times["median"], spread([r["time_s"] for r in bsp])["median"]),
                     "tta_over_bsp": ratio(tta, median_with_misses([r["time_to_accuracy_s"] for r in bsp])),
                     "guard_acted": sum(bool(r["guard_actions"]) for r in done),
                     "kept_switch": sum(len(r["schedule"]) > 1 and r["schedule"][-1] != "bsp" for r in done),
                     "runs": done})
    return rows
