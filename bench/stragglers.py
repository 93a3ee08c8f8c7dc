"""BSP, then the switch target, under the paper's moderate straggler scenario with straggler policies none, greedy
and elastic."""

from __future__ import annotations

import dataclasses
import os
import sys

from bench import common, tta

POLICIES = ("none", "greedy", "elastic")
SCENARIO = "moderate"


def compare(job: str, repeats: int, root: str, workers: int, target: float | None = None,
            policies=POLICIES, scenario: str = SCENARIO, overrides=(), target_source: str = "given") -> dict:
    """Each policy on the job's switch schedule, repeats interleaved; TTA against `target` (else the job's,
    else the none runs' median converged accuracy less the margin). A spec that rejects the section is recorded as
    {"unavailable": message} instead of failing."""
    from syncswitch.errors import SpecError

    base = common.with_workers(overrides, workers)
    base_spec = common.load_spec(job, base)
    fraction, source = tta.switch_point(base_spec)
    # The scenario places its slowdowns inside the spec's BSP share: give the spec the schedule that runs,
    # in the spelling its file uses (a file's schedule and switch_at are exclusive).
    if "switch_at" in (base_spec.raw.get("policy") or {}):
        schedule = f"policy.switch_at={fraction!r}"
    else:
        schedule = "policy.schedule=" + ("[{protocol: asp}]" if fraction <= 0 else "[{protocol: bsp}]" if fraction >= 1
                                         else f"[{{protocol: bsp, until: {fraction!r}}}, {{protocol: asp}}]")
    specs, unavailable = {}, {}
    for policy in policies:
        try:
            specs[policy] = common.load_spec(job, base + [schedule, f"stragglers.scenario={scenario}",
                                                          f"stragglers.policy={policy}"])
        except SpecError as exc:
            unavailable[policy] = str(exc)
    if not specs:
        return {"unavailable": next(iter(unavailable.values()))}
    variant = f"switch@{fraction:g}"
    common.log(f"stragglers ({scenario}): {workers} workers, {variant} ({source}), policies "
               f"{', '.join(specs)} x {repeats}")
    runs = common.interleaved({p: (s, variant) for p, s in specs.items()}, repeats, root)
    first = next(iter(specs.values()))
    if target is None:
        reference = runs.get("none") or next(iter(runs.values()))
        target, target_source = tta.target_accuracy(first, reference)
    out = {"job": os.path.relpath(first.path, common.ROOT), "workers": workers, "repeats": repeats,
           "cpus_per_node": first.cluster.options.get("cpus_per_node"), "method": first.stragglers.method,
           "scenario": scenario, "switch_at": fraction, "switch_source": source,
           "target_accuracy": target, "target_source": target_source,
           "injections": [dataclasses.asdict(i) for i in getattr(getattr(first, "stragglers", None), "injections", ())
                          if dataclasses.is_dataclass(i)]}
    for policy in policies:
        out[policy] = (tta.variant_stats(runs[policy], target) if policy in runs
                       else {"unavailable": unavailable[policy]})
    none = out.get("none", {})
    for policy in policies:
        if policy == "none" or policy not in runs or "tta_s" not in none:
            continue
        out[policy]["speedup_vs_none"] = common.ratio(none["tta_s"]["median"], out[policy]["tta_s"]["median"])
        out[policy]["time_speedup_vs_none"] = common.ratio(none["total_time_s"]["median"],
                                                           out[policy]["total_time_s"]["median"])
    if not any(s == "completed" for p in runs for s in out[p]["statuses"]):
        raise RuntimeError(f"no straggler run completed: {[out[p]['errors'][:1] for p in runs]}")
    return out


RESULT_SCHEMA = {
    "job": "the job spec", "workers": "cluster size", "repeats": "runs per policy", "scenario": "straggler scenario",
    "switch_at": "the switch point", "target_accuracy": "the TTA target", "target_source": "where it came from",
    "none": "per-policy statistics (as the tta part's variants); greedy and elastic add speedup_vs_none",
}


def add_options(parser) -> None:
    parser.add_argument("--job", default=common.QUICKSTART)
    parser.add_argument("--repeats", type=int, help="Runs per policy (default 1 quick, 3).")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--policies", default=",".join(POLICIES), help="Comma-separated straggler policies.")
    parser.add_argument("--target-accuracy", type=float)
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")


def run_part(args, root) -> dict:
    policies = tuple(p.strip() for p in args.policies.split(",") if p.strip())
    return compare(args.job, args.repeats or (1 if args.quick else 3), root, args.workers, args.target_accuracy,
                   policies=policies, overrides=args.sets)


if __name__ == "__main__":
    from bench import parts

    sys.exit(parts.main_of(__spec__.name))
