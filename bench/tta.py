"""Time to accuracy of BSP, ASP and the switch (BSP, then the job's switch target) on one job, repeats interleaved,
one target for all."""

from __future__ import annotations

import os
import sys

from bench import common

DEFAULT_SWITCH_AT = 0.25


def switch_point(spec) -> tuple[float, str]:
    """The switch point a plain submit would use: the stored policy, else the spec's [bsp until F, X] schedule,
    else 0.25."""
    from syncswitch import spec as specmod
    from syncswitch.errors import SyncSwitchError
    from syncswitch.search.store import stored_switch_at

    try:
        spec = specmod.adopt_stored_switch_at(spec, stored_switch_at(spec))
    except SyncSwitchError as exc:
        common.log(f"policy store unreadable, using the spec's schedule: {exc}")
    schedule = spec.policy.schedule
    if len(schedule) == 2 and schedule[0].protocol == "bsp":
        return schedule[0].until, spec.policy.source
    return DEFAULT_SWITCH_AT, "default"


def variant_stats(summaries: list[dict], target: float | None) -> dict:
    completed = [s for s in summaries if s.get("status") == "completed"]
    from syncswitch.metrics import time_to_accuracy

    ttas = [time_to_accuracy(s.get("evaluations"), target) for s in completed]
    tta = common.spread(ttas)
    tta["median"] = common.median_with_misses(ttas)  # a run that never reached the target counts as infinite
    tta["reached"] = f"{sum(t is not None for t in ttas)}/{len(ttas)}"
    out = {key: common.spread([s.get(key) for s in completed])
           for key in ("total_time_s", "final_accuracy", "converged_accuracy")}
    out["tta_s"] = tta
    out["statuses"] = [s.get("status") for s in summaries]
    out["errors"] = [s.get("message") for s in summaries if s.get("status") != "completed"]
    out["run_dirs"] = [s.get("run_dir") for s in summaries]
    out["init_time_s"] = common.spread([s.get("init_time_s") for s in completed])
    out["switches"] = [[{k: sw.get(k) for k in ("from", "to", "at_fraction", "reason", "overhead_s") if k in sw}
                        for sw in s.get("switches") or []] for s in completed]
    switches = [s["switches"][0]["overhead_s"] for s in completed if s.get("switches")]
    if switches:
        out["switch_overhead_s"] = common.spread(switches)
    return out


def target_accuracy(spec, reference: list[dict]) -> tuple[float | None, str]:
    """The job's evaluation.target_accuracy, else the reference runs' median converged accuracy less the margin
    (syncswitch.metrics.reference_target, the rule `syncswitch report` uses)."""
    from syncswitch.metrics import TARGET_MARGIN, reference_target

    if spec.evaluation.target_accuracy is not None:
        return spec.evaluation.target_accuracy, "job"
    target = reference_target([s.get("converged_accuracy") for s in reference if s.get("status") == "completed"])
    if target is None:
        return None, "none (no completed reference run)"
    return target, f"reference median converged accuracy - {TARGET_MARGIN}"


def compare(job: str, repeats: int, root: str, workers: int, overrides=()) -> dict:
    """BSP, ASP and switch@F on `job`; TTA recomputed from every run's evaluations with the BSP-derived target."""
    spec = common.load_spec(job, common.with_workers(overrides, workers))
    fraction, source = switch_point(spec)
    specs = {"bsp": (spec, "bsp"), "asp": (spec, "asp"), "switch": (spec, f"switch@{fraction:g}")}
    common.log(f"tta {spec.name}: {workers} workers, bsp/asp/switch@{fraction:g} ({source}) x {repeats}")
    runs = common.interleaved(specs, repeats, root)
    target, target_source = target_accuracy(spec, runs["bsp"])
    out = {"job": os.path.relpath(spec.path, common.ROOT), "workers": workers, "repeats": repeats,
           "cpus_per_node": spec.cluster.options.get("cpus_per_node"),
           "overrides": list(overrides), "switch_at": fraction, "switch_source": source,
           "target_accuracy": target, "target_source": target_source}
    for name in specs:
        out[name] = variant_stats(runs[name], target)
    bsp, asp, switch = (out[k]["tta_s"]["median"] for k in ("bsp", "asp", "switch"))
    out["speedup_vs_bsp"] = common.ratio(bsp, switch)
    out["speedup_vs_asp"] = common.ratio(asp, switch)
    if asp is None and switch is not None:
        out["speedup_vs_asp_note"] = "ASP never reached the target (median): unbounded"
    bsp, asp, switch = (out[k]["total_time_s"]["median"] for k in ("bsp", "asp", "switch"))
    out["time_speedup_vs_bsp"] = common.ratio(bsp, switch)  # total training time, not time to accuracy
    out["time_speedup_vs_asp"] = common.ratio(asp, switch)
    if not any(s == "completed" for name in specs for s in out[name]["statuses"]):
        first_error = out["switch"]["errors"][:1] or out["bsp"]["errors"][:1]
        raise RuntimeError(f"no run of {spec.name} completed: {first_error}")
    return out


RESULT_SCHEMA = {
    "job": "the job spec, relative to the repository", "workers": "cluster size", "repeats": "runs per variant",
    "switch_at": "the switch point of the switch variant", "target_accuracy": "the TTA target",
    "target_source": "where the target came from",
    "bsp": "per-variant statistics: total_time_s, final/converged accuracy, tta_s as {median, min, max, n, runs}",
    "asp": "as bsp", "switch": "as bsp",
    "speedup_vs_bsp": "BSP's median TTA / the switch's", "speedup_vs_asp": "ASP's median TTA / the switch's",
}


def add_options(parser) -> None:
    parser.add_argument("--job", default=common.QUICKSTART)
    parser.add_argument("--repeats", type=int, help="Runs per variant (default 1 quick, 3).")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")


def run_part(args, root) -> dict:
    repeats = args.repeats or (1 if args.quick else 3)
    return compare(args.job, repeats, root, args.workers, args.sets)


if __name__ == "__main__":
    from bench import parts

    sys.exit(parts.main_of(__spec__.name))
