"""Run the syncswitch benchmark suite: `python bench/run.py --quick|--full --out FILE.json` (also FILE.md)."""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench import common, fanout, framework_overhead, memory, protocols, report, safety, stragglers, switch_overhead, tta  # noqa: E402

PARTS = ("tta", "tta_resnet", "stragglers", "safety", "switch_overhead", "init_time_s", "hook_overhead_ratio", "fanout",
         "memory", "protocols", "framework_overhead")
# (quick, full) settings; --repeats overrides every repeat count
PLAN = {
    "tta": {"repeats": (2, 3)},
    "tta_resnet": {"repeats": (1, 3)},
    "stragglers": {"repeats": (1, 3)},
    "safety": {"repeats": (2, 5), "workloads": (safety.QUICK_WORKLOADS, tuple(safety.WORKLOADS))},
    "switch_overhead": {"repeats": (1, 3), "sizes": (switch_overhead.QUICK_SIZES, switch_overhead.SIZES)},
    "init_time_s": {"repeats": (1, 3)},
    "fanout": {"repeats": (5, 20), "sizes": (fanout.SIZES, fanout.SIZES)},
    # quick: every protocol alone on the quickstart, one seed; full: quickstart and digits CNN, alone and after BSP
    "protocols": {"repeats": (1, 5), "jobs": ((common.QUICKSTART,), (common.QUICKSTART, protocols.DIGITS_CNN)),
                  "second": (False, True)},
    "framework_overhead": {"repeats": (1, 3)},
}


def init_time(repeats: int, workers: int) -> dict:
    out = common.run_json_script([os.path.join("bench", "init_time.py"), "--repeats", str(repeats),
                                  "--workers", str(workers)], timeout_s=300 + 240 * repeats)
    runs = out.get("runs")
    if isinstance(runs, list) and runs:
        stats = common.spread(runs)
        out.setdefault("min", stats["min"])
        out.setdefault("max", stats["max"])
    return out


def hook_overhead() -> dict:
    return common.run_json_script([os.path.join("bench", "hook_overhead.py")], timeout_s=900)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="1-2 repeats, fewer sizes: about 20 min on 2 cores (default).")
    size.add_argument("--full", action="store_true", help="3 repeats of everything, all sizes.")
    parser.add_argument("--out", help="Result JSON (a Markdown table goes next to it, .md); runs go in a folder beside "
                                      "it. Default bench-runs/bench-<time>.json.")
    parser.add_argument("--only", help=f"Comma-separated subset of: {', '.join(PARTS)}.")
    parser.add_argument("--workers", type=int, default=4, help="Workers of the tta, stragglers, init and memory runs.")
    parser.add_argument("--repeats", type=int, help="Override every repeat count (development).")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                        help="Spec override for the tta, tta_resnet, stragglers, safety, protocols and memory jobs "
                             "(development, e.g. workload.epochs=0.5).")
    parser.add_argument("--cpus-per-node", type=float, help="Give every local node its own CPU budget (cgroups, root) "
                                                            "in the tta, tta_resnet, stragglers, safety, protocols and "
                                                            "memory runs; stragglers then slow a node's budget (method cpu).")
    parser.add_argument("--straggler-job", default=common.QUICKSTART, help="Job of the straggler comparison.")
    parser.add_argument("--switch-samples", type=int, help="Workload of the switch-overhead runs in samples "
                                                           "(development; default per mode, see switch_overhead.py).")
    parser.add_argument("--switch-sizes", help="Worker counts of the switch-overhead runs (development, e.g. 2).")
    args = parser.parse_args(argv)
    if args.cpus_per_node is not None:
        args.sets.append(f"cluster.cpus_per_node={args.cpus_per_node!r}")
    selected = list(PARTS)
    if args.only:
        wanted = [p.strip() for p in args.only.split(",") if p.strip()]
        unknown = [p for p in wanted if p not in PARTS]
        if unknown:
            parser.error(f"--only: unknown part(s) {', '.join(unknown)}; choose from {', '.join(PARTS)}")
        selected = [p for p in PARTS if p in wanted]  # the canonical order: memory can ride on a tta run
    full = bool(args.full)
    out = args.out or os.path.join(common.ROOT, "bench-runs", f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json")
    out = os.path.abspath(out)
    if os.path.dirname(out) == common.ROOT:
        parser.error("--out: keep results out of the repository root, e.g. --out bench-runs/quick.json")
    md_path = os.path.splitext(out)[0] + ".md"
    root = common.run_root(out, "full" if full else "quick")

    def setting(part: str, key: str = "repeats"):
        if key == "repeats" and args.repeats:
            return args.repeats
        if part == "switch_overhead" and key == "sizes" and args.switch_sizes:
            return tuple(int(n) for n in args.switch_sizes.split(","))
        return PLAN[part][key][1 if full else 0]

    doc = {"machine": common.machine_facts(), "mode": "full" if full else "quick", "parts": selected,
           "workers": args.workers, "run_root": root, "overrides": args.sets, "results": {}}
    results = doc["results"]
    started = time.time()

    def save():
        doc["wall_s"] = round(time.time() - started, 1)
        doc["results"] = {k: results[k] for k in PARTS if k in results}
        common.write_json(out, doc)

    common.log(f"{doc['mode']} benchmark of {', '.join(selected)}; runs in {root}")
    sampler = {}

    def on_run(name, r):  # memory piggybacks on the first BSP->ASP quickstart run
        if "memory" in selected and "memory" not in results and name == "switch" and r == 0 and not sampler:
            sampler["s"] = memory.MemorySampler()
            return sampler["s"]
        return None

    try:
        run_parts(selected, results, root, args, setting, on_run, sampler, save)
    except KeyboardInterrupt:
        common.log("interrupted: writing the results so far")
        doc["interrupted"] = True
    save()
    text = report.render(doc)
    with open(md_path, "w", encoding="utf-8") as fh:
        fh.write(text + "\n")
    print(text)
    failed = [k for k, v in results.items() if "error" in v]
    common.log(f"wrote {out} and {md_path} in {doc['wall_s']:.0f} s" + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 130 if doc.get("interrupted") else 1 if failed else 0


def run_parts(selected, results, root, args, setting, on_run, sampler, save) -> None:
    """Each selected part in order, its result (or error) saved as soon as it is known."""
    for part in selected:
        part_root = os.path.join(root, part)
        os.makedirs(part_root, exist_ok=True)
        if part == "tta":
            results[part] = common.run_part(part, tta.compare, common.QUICKSTART, setting(part), part_root, args.workers,
                                            args.sets, on_run)
            s = sampler.get("s")
            run_ok = results[part].get("switch", {}).get("statuses", [None])[0] == "completed"
            if s is not None and s.samples and run_ok:
                results["memory"] = dict(s.report(), job=results[part]["job"], workers=args.workers,
                                         variant=f"switch@{results[part]['switch_at']:g}",
                                         run_dir=results[part]["switch"]["run_dirs"][0],
                                         source="sampled during the first BSP->ASP run of the tta part")
        elif part == "tta_resnet":
            results[part] = common.run_part(part, tta.compare, common.RESNET, setting(part), part_root, args.workers,
                                            args.sets)
        elif part == "stragglers":
            target = None
            base = results.get("tta")
            if base and "error" not in base and os.path.abspath(args.straggler_job) == common.QUICKSTART and not args.sets:
                target = base.get("target_accuracy")
            results[part] = common.run_part(part, stragglers.compare, args.straggler_job, setting(part), part_root,
                                            args.workers, target, overrides=args.sets,
                                            target_source="the tta part's target")
        elif part == "safety":
            results[part] = common.run_part(part, safety.run, setting(part, "workloads"), setting(part), part_root,
                                            args.sets)
        elif part == "switch_overhead":
            results[part] = common.run_part(part, switch_overhead.measure, setting(part), part_root,
                                            setting(part, "sizes"), args.switch_samples)
        elif part == "init_time_s":
            results[part] = common.run_part(part, init_time, setting(part), args.workers)
        elif part == "hook_overhead_ratio":
            results[part] = common.run_part(part, hook_overhead)
        elif part == "fanout":
            results[part] = common.run_part(part, fanout.measure, setting(part), part_root, setting(part, "sizes"))
        elif part == "protocols":
            results[part] = common.run_part(part, protocols.compare, setting(part, "jobs"), setting(part), part_root,
                                            args.workers, setting(part, "second"), overrides=args.sets)
        elif part == "framework_overhead":
            results[part] = common.run_part(part, framework_overhead.measure, setting(part), part_root, args.workers,
                                            bool(args.full))
        elif part == "memory" and "memory" not in results:
            results[part] = common.run_part(part, memory.measure, part_root, args.workers, common.QUICKSTART, args.sets)
        save()


if __name__ == "__main__":
    sys.exit(main())
