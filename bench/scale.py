"""Every protocol and the default switch on 2 to 64 simulated workers: accuracy against BSP at the same global batch.

Runs in one process (syncswitch's simulator): each variant is the job with one schedule on N simulated workers,
arrivals random with per-worker speeds (`--arrivals`, default speeds:0.2), the guard on as it runs live (its
verdicts recorded; it watches asynchronous phases after a synchronous one, so the switched variant). BSP at N
workers is the reference: the same global batch N x B as every variant at N. The table says, for each
protocol, from how many workers its median falls more than 1 point below BSP's.

    python -m bench scale --jobs quickstart,digits_cnn --workers 2,8,32,64 --seeds 2
"""

from __future__ import annotations

import collections
import json
import os
import sys
import time

from bench.common import ROOT, load_spec, log, spread, write_json
from bench.sim_pool import SimPool
from syncswitch.errors import SpecError

PROTOCOLS = ["bsp", "asp", "ssp", "dc-asgd", "fasgd", "b-fasgd", "specsync", "lookahead", "local-sgd"]
SWITCH = "switch"  # the job's own schedule: BSP, then the default switch target for N workers


def run_one(job_path: str, variant: str, workers: int, seed: int, arrivals: str, out: str, sets=(),
            grow: float = 1.0, global_batch: int = 0) -> dict:
    """One simulated run; its final accuracy, the schedule it ran and the guard's verdicts. `grow` multiplies the
    workload (weak scaling: every worker as many steps at every size); `global_batch` > 0 fixes the global batch
    (each worker global_batch / workers examples a step, the rate scaled with it)."""
    from syncswitch.simulator.arrivals import arrival_model
    from syncswitch.simulator.run import Options, Simulation

    overrides = [f"cluster.workers={workers}", f"seed={seed}", *sets]
    if global_batch:
        overrides += fixed_global_batch(load_spec(job_path, list(sets)).hyperparameters, global_batch, workers)
    if grow != 1.0:
        workload = load_spec(job_path, list(sets)).workload
        overrides.append(f"workload.epochs={workload.epochs * grow:g}" if workload.epochs
                         else f"workload.samples={int(workload.samples * grow)}")
    if variant != SWITCH:
        overrides.append(f"policy.schedule=[{{protocol: {variant}}}]")
    job = load_spec(job_path, overrides)
    began = time.time()
    sim = Simulation(job, Options(workers, arrival_model(arrivals, workers, seed), seed, out))
    summary = sim.run()
    return {"variant": variant, "workers": workers, "seed": seed, "status": summary["status"],
            "final_accuracy": summary["final_accuracy"], "host_s": round(time.time() - began, 2),
            "schedule": [p["protocol"] for p in summary["schedule"]],
            "measured": summary["schedule"][-1].get("measured"),
            "guard_events": [{k: e.get(k) for k in ("reason", "fraction", "onset", "action")}
                             for e in summary["guard_events"]]}


def fixed_global_batch(hp, global_batch: int, workers: int) -> list[str]:
    """The overrides that train `workers` workers at global batch `global_batch`: per-worker batch G/N, the rate
    scaled linearly with it from the job's (rate / B the job's), so that BSP is the same training at every N."""
    if global_batch % workers:
        raise SpecError(f"--global-batch {global_batch} is not a multiple of {workers} workers")
    batch = global_batch // workers
    return [f"hyperparameters.batch_size={batch}",
            f"hyperparameters.learning_rate={hp.learning_rate * batch / hp.batch_size!r}"]


def mode_text(args: dict) -> str:
    """How the cluster grows in a result's runs, in words (the tables and docs say it)."""
    if args.get("global_batch"):
        g = args["global_batch"]
        return (f"fixed global batch {g} (each of N workers {g}/N examples a step, the rate scaled with it: BSP is "
                "the same training at every size)")
    if args.get("weak"):
        return "weak scaling (the workload grows with the workers: every worker as many steps at every size)"
    return ("the job as shipped at every size (per-worker batch and rate the job's, the workload in epochs: BSP's "
            "global batch and rate grow with N)")


def falls_below(cells: dict, variant: str, sizes: list[int], margin: float = 0.01, reference: float | None = None):
    """The smallest worker count at which the variant's median is more than `margin` below BSP's there (below
    `reference`, where given: one BSP median for every size)."""
    for n in sizes:
        bsp = reference if reference is not None else cells.get(("bsp", n), {}).get("median")
        if (variant, n) in cells and bsp is not None and cells[(variant, n)]["median"] < bsp - margin:
            return n
    return None


def _accuracy(run: dict) -> float:
    """A run's final accuracy; a diverged run (no final accuracy) counts as 0."""
    return 0.0 if run["final_accuracy"] is None else run["final_accuracy"]


def table(job: str, runs: list[dict], sizes: list[int], mode: str = mode_text({}), pooled: bool = False
          ) -> tuple[str, dict]:
    """The markdown table and its cells. `pooled`: BSP is the same training at every size (a fixed global batch),
    so its reference is the median of its runs at all sizes, not of the few at each."""
    cells = {}
    variants = list(dict.fromkeys(r["variant"] for r in runs))
    for v in variants:
        for n in sizes:
            mine = [r for r in runs if r["variant"] == v and r["workers"] == n]
            if mine:
                cells[(v, n)] = {**spread([_accuracy(r) for r in mine]),
                                 "diverged": sum(r["final_accuracy"] is None for r in mine)}
    bsp_runs = [_accuracy(r) for r in runs if r["variant"] == "bsp" and r["workers"] in sizes]
    reference = spread(bsp_runs)["median"] if pooled and bsp_runs else None
    against = (f"BSP's median over all its {len(bsp_runs)} runs at every size, {reference:.3f}"
               if reference is not None else "BSP's at the same size")
    lines = [(f"\n{job}: final accuracy, median [min-max] over seeds (a diverged run counts 0); the last column: the "
              f"fewest workers at which the median is more than 1 point below {against}"),
             f"cluster grown: {mode}",
             "| variant | " + " | ".join(f"{n} workers" for n in sizes) + " | below BSP from |",
             "|---|" + "---|" * (len(sizes) + 1)]
    most = max((c["n"] for c in cells.values()), default=0)
    for v in variants:
        row = []
        for n in sizes:
            c = cells.get((v, n))
            row.append("-" if c is None else f"{c['median']:.3f} [{c['min']:.3f}-{c['max']:.3f}]"
                       + (f" ({c['diverged']} diverged)" if c["diverged"] else "")
                       + (f" ({c['n']} seed{'s' if c['n'] > 1 else ''})" if c["n"] < most else ""))
        first = falls_below(cells, v, sizes, reference=reference) if v != "bsp" else None
        lines.append(f"| {v} | " + " | ".join(row) + f" | {'-' if first is None else first} |")
    lines.append("guard verdicts on the switched runs: " + "; ".join(
        verdicts_text(n, [r for r in runs if r["variant"] == SWITCH and r["workers"] == n]) for n in sizes))
    summary = {f"{v}@{n}": c for (v, n), c in cells.items()}
    return "\n".join(lines), {"cells": summary, "bsp_reference": reference,
                              "below_bsp_from": {v: falls_below(cells, v, sizes, reference=reference)
                                                 for v in variants if v != "bsp"}}


def verdicts_text(n: int, switched: list[dict]) -> str:
    """What the guard did in the switched runs at `n` workers: its verdicts, in how many of the runs, why, and
    how it repaired (a rollback to a checkpoint, or a fall-back from where the run was)."""
    events = [e for r in switched for e in r["guard_events"]]
    if not events:
        return f"{n} workers: 0 ({'quiet' if switched else 'not run'})" if len(switched) < 2 else \
            f"{n} workers: 0 in {len(switched)} runs (quiet)"
    acted = sum(bool(r["guard_events"]) for r in switched)
    repairs = collections.Counter("rolled back" if str(e.get("action")).startswith("rollback") else
                                  "fell back" if str(e.get("action")).startswith("fall back") else "no repair"
                                  for e in events)
    return (f"{n} workers: {len(events)} in {acted} of {len(switched)} runs "
            f"({', '.join(sorted({e['reason'] for e in events}))}; "
            f"{', '.join(f'{k} {v}' for k, v in sorted(repairs.items()))})")


def retable(path: str, sizes: list[int]) -> int:
    with open(path, encoding="utf-8") as fh:
        result = json.load(fh)
    for job, doc in result["jobs"].items():
        args = result["args"]
        text, cells = table(job, doc["runs"], sizes, mode_text(args), bool(args.get("global_batch")))
        print(text)
        doc.update(cells, table=text)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=1, default=str)
    return 0


RESULT_SCHEMA = {"args": "the options", "jobs": "{job: runs, cells per protocol and size, table}"}


def add_options(parser) -> None:
    parser.add_argument("--jobs", default="quickstart,digits_cnn", help="job names under jobs/ (comma-separated)")
    parser.add_argument("--workers", default="2,8,32,64")
    parser.add_argument("--variants", default=",".join(PROTOCOLS + [SWITCH]))
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--arrivals", default="speeds:0.2")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--runs-dir", help="where the simulated run folders go (default: beside --out)")
    parser.add_argument("--weak", action="store_true",
                        help="weak scaling: the workload grows with the workers (x N / the fewest --workers), so every "
                             "worker takes as many steps at every size and BSP makes as many updates")
    parser.add_argument("--global-batch", type=int, default=0, metavar="G",
                        help="strong scaling: every size trains at global batch G, each worker on G/N examples a step "
                             "at the job's rate scaled with it, so BSP is the same training at every size (G a "
                             "multiple of every --workers)")
    parser.add_argument("--table-from", help="print the tables of an earlier result JSON (and rewrite them in it)")
    parser.add_argument("--add-to", help="an earlier result JSON of this part: its runs are kept (the same job, "
                                         "variant, workers and seed is not run again) and the tables cover all")
    parser.add_argument("--budget-s", type=float, default=0.0, metavar="S",
                        help="start no run that would end past S seconds after the call began, judged by the longest "
                             "earlier run of the same job, variant and size (in --add-to's file or this call); "
                             "0: no limit. A run skipped is left for the next call")
    parser.add_argument("--stall-s", type=float, default=180.0,
                        help="a simulated run whose folder has not grown for this long is killed and retried")


def run_part(args, root) -> dict:
    sizes = [int(n) for n in args.workers.split(",")]
    if args.table_from:
        retable(args.table_from, sizes)
        with open(args.table_from, encoding="utf-8") as fh:
            return json.load(fh)
    runs_dir = args.runs_dir or root
    if args.global_batch and args.weak:
        raise SpecError("--global-batch and --weak are two ways to grow the cluster: give one")
    for n in sizes if args.global_batch else ():
        if args.global_batch % n:
            raise SpecError(f"--global-batch {args.global_batch} is not a multiple of --workers {n}")
    earlier = {}
    if args.add_to:
        with open(args.add_to, encoding="utf-8") as fh:
            before = json.load(fh)
        if mode_text(before["args"]) != mode_text(vars(args)):
            raise SpecError(f"--add-to {args.add_to}: its runs grew the cluster as {mode_text(before['args'])!r}, "
                            f"these as {mode_text(vars(args))!r}")
        earlier = before["jobs"]
    result = {"args": vars(args), "jobs": {}}
    began = time.time()
    # Each run in a watched child process (a run that stops making progress is killed and retried).
    with SimPool(stall_s=args.stall_s, log=log) as pool:
        for job in args.jobs.split(","):
            runs = list(earlier.get(job, {}).get("runs", []))
            done = {(r["variant"], r["workers"], r["seed"]) for r in runs}
            for seed in range(args.first_seed, args.first_seed + args.seeds):  # seeds outermost: drift hits all
                for n in sizes:
                    for variant in [v for v in args.variants.split(",") if (v, n, seed) not in done]:
                        if not fits(args.budget_s, time.time() - began, runs, variant, n):
                            log(f"{job} {variant} at {n} workers, seed {seed}: skipped, it would end past "
                                f"--budget-s {args.budget_s:g}")
                            continue
                        runs.append(_run_watched(pool, args, job, variant, n, seed, sizes, runs_dir))
                        # What is done so far, so a run stopped early still leaves its finished seeds.
                        write_json(os.path.join(runs_dir, "partial.json"),
                                   {**result, "jobs": {**result["jobs"], job: {"runs": runs}}})
            shown = sorted({r["workers"] for r in runs} | set(sizes))
            text, cells = table(job, runs, shown, mode_text(vars(args)), bool(args.global_batch))
            log("\n" + text)
            result["jobs"][job] = {"runs": runs, **cells, "table": text}
    return result


def fits(budget_s: float, elapsed_s: float, runs: list[dict], variant: str, n: int) -> bool:
    """Whether a run of `variant` at `n` workers ends within the call's budget, judged by the longest earlier run
    of both (the host's seconds, plus a child's start); one never seen before is tried."""
    seen = [r["host_s"] for r in runs if r["variant"] == variant and r["workers"] == n and r.get("host_s")]
    return budget_s <= 0 or not seen or elapsed_s + max(seen) + START_S <= budget_s


START_S = 15.0  # a simulated run's child process starting and building the model, beyond its host_s


def _run_watched(pool, args, job: str, variant: str, n: int, seed: int, sizes: list[int], runs_dir: str) -> dict:
    path = os.path.join(ROOT, "jobs", f"{job}.yaml")
    out = os.path.join(runs_dir, f"{job}-{variant}-{n}w-s{seed}")
    grow = n / min(sizes) if args.weak else 1.0
    restarts = pool.restarts
    run = pool.call("bench.scale:run_one", out, path, variant, n, seed, args.arrivals, out, list(args.set), grow,
                    args.global_batch)
    run["retries"] = pool.restarts - restarts
    log(json.dumps({k: run[k] for k in ("variant", "workers", "seed", "final_accuracy", "host_s", "retries")}))
    return run


if __name__ == "__main__":
    from bench import parts

    sys.exit(parts.main_of(__spec__.name))
