"""The main parts in one go: `python -m bench suite --quick --out bench-runs/quick.json` (also writes a .md beside it).

Each entry of PLAN runs a registered part with its own options (--quick passes on: each part's own quick
setting), in order, its result saved as soon as it is known; one part's failure does not stop the others.
"""

from __future__ import annotations

import os
import sys
import time

from bench import common

# (label in the result, part, its options); --workers, --set and --repeats pass on to the parts that take them.
PLAN = (
    ("tta", "tta", []),
    ("tta_resnet", "tta", ["--job", common.RESNET]),
    ("stragglers", "stragglers", []),
    ("safety", "safety", []),
    ("switch_overhead", "switch-overhead", []),
    ("init_time", "init-time", []),
    ("hook_overhead", "hook-overhead", []),
    ("fanout", "fanout", []),
    ("memory", "memory", []),
    ("protocols", "protocols", []),
    ("framework_overhead", "framework-overhead", []),
)
PASSED_ON = ("--workers", "--set", "--repeats")

RESULT_SCHEMA = {"mode": "quick or full", "parts": "the labels run", "results": "{label: the part's result}",
                 "wall_s": "seconds for the whole suite"}


def add_options(parser) -> None:
    labels = ", ".join(label for label, _, _ in PLAN)
    parser.add_argument("--only", help=f"Comma-separated subset of: {labels}.")
    parser.add_argument("--workers", type=int, help="Workers of every part that takes --workers.")
    parser.add_argument("--repeats", type=int, help="Repeats of every part that takes --repeats (development).")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                        help="Spec override for every part that takes --set (development, e.g. workload.epochs=0.5).")


def part_argv(parser, own: list[str], args) -> list[str]:
    """A part's options: its PLAN entry's, --quick, and the suite's shared ones the part declares."""
    known = {s for action in parser._actions for s in action.option_strings}  # argparse lists them nowhere public
    argv = list(own) + (["--quick"] if args.quick else [])
    if args.workers is not None and "--workers" in known:
        argv += ["--workers", str(args.workers)]
    if args.repeats is not None and "--repeats" in known:
        argv += ["--repeats", str(args.repeats)]
    for value in args.sets if "--set" in known else ():
        argv += ["--set", value]
    return argv


def run_part(args, root) -> dict:
    from bench import parts

    labels = [label for label, _, _ in PLAN]
    wanted = [p.strip() for p in (args.only or "").split(",") if p.strip()] or labels
    unknown = [p for p in wanted if p not in labels]
    if unknown:
        raise SystemExit(f"--only: unknown part(s) {', '.join(unknown)}; choose from {', '.join(labels)}")
    doc = {"mode": "quick" if args.quick else "full", "parts": [], "results": {}, "run_root": root}
    started = time.time()
    for label, name, own in PLAN:
        if label not in wanted:
            continue
        module = parts.load(name)
        parser = common.part_parser(module, name)
        part_args = parser.parse_args(part_argv(parser, own, args))
        part_root = os.path.join(root, label)
        os.makedirs(part_root, exist_ok=True)
        doc["parts"].append(label)
        doc["results"][label] = dict(common.guarded(label, module.run_part, part_args, part_root), part=name)
        doc["wall_s"] = round(time.time() - started, 1)
        common.write_json(os.path.join(root, "partial.json"), doc)
    if args.out:
        from bench import report

        with open(os.path.splitext(args.out)[0] + ".md", "w", encoding="utf-8") as fh:
            fh.write(report.render(dict(doc, machine=common.machine_facts(["suite"]))) + "\n")
    doc["wall_s"] = round(time.time() - started, 1)
    return doc


if __name__ == "__main__":
    from bench import parts

    sys.exit(parts.main_of(__spec__.name))
