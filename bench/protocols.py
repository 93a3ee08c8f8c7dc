"""Every synchronization protocol, alone and as the second phase after BSP@0.25: accuracy, throughput, staleness.

Runs are interleaved (one seed of every variant, then the next), each seed a different `seed` in the
spec, so a slow stretch of the shared machine falls on all variants alike.
"""

from __future__ import annotations

import os
import sys

from bench import common

PROTOCOLS = ("bsp", "asp", "ssp", "dc-asgd", "fasgd", "specsync", "lookahead", "local-sgd", "b-fasgd")
SECOND_AFTER = 0.25  # the BSP share before a protocol runs as the second phase
DIGITS_CNN = os.path.join(common.ROOT, "jobs", "digits_cnn.yaml")


def second_phase(protocol: str) -> str:
    """The variant that runs `protocol` after BSP's share, in `syncswitch experiment`'s syntax."""
    return f"switch@{SECOND_AFTER:g}:{protocol}"


def row_of(variant: str, seed: int, run_dir: str, summary: dict) -> dict:
    """One run's row: accuracy, time, throughput and what its own (first asynchronous) phase measured."""
    phases = summary.get("schedule") or []
    last = phases[-1] if phases else {}
    # What the variant's own (first asynchronous) phase measured; a rollback may end the run on BSP.
    measured = next((p["measured"] for p in phases if (p.get("measured") or {}).get("staleness_mean") is not None), {})
    out = {"seed": seed, "status": summary.get("status"), "message": summary.get("message"), "run_dir": run_dir,
           "final_accuracy": summary.get("final_accuracy"), "converged_accuracy": summary.get("converged_accuracy"),
           "total_time_s": summary.get("total_time_s"),
           "examples_per_s": (summary["total_samples"] / summary["total_time_s"]
                              if summary.get("total_time_s") and summary.get("total_samples") else None),
           "last_phase_examples_per_s": last.get("examples_per_s"),
           "staleness_mean": measured.get("staleness_mean"), "aborted_steps": measured.get("aborted_steps"),
           "measured": measured,
           "params": last.get("params"), "wall_s": round(summary.get("bench_wall_s") or 0.0, 1),
           # The accuracy guard may roll an asynchronous second phase back and finish on BSP.
           "phases": [p.get("protocol") for p in phases],
           "rollbacks": sum(1 for p in phases if p.get("rolled_back_to") is not None)}
    common.log(f"  {variant} seed {seed} -> {out['status']} acc {common.fmt(out['final_accuracy'], 3)} "
               f"time {common.fmt(out['total_time_s'])} s, {common.fmt(out['examples_per_s'], 0)} ex/s, "
               f"staleness {common.fmt(out['staleness_mean'], 2)}")
    return out


def stats(runs: list[dict]) -> dict:
    done = [r for r in runs if r["status"] == "completed"]
    out = {key: common.spread([r[key] for r in done])
           for key in ("final_accuracy", "converged_accuracy", "total_time_s", "examples_per_s", "staleness_mean")}
    out["completed"] = f"{len(done)}/{len(runs)}"
    out["errors"] = [r["message"] for r in runs if r["status"] != "completed"]
    return out


def verdict(results: dict) -> dict:
    """The target: a protocol other than bsp within 1 point of BSP's median accuracy at >= 90% of
    ASP's throughput (medians of the standalone runs); the best such is the suggested switch target."""
    med = {v: (r["final_accuracy"]["median"], r["examples_per_s"]["median"]) for v, r in results.items()
           if r["final_accuracy"].get("median") is not None}
    if "bsp" not in med or "asp" not in med:
        return {"note": "bsp or asp has no completed run"}
    bsp_acc, asp_speed = med["bsp"][0], med["asp"][1]
    meets = sorted((v for v, (acc, speed) in med.items() if v != "bsp" and not v.startswith("switch@")
                    and acc >= bsp_acc - 0.01 and speed >= 0.9 * asp_speed), key=lambda v: -med[v][0])
    return {"bsp_median_accuracy": bsp_acc, "asp_median_examples_per_s": asp_speed, "meets_target": meets,
            "best": meets[0] if meets else None}


def compare(jobs, repeats: int, root: str, workers: int, second: bool, protocols=PROTOCOLS, overrides=(),
            variants=None, first_seed: int = 0) -> dict:
    """Each variant (a protocol alone, and after BSP when `second`) on each job, seeds interleaved."""
    from syncswitch.cluster_manager.experiments import variant_policy

    out = {"workers": workers, "repeats": repeats, "overrides": list(overrides), "first_seed": first_seed, "jobs": {}}
    for job in jobs:
        spec = common.load_spec(job, common.with_workers(overrides, workers))
        seconds = [second_phase(p) for p in protocols if p != "bsp"] if second else []
        variants = variants or (list(protocols) + seconds)
        for v in variants:
            variant_policy(spec, v)  # a bad variant fails before any run starts
        common.log(f"protocols {spec.name}: {workers} workers, {', '.join(variants)} x {repeats} seeds")
        runs = {v: [] for v in variants}
        job_root = os.path.join(root, spec.name)

        def done(variant, r, summary, spec=spec, runs=runs, job_root=job_root):
            seed = spec.seed + first_seed + r
            runs[variant].append(row_of(variant, seed, summary.get("run_dir") or job_root, summary))
            results = {v: dict(stats(rs), runs=rs) for v, rs in runs.items() if rs}
            out["jobs"][spec.name] = {"job": os.path.relpath(spec.path, common.ROOT), "variants": results,
                                      "verdict": verdict(results), "seeds_done": r + 1}
            # What is known so far, so a benchmark stopped early still leaves its finished runs.
            common.write_json(os.path.join(root, "partial.json"), out)

        common.interleaved({v: (spec, v) for v in variants}, repeats, job_root, first_seed=first_seed, on_run=done)
    return out


RESULT_SCHEMA = {
    "workers": "cluster size", "repeats": "seeds per variant", "first_seed": "seed offset of the first repeat",
    "jobs": "{job name: {job, variants: {variant: statistics and runs}, verdict, seeds_done}}",
}


def add_options(parser) -> None:
    parser.add_argument("--job", action="append",
                        help="Job spec(s); default quickstart (and digits CNN unless --quick).")
    parser.add_argument("--repeats", type=int, help="Seeds per variant (default 1 quick, 5 full).")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--protocols", help=f"Comma-separated subset of {', '.join(PROTOCOLS)}.")
    parser.add_argument("--second", action="store_true", help="Also each protocol as the phase after BSP@0.25.")
    parser.add_argument("--variants", help="Variants instead, in `syncswitch experiment --compare` syntax, e.g. "
                                           "ssp(staleness=3),switch@0.25:ssp.")
    parser.add_argument("--first-seed", type=int, default=0, help="Seed offset of the first repeat.")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")


def run_part(args, root) -> dict:
    jobs = args.job or ([common.QUICKSTART] if args.quick else [common.QUICKSTART, DIGITS_CNN])
    protocols = tuple(p.strip() for p in args.protocols.split(",")) if args.protocols else PROTOCOLS
    repeats = args.repeats or (1 if args.quick else 5)
    from syncswitch.cluster_manager.experiments import split_variants

    variants = split_variants(args.variants) if args.variants else None
    return compare(jobs, repeats, root, args.workers, args.second or not args.quick, protocols, args.sets, variants,
                   args.first_seed)


def markdown(result: dict) -> list[str]:
    """The part as a Markdown section: one table per job, medians with [min, max] across seeds."""
    if "error" in result:
        return ["### Protocols", "", f"Failed: {result['error']}", ""]

    def cell(s, digits):
        if not s or s.get("median") is None:
            return "-"
        return f"{s['median']:.{digits}f} [{s['min']:.{digits}f}, {s['max']:.{digits}f}]"

    lines = ["### Protocols", "",
             f"{result['workers']} workers, {result['repeats']} seed(s) per variant; median [min, max].",
             ""]
    for name, job in result["jobs"].items():
        lines += [f"**{name}** (`{job['job']}`)", "",
                  "| variant | completed | final accuracy | total time s | examples/s | staleness (last phase) |",
                  "|---|---|---|---|---|---|"]
        for variant, r in job["variants"].items():
            lines.append(f"| {variant} | {r['completed']} | {cell(r['final_accuracy'], 3)} | "
                         f"{cell(r['total_time_s'], 1)} | {cell(r['examples_per_s'], 0)} | "
                         f"{cell(r['staleness_mean'], 2)} |")
        v = job["verdict"]
        meets = ", ".join(v.get("meets_target") or []) or "none"
        lines += ["", f"Within 1 point of BSP's median accuracy at >= 90% of ASP's throughput: {meets}.", ""]
    return lines


if __name__ == "__main__":
    from bench import parts

    sys.exit(parts.main_of(__spec__.name))
