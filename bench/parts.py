"""The registry of benchmark parts: `python -m bench PART [options]` runs one.

A part is a module of this package that declares
- `add_options(parser)`: its own command-line options (every part also takes --quick and --out),
- `run_part(args, root) -> dict`: one measurement, its run folders under `root`,
- `RESULT_SCHEMA`: {key: meaning} of the top-level keys every result of it has (checked after each run).

Adding a part is one line here. Helpers that are no part (a child process's entry point, shared statistics)
live beside them and are not listed.
"""

from __future__ import annotations

import importlib
import sys

# name -> (module, what it measures); the order is the order of `python -m bench --help`.
PARTS = {
    "tta": ("bench.tta", "time to accuracy of BSP, ASP and the switch on one job, repeats interleaved"),
    "protocols": ("bench.protocols", "every synchronization protocol, alone and after BSP: accuracy, throughput"),
    "safety": ("bench.safety", "accuracy-safe switching: switched runs against BSP, guard on and off"),
    "stragglers": ("bench.stragglers", "the straggler policies under the paper's moderate scenario"),
    "switch-overhead": ("bench.switch_overhead", "the switch's overhead in place and by relaunch, 2-8 workers"),
    "init-time": ("bench.init_time", "submit-to-first-step time of the quickstart"),
    "hook-overhead": ("bench.hook_overhead", "step throughput of the hooked training loop against a bare one"),
    "fanout": ("bench.fanout", "latency of one call to 8-256 agents, parallel against sequential"),
    "memory": ("bench.memory", "peak resident memory per process role during a quickstart run"),
    "framework-overhead": ("bench.framework_overhead", "syncswitch against a hand-written PS loop, side by side"),
    "chaos": ("bench.chaos", "recovery from killed workers, PS shards, agents and managers"),
    "delay-sim": ("bench.delay_sim", "staleness alone, in one process: gradients that arrive late"),
    "local-sim": ("bench.local_sim", "local SGD in one process: copies averaged every few steps"),
    "cgroup-period": ("bench.cgroup_period", "step-time spread under a node CPU budget, per CFS period"),
    "peers": ("bench.peers", "syncswitch against MultiWorkerMirroredStrategy and one process alone, same job"),
    "recurring": ("bench.recurring", "a recurring job: `syncswitch search` once, then later runs against BSP"),
    "ray-backend": ("bench.ray_backend", "the quickstart and fan-out, local against ray; recovery on ray"),
    "network": ("bench.network", "the simulator's network model against real runs on a limited loopback; projections"),
    "scale": ("bench.scale", "every protocol on 2 to 64 simulated workers, accuracy against BSP"),
    "suite": ("bench.suite", "the main parts in one go (--quick about 20 min on 2 cores, --full hours)"),
}
TOOLS = {
    "docs": ("bench.docs", "regenerate docs/spec.md, docs/cli.md, docs/results.md and the README's results table"),
    "switch-replay": ("bench.switch_replay", "replay the switch rule over stored runs' loss reports"),
    "guard-corpus": ("bench.guard_corpus", "the guard over stored runs: false alarms on BSP, verdicts on bad switches"),
    "speed-replay": ("bench.speed_replay", "replay the speed rule's trial over stored switched runs' throughputs"),
    "scale-vs-real": ("bench.scale_vs_real", "simulated accuracy (a scale result) against real runs' spread"),
    "staleness-fit": ("bench.staleness_fit", "arrival models against real runs' per-update staleness (chi-square)"),
}


def load(name: str):
    """The module of part `name`, checked to declare the part interface."""
    module = importlib.import_module(PARTS[name][0])
    lacking = [a for a in ("add_options", "run_part", "RESULT_SCHEMA") if not hasattr(module, a)]
    if lacking:
        raise TypeError(f"{PARTS[name][0]} is registered as part {name!r} but lacks {', '.join(lacking)}")
    return module


def usage() -> str:
    width = max(len(n) for n in list(PARTS) + list(TOOLS))
    lines = ["usage: python -m bench PART [options]      (python -m bench PART --help: the part's options)", "",
             "Benchmarks of syncswitch, run from the repository root. Each part prints one JSON result (--out FILE "
             "also writes it; its runs go in a folder beside it).", "", "parts:"]
    lines += [f"  {name:<{width}}  {what}" for name, (_, what) in PARTS.items()]
    lines += ["", "tools:"] + [f"  {name:<{width}}  {what}" for name, (_, what) in TOOLS.items()]
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name in TOOLS:
        return importlib.import_module(TOOLS[name][0]).main(rest)
    if name not in PARTS:
        from syncswitch.registry import did_you_mean

        sys.stderr.write(f"python -m bench: unknown part {name!r}{did_you_mean(name, list(PARTS) + list(TOOLS))}; "
                         f"valid: {', '.join(list(PARTS) + list(TOOLS))}\n")
        return 2
    from bench import common

    return common.run_module(load(name), name, rest)


def main_of(module_name: str, argv=None) -> int:
    """`python -m bench.MODULE ARGS...` (a part's module run alone, `__spec__.name` its name): the same as
    `python -m bench PART ARGS...`."""
    from bench import common

    name = next((n for n, (m, _) in PARTS.items() if m == module_name), module_name.rsplit(".", 1)[-1])
    return common.run_module(importlib.import_module(module_name), name, sys.argv[1:] if argv is None else argv)
