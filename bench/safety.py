"""Accuracy-safe switching: is a switched run as good as BSP, with the guard on and off?

Workloads x variants x seeds, runs interleaved so machine noise hits every variant alike:
bsp, asp (guard off: the raw protocol), and switch@F in place and by relaunch, each with the guard
off and on. Reports the median, min and max of final accuracy and total time per variant, what the
guard did, and the targets: with the guard on, a switched variant's median accuracy at least BSP's
median minus 1 point and its worst at least BSP's worst minus 3 points; its time below BSP's where
the guard did not act, at most 1.1x BSP's where it rolled back.
"""

from __future__ import annotations

import json
import os
import sys

from bench import common
from syncswitch.runfolder import RunSummary, repair_of

# (label, job, workers, extra overrides)
WORKLOADS = {
    "quickstart-2": (common.QUICKSTART, 2, []),
    "quickstart-4": (common.QUICKSTART, 4, []),
    "digits_cnn-2": (os.path.join(common.ROOT, "jobs", "digits_cnn.yaml"), 2, []),
    "resnet-4": (common.RESNET, 4, []),
    # The shipped job on which a switch can pay on this machine: at 4 workers local SGD outruns all-reduce BSP.
    "mnist1d-4": (os.path.join(common.ROOT, "jobs", "mnist1d_cnn.yaml"), 4, []),
}
# Jobs nobody tuned for (bench/workloads/): written against the script contract alone, BSP-tuned, whose BSP phase
# still sits on its initial plateau at a quarter of the workload.
WORKLOADS_DIR = os.path.join(common.ROOT, "bench", "workloads")
PLATEAU_WORKLOADS = ("plain_cnn-2", "memory_gru-2", "deep_mlp-2")
# The same jobs on 4 workers, where the default switch target is local SGD rather than lookahead; and four more
# jobs nobody tuned for, on the 4 workers their specs ask for (a small MLP, a short batch-normalized CNN, a residual
# MLP with LayerNorm and label smoothing, and a plain 1-D CNN still early in its climb at a quarter).
PLATEAU_WORKLOADS_4 = ("plain_cnn-4", "memory_gru-4", "deep_mlp-4")
UNTUNED_WORKLOADS_4 = ("tabular_mlp-4", "bn_digits-4", "residual_mlp-4", "plain_cnn1d-4")
for _name in PLATEAU_WORKLOADS + PLATEAU_WORKLOADS_4 + UNTUNED_WORKLOADS_4:
    _job, _workers = _name.rsplit("-", 1)
    WORKLOADS[_name] = (os.path.join(WORKLOADS_DIR, _job + ".yaml"), int(_workers), [])
QUICK_WORKLOADS = ("quickstart-2", "digits_cnn-2")
GUARD_OFF = ["policy.guard.enabled=false"]
# variant -> (schedule variant for run_variant, overrides)
VARIANTS = {
    "bsp": ("bsp", GUARD_OFF),
    "asp": ("asp", GUARD_OFF),
    "in-place": ("switch", ["policy.switch_mode=in-place"] + GUARD_OFF),
    "in-place+guard": ("switch", ["policy.switch_mode=in-place"]),
    # the schedule's boundary as it stands, without the switch rule: what the rule is measured against
    "in-place@fixed+guard": ("switch", ["policy.switch_mode=in-place", "policy.switch_rule=fixed"]),
    "relaunch": ("switch", ["policy.switch_mode=relaunch"] + GUARD_OFF),
    "relaunch+guard": ("switch", ["policy.switch_mode=relaunch"]),
}


def _variant_stats(summaries: list[dict]) -> dict:
    completed = [s for s in summaries if s.get("status") == "completed"]
    out = {key: common.spread([s.get(key) for s in completed]) for key in ("final_accuracy", "total_time_s")}
    out["statuses"] = [s.get("status") for s in summaries]
    out["guard_events"] = [[{k: e.get(k) for k in ("reason", "fraction", "checkpoint_fraction", "continued_at",
                                                    "action", "samples_lost", "overhead_s")}
                            for e in s.get("guard_events") or []] for s in summaries]
    acted_runs = [s for s in completed if RunSummary(s).guard_acted]  # the guard repaired them, either way
    out["rolled_back_runs"] = len(acted_runs)
    rolled = [s for s in completed if RunSummary(s).repaired_by("rollback")]
    fell = [s for s in completed if RunSummary(s).repaired_by("fall back") and s not in rolled]
    out["repairs"] = {"rollback": len(rolled), "fall back": len(fell)}
    out["total_time_s_guard_acted"] = common.spread([s.get("total_time_s") for s in acted_runs])
    out["total_time_s_guard_quiet"] = common.spread([s.get("total_time_s") for s in completed
                                                     if not RunSummary(s).guard_acted])
    out["total_time_s_rolled_back"] = common.spread([s.get("total_time_s") for s in rolled])
    out["total_time_s_fell_back"] = common.spread([s.get("total_time_s") for s in fell])
    out["switched_at"] = [[w.get("at_fraction") for w in s.get("switches") or []] for s in summaries]
    out["switch_rule"] = [[{k: d.get(k) for k in ("action", "fraction", "reason")}
                           for d in (s.get("switch_rule") or {}).get("decisions") or []] for s in summaries]
    out["stayed_synchronous"] = sum(any(d.get("action") == "stay" for d in (s.get("switch_rule") or {}).get(
        "decisions") or []) for s in completed)
    out["switch_speed"] = [[{k: d.get(k) for k in ("action", "fraction", "reason")}
                            for d in (s.get("switch_speed") or {}).get("decisions") or []] for s in summaries]
    out["outcomes"] = [outcome(s) for s in summaries]
    # The target's throughput over BSP's that decided the switch (a trial's, or the stored one); None: not judged.
    out["speed_ratio"] = [next((d.get("values", {}).get("ratio") for d in (s.get("switch_speed") or {}).get(
        "decisions") or [] if d.get("action") in ("back", "keep", "stay", "switch")), None) for s in summaries]
    out["run_dirs"] = [s.get("run_dir") for s in summaries]
    return out


OUTCOMES = ("bsp", "stayed", "went back", "switched", "repaired")


def outcome(summary: dict) -> str:
    """What a run did about its switch: `bsp` (none scheduled), `stayed` synchronous (the switch rule's latest point,
    or a target measured slower by earlier runs), `went back` (its trial found the target slower: back to BSP through
    the guard), `switched` (and kept the target), or `repaired` (the guard repaired a degradation after it)."""
    events = summary.get("guard_events") or []
    if any(e.get("reason") == "slower" and repair_of(e) for e in events):
        return "went back"
    if RunSummary(summary).guard_acted:
        return "repaired"
    if summary.get("switches"):
        return "switched"
    decisions = (summary.get("switch_rule") or {}).get("decisions") or []
    return "stayed" if any(d.get("action") == "stay" for d in decisions) else "bsp"


def _seed_of(summary: dict) -> str | None:
    """The seed a run folder is named for (`<variant>-s<seed>`): runs are paired with BSP's of the same seed."""
    name = os.path.basename(str(summary.get("run_dir") or ""))
    return name.rsplit("-s", 1)[-1] if "-s" in name else None


def same_seed_times(bsp: list[dict], runs: list[dict]) -> dict:
    """Each completed run's time over the same seed's BSP run (measured in the same call, interleaved), over all runs
    and by outcome: {all: spread, <outcome>: spread}."""
    base = {_seed_of(s): s.get("total_time_s") for s in bsp if s.get("status") == "completed"}
    ratios = [(outcome(s), common.ratio(s.get("total_time_s"), base.get(_seed_of(s)))) for s in runs
              if s.get("status") == "completed"]
    out = {"all": common.spread([r for _, r in ratios])}
    for name in OUTCOMES:
        picked = [r for kind, r in ratios if kind == name]
        if picked:
            out[name] = common.spread(picked)
    return out


def _targets(stats: dict) -> dict:
    """The bars, per switched variant with the guard on; and how often a guard-off switch lost > 3 points."""
    if "bsp" not in stats:
        return {}
    bsp = stats["bsp"]
    bsp_acc, bsp_worst = bsp["final_accuracy"]["median"], bsp["final_accuracy"]["min"]
    bsp_time = bsp["total_time_s"]["median"]
    out = {}
    for name in [n for n in stats if n.endswith("+guard")]:
        acc = stats[name]["final_accuracy"]
        quiet = stats[name]["total_time_s_guard_quiet"]["median"]
        acted = stats[name]["total_time_s_guard_acted"]["max"]
        out[name] = {
            "median_within_1pt": None if bsp_acc is None or acc["median"] is None else acc["median"] >= bsp_acc - 0.01,
            "worst_within_3pt": None if bsp_worst is None or acc["min"] is None else acc["min"] >= bsp_worst - 0.03,
            "time_vs_bsp_when_quiet": common.ratio(quiet, bsp_time),
            "time_vs_bsp_when_rolled_back_worst": common.ratio(acted, bsp_time),
        }
        by_seed = stats[name].get("time_vs_same_seed_bsp") or {}
        if by_seed:
            # The time bars, per seed against the same seed's BSP run: below it where the run switched (and kept
            # the target), at most it where the run stayed synchronous or went back.
            switched, kept = by_seed.get("switched", {}), [by_seed.get(k, {}) for k in ("stayed", "went back")]
            out[name]["time_below_bsp_where_switched"] = None if not switched else switched["max"] < 1.0
            worst_kept = max([k["max"] for k in kept if k.get("max") is not None], default=None)
            out[name]["time_at_most_bsp_where_stayed_or_went_back"] = None if worst_kept is None else \
                worst_kept <= 1.0
    for name in [n for n in stats if n in ("in-place", "relaunch") or n.startswith("in-place>") and "+" not in n]:
        runs = [a for a in stats[name]["final_accuracy"]["runs"] if a is not None]
        lost = sum(bsp_acc is not None and a < bsp_acc - 0.03 for a in runs)
        out[f"{name}_lost_more_than_3pt"] = f"{lost}/{len(runs)}"
    for name in [n for n in stats if n.startswith("in-place:")]:
        median = stats[name]["final_accuracy"]["median"]
        out[f"{name}_median_minus_bsp"] = None if median is None or bsp_acc is None else round(median - bsp_acc, 4)
    return out


def _log_run(root: str, label: str, variant: str, seed: int, summary: dict) -> None:
    """One line per finished run, so an interrupted benchmark still leaves what it measured."""
    keep = {k: summary.get(k) for k in ("status", "final_accuracy", "total_time_s", "run_dir")}
    keep["guard_actions"] = [e.get("action") for e in summary.get("guard_events") or []]
    keep["switched_at"] = [w.get("at_fraction") for w in summary.get("switches") or []]
    keep["switch_rule"] = [d.get("action") for d in (summary.get("switch_rule") or {}).get("decisions") or []]
    with open(os.path.join(root, "runs.jsonl"), "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"workload": label, "variant": variant, "seed": seed, **keep}) + "\n")


def configuration_variants(names) -> dict:
    """`in-place:NAME`: the switch in place under configuration policy NAME, guard off (the raw policy)."""
    return {f"in-place:{name}": ("switch", ["policy.switch_mode=in-place", f"policy.configuration={name}"]
                                  + GUARD_OFF) for name in names}


def momentum_variants(momenta, switch_at: float = 0.25) -> dict:
    """`in-place:asp-momentum=M`: the switch in place with ASP's momentum set to M, guard off."""
    def schedule(m):
        asp = f"{{protocol: asp, hyperparameters: {{momentum: {m:g}}}}}"
        return f"policy.schedule=[{{protocol: bsp, until: {switch_at:g}}}, {asp}]"

    return {f"in-place:asp-momentum={m:g}": (None, [schedule(m), "policy.switch_mode=in-place"] + GUARD_OFF)
            for m in momenta}


def target_variants(protocols, switch_at: float = 0.25, bsp_ps: bool = False) -> dict:
    """`in-place>X` and `in-place>X+guard`: the switch in place into protocol X instead of ASP, guard off and on;
    `bsp_ps`: BSP through the parameter servers."""
    out = {}
    path = ", allreduce: false" if bsp_ps else ""
    for protocol in protocols:
        schedule = f"policy.schedule=[{{protocol: bsp{path}, until: {switch_at:g}}}, {{protocol: {protocol}}}]"
        out[f"in-place>{protocol}"] = (None, [schedule, "policy.switch_mode=in-place"] + GUARD_OFF)
        out[f"in-place>{protocol}+guard"] = (None, [schedule, "policy.switch_mode=in-place"])
    return out


RECURRING = "recurring"  # `recurring+guard`, `recurring>X+guard`: a later run of the job, its target's speed stored


def recurring_variants(names, chosen: dict) -> dict:
    """`recurring...`: its `in-place...` twin as a recurring job runs it: the target's speed known from the twin's
    earlier runs (the policy store's measure: the median of their trials' ratios), so the speed rule decides the
    switch without a trial. Needs its twin among the variants, run before it."""
    out, names = {}, list(names)
    for name in [n for n in names if n.startswith(RECURRING)]:
        twin = "in-place" + name[len(RECURRING):]
        if twin not in chosen or twin not in names[:names.index(name)]:
            raise SystemExit(f"error: variant {name} needs {twin} among the variants, before it")
        out[name] = chosen[twin]
    return out


def stored_speed_spec(spec, twin_runs: list[dict]):
    """`spec` as a recurring job runs it once the store holds the speeds `twin_runs`' trials measured (unchanged
    while none did)."""
    from syncswitch.search import speeds
    from syncswitch.spec.policy import adopt_stored_speed, switch_target

    target = switch_target(spec.policy).protocol
    speed = speeds.speed_from_runs([s.get("run_dir") for s in twin_runs], target, spec.policy.switch_speed.rule)
    return adopt_stored_speed(spec, speed or None)


def earlier_runs(path: str | None, workloads, variants) -> dict:
    """{workload: {variant: [summary, ...]}} of an earlier result file's runs (--add-to), read back from their run
    folders' summary.json, so a cell measured over several calls (seeds split to keep each call short) is one
    file; empty without a path. Its workloads and variants must be this call's."""
    if not path:
        return {}
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    if list(doc.get("workloads", {})) != list(workloads) or doc.get("variants") != list(variants):
        raise SystemExit(f"--add-to {path}: its workloads {list(doc.get('workloads', {}))} and variants "
                         f"{doc.get('variants')} are not this call's {list(workloads)} and {list(variants)}")
    out = {}
    for label, cell in doc["workloads"].items():
        out[label] = {}
        for name in variants:
            summaries = []
            for run_dir in cell[name]["run_dirs"]:
                with open(os.path.join(run_dir, "summary.json"), encoding="utf-8") as fh:
                    summaries.append({**json.load(fh), "run_dir": run_dir})
            out[label][name] = summaries
    return {"first_seed": doc["first_seed"], "seeds": doc["seeds"], "runs": out}


def run(workloads, seeds: int, root: str, overrides=(), variants=tuple(VARIANTS), configurations=(),
        momenta=(), first_seed: int = 0, targets=(), add_to: str | None = None, bsp_ps: bool = False) -> dict:
    added = {**configuration_variants(configurations), **momentum_variants(momenta),
             **target_variants(targets, bsp_ps=bsp_ps)}
    known = {**VARIANTS, **added}
    if bsp_ps:  # the path every result before all-reduce became BSP's default ran on
        known["bsp"] = ("bsp(allreduce=false)", GUARD_OFF)
    # `in-place>X+guard` named in --variants: that target variant alone (not its guard-off twin)
    for name in [v for v in variants if v.startswith("in-place>") and v not in known]:
        known.update(target_variants([name[len("in-place>"):].removesuffix("+guard")], bsp_ps=bsp_ps))
    if bsp_ps and any(known[v][0] == "switch" for v in variants if v in known):
        raise SystemExit("error: --bsp-ps applies to the bsp and in-place>X variants only")
    known.update(recurring_variants(variants, known))
    unknown = [v for v in variants if v not in known]
    if unknown:
        raise SystemExit(f"error: unknown variant(s) {unknown}; valid: {', '.join(VARIANTS)}")
    chosen = {name: known[name] for name in list(variants) + list(added)}
    earlier = earlier_runs(add_to, workloads, chosen)
    out = {"seeds": seeds + earlier.get("seeds", 0), "first_seed": earlier.get("first_seed", first_seed),
           "variants": list(chosen), "workloads": {}}
    for label in workloads:
        job, workers, extra = WORKLOADS[label]
        base = common.with_workers(list(extra) + list(overrides), workers)
        switch_at = common.load_spec(job, base).policy.schedule[0].until
        for _, sets in chosen.values():
            common.load_spec(job, base + sets)  # a bad override fails before any run starts
        common.log(f"safety {label}: {len(chosen)} variants x {seeds} seeds, switch at {switch_at:g}")
        variants = {name: (common.load_spec(job, base + sets + ["seed=0"]),
                           f"switch@{switch_at:g}" if variant == "switch" else variant)  # None: the spec's own
                    for name, (variant, sets) in chosen.items()}
        before = earlier.get("runs", {}).get(label, {})
        for name in [n for n in variants if n.startswith(RECURRING)]:
            twin, (spec, variant) = "in-place" + name[len(RECURRING):], variants[name]
            variants[name] = (lambda runs, spec=spec, twin=twin: stored_speed_spec(
                spec, before.get(twin, []) + runs[twin]), variant)
        runs = common.interleaved(variants, seeds, os.path.join(root, label), first_seed=first_seed,
                                  on_run=lambda name, r, summary: _log_run(root, label, name, first_seed + r, summary))
        summaries = {name: before.get(name, []) + runs[name] for name in chosen}
        stats = {name: _variant_stats(summaries[name]) for name in chosen}
        if "bsp" in summaries:
            for name in [n for n in chosen if n != "bsp"]:
                stats[name]["time_vs_same_seed_bsp"] = same_seed_times(summaries["bsp"], summaries[name])
        out["workloads"][label] = {"job": os.path.relpath(job, common.ROOT), "workers": workers,
                                   "switch_at": switch_at, **stats, "targets": _targets(stats)}
    return out


RESULT_SCHEMA = {
    "seeds": "seeds per variant", "first_seed": "seed of the first repeat", "variants": "the variants run",
    "workloads": "{workload: {job, workers, switch_at, <variant>: statistics, targets}}",
}


def add_options(parser) -> None:
    parser.add_argument("--workloads", help=f"Comma-separated subset of: {', '.join(WORKLOADS)}.")
    parser.add_argument("--variants", help=f"Comma-separated subset of: {', '.join(VARIANTS)} (default all); also "
                                           "in-place>X+guard (into X), and recurring+guard or recurring>X+guard "
                                           "after its in-place twin (its target's speed stored from the twin's runs).")
    parser.add_argument("--configurations", help="Comma-separated configuration policies: adds an in-place switch "
                                                 "variant, guard off, for each (e.g. paper,compensated).")
    parser.add_argument("--asp-momenta", help="Comma-separated momenta: adds an in-place switch variant, guard off, "
                                              "with ASP at each momentum (a per-phase override).")
    parser.add_argument("--targets", help="Comma-separated protocols: adds in-place switch variants into each instead "
                                          "of ASP, guard off and on (e.g. lookahead).")
    parser.add_argument("--first-seed", type=int, default=0, help="Seed of the first repeat (default 0).")
    parser.add_argument("--seeds", type=int, help="Seeds per variant (default 5, quick 2).")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--bsp-ps", action="store_true",
                        help="BSP through the parameter servers (allreduce: false) in the bsp and in-place>X variants.")
    parser.add_argument("--add-to", help="An earlier result file of the same workloads and variants (other seeds): "
                                         "its runs are read back from their folders and counted with this call's.")


def run_part(args, root) -> dict:
    names = args.workloads.split(",") if args.workloads else (QUICK_WORKLOADS if args.quick else list(WORKLOADS))
    variants = args.variants.split(",") if args.variants else tuple(VARIANTS)
    configurations = args.configurations.split(",") if args.configurations else ()
    momenta = [float(m) for m in args.asp_momenta.split(",")] if args.asp_momenta else ()
    targets = args.targets.split(",") if args.targets else ()
    return run(names, args.seeds or (2 if args.quick else 5), root, args.sets, variants, configurations, momenta,
               args.first_seed, targets, args.add_to, args.bsp_ps)


if __name__ == "__main__":
    from bench import parts

    sys.exit(parts.main_of(__spec__.name))
