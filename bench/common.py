"""Shared helpers of the benchmark modules: paths, statistics, machine facts, subprocess JSON, job specs."""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# bench is a package run from the repository root (`python -m bench PART`), so this tree's syncswitch is the one
# imported here. Every process a benchmark starts (agents, tasks, evaluator, helper scripts) imports this tree's
# syncswitch,
# whatever copy pip may have installed.
os.environ["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                                     if p and p != ROOT])
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

QUICKSTART = os.path.join(ROOT, "jobs", "quickstart.yaml")
RESNET = os.path.join(ROOT, "jobs", "resnet_synthetic.yaml")


def log(message: str) -> None:
    """Progress on stderr, so stdout stays the JSON a module prints when run alone."""
    sys.stderr.write(f"[bench {time.strftime('%H:%M:%S')}] {message}\n")
    sys.stderr.flush()


def spread(values) -> dict:
    """{median, min, max, n, runs} of the finite numbers in `values` (None and NaN dropped); median None if none."""
    runs = [None if isinstance(v, float) and not math.isfinite(v) else v for v in values]
    good = [v for v in runs if isinstance(v, (int, float)) and math.isfinite(v)]
    if not good:
        return {"median": None, "min": None, "max": None, "n": 0, "runs": runs}
    return {"median": statistics.median(good), "min": min(good), "max": max(good), "n": len(good), "runs": runs}


def median_with_misses(values):
    """Median where None means "never" (infinitely late): the rule `syncswitch report` uses too."""
    from syncswitch.metrics import median_time_to_accuracy

    return median_time_to_accuracy(values)


def ratio(num, den):
    if num is None or den is None or den <= 0:
        return None
    return num / den


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "") if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def cpu_model() -> str | None:
    """The processor's name (/proc/cpuinfo): speed ratios between frameworks differ from one host to another."""
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), None)
    except OSError:
        return None


def _tensorflow_version():
    """TensorFlow's version without importing it here (seconds, and memory in the manager); its CPU-only
    distribution (`tensorflow-cpu`) is the same package under another name."""
    from importlib.metadata import PackageNotFoundError, version

    for dist in ("tensorflow", "tensorflow-cpu"):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return None


def machine_facts(argv=None) -> dict:
    facts = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
             "cpu_count": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
             "git_commit": git_commit(),
             "command": " ".join(["python -m bench"] + list(argv)) if argv is not None
             else " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:])}
    facts["cpu_model"] = cpu_model()
    try:
        import psutil

        facts["cpu_count_physical"] = psutil.cpu_count(logical=False)
        facts["memory_gib"] = round(psutil.virtual_memory().total / 2 ** 30, 1)
    except ImportError:
        pass
    facts["tensorflow"] = _tensorflow_version()
    try:
        import grpc

        facts["grpcio"] = grpc.__version__
    except ImportError:
        pass
    return facts


def last_json(text: str):
    """The last JSON object in `text` that starts at the beginning of a line (scripts print logs before it)."""
    decoder = json.JSONDecoder()
    starts = [i for i in range(len(text)) if text[i] == "{" and (i == 0 or text[i - 1] == "\n")]
    for start in reversed(starts):
        try:
            obj, _ = decoder.raw_decode(text, start)
            return obj
        except json.JSONDecodeError:
            continue
    raise ValueError("no JSON object in the output")


def run_json_script(args: list[str], timeout_s: float, cwd: str = ROOT, env: dict | None = None) -> dict:
    """Run `python ARGS...` and parse the JSON it prints; raise RuntimeError with its last output on failure."""
    started = time.time()
    try:
        proc = subprocess.run([sys.executable] + args, cwd=cwd, capture_output=True, text=True, timeout=timeout_s,
                              env=env)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"{' '.join(args)} did not finish within {timeout_s:.0f} s") from exc
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-5:]
        raise RuntimeError(f"{' '.join(args)} exited with code {proc.returncode}: {' | '.join(tail)}")
    try:
        out = last_json(proc.stdout)
    except ValueError:
        try:  # a script whose stdout descriptor was redirected (a training task does so) prints to stderr
            out = last_json(proc.stderr)
        except ValueError:
            raise RuntimeError(f"{' '.join(args)} printed no JSON: {(proc.stdout or proc.stderr)[-300:]!r}") from None
    out["wall_s"] = round(time.time() - started, 1)
    return out


def guarded(name: str, fn, *args, **kwargs) -> dict:
    """fn(*args, **kwargs) as one benchmark part: its dict, or {"error": ...} when it raises."""
    log(f"{name}: start")
    started = time.time()
    try:
        result = fn(*args, **kwargs)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - one part's failure must not stop the others
        log(f"{name}: FAILED: {type(exc).__name__}: {exc}")
        if os.environ.get("SYNCSWITCH_DEBUG"):
            traceback.print_exc()
        result = {"error": f"{type(exc).__name__}: {exc}"}
    result["part_wall_s"] = round(time.time() - started, 1)
    log(f"{name}: done in {result['part_wall_s']:.0f} s")
    return result


run_part = guarded  # the name modules written before the part registry call it by


def load_spec(job: str, overrides=()):
    # Imported for their registrations: the backends, policies and protocols a spec names.
    import syncswitch.backends
    import syncswitch.policies  # noqa: F401
    from syncswitch import spec as specmod

    return specmod.load(job, list(overrides))


def run_summary(spec, variant: str | None, run_dir: str) -> dict:
    """One run through the cluster manager (under `variant`'s schedule, or the spec's own where None); a run
    that raises becomes a summary with status failed."""
    from syncswitch.cluster_manager.experiments import run_variant

    started = time.time()
    try:
        if variant is None:  # the spec's own schedule
            from syncswitch.cluster_manager import submission

            summary = submission.submit(spec, output_dir=run_dir, progress=False)
        else:
            summary = run_variant(spec, variant, run_dir)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - recorded per run
        summary = {"status": "failed", "message": f"{type(exc).__name__}: {exc}", "evaluations": []}
    if summary.get("status") == "interrupted":  # the manager turned Ctrl-C into a status: stop the benchmark
        raise KeyboardInterrupt
    summary["bench_wall_s"] = time.time() - started
    summary.setdefault("run_dir", run_dir)
    log(f"  {variant} -> {summary.get('status')} total {fmt(summary.get('total_time_s'))} s, "
        f"converged {fmt(summary.get('converged_accuracy'), 3)}, wall {summary['bench_wall_s']:.0f} s ({run_dir})")
    return summary


def fmt(value, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def write_json(path: str, doc) -> None:
    """A result file, written atomically (an interrupted benchmark never leaves half a JSON document)."""
    from syncswitch.files import write_text_atomic

    write_text_atomic(path, json.dumps(doc, indent=2, default=str) + "\n")


def emit(doc, out: str | None) -> None:
    """A command's result: its JSON on stdout, and in the file `out` (--out) when one is given."""
    print(json.dumps(doc, indent=2, default=str))
    if out:
        write_json(out, doc)


def with_workers(overrides, workers: int | None) -> list[str]:
    """A benchmark's spec overrides plus its cluster size, spelled as `syncswitch submit --workers` spells it."""
    from syncswitch.cli.options import workers_override

    return list(overrides) + workers_override(workers)


def run_root(out: str | None, label: str) -> str:
    """A fresh run folder under the --out file's folder (bench-runs/ by default), never the repo root."""
    base = os.path.dirname(os.path.abspath(out)) if out else os.path.join(ROOT, "bench-runs")
    if os.path.abspath(base) == ROOT:
        base = os.path.join(ROOT, "bench-runs")
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    runs = os.path.join(base, "runs")
    path = os.path.join(runs, f"{label}-{stamp}-{os.getpid()}")
    os.makedirs(path, exist_ok=True)
    ignore = os.path.join(runs, ".gitignore")
    if not os.path.exists(ignore):  # run folders (checkpoints, logs) never belong in a commit
        with open(ignore, "w", encoding="utf-8") as fh:
            fh.write("*\n")
    return path


def part_parser(module, name: str):
    """The argument parser of a part: --quick and --out, then the options the part's module declares."""
    import argparse

    doc = (module.__doc__ or name).strip()
    parser = argparse.ArgumentParser(prog=f"python -m bench {name}", description=doc.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="Fewer repeats and sizes.")
    parser.add_argument("--out", help="Also write the JSON here; runs go in a folder beside it.")
    module.add_options(parser)
    return parser


def missing_keys(result: dict, schema: dict) -> list[str]:
    """The keys of a part's RESULT_SCHEMA that a result lacks (a result that is an error has none to check)."""
    if "error" in result:
        return []
    return [key for key in schema if key not in result]


def run_module(module, name: str, argv) -> int:
    """`python -m bench NAME ARGS...`: parse the part's options, run it, check its result against its schema,
    print the JSON and write --out. Exit 0, or 1 when the part failed or its result misses a key."""
    args = part_parser(module, name).parse_args(argv)
    root = run_root(args.out, name)
    facts = machine_facts([name] + list(argv))  # the code as it was when the part began
    result = guarded(name, module.run_part, args, root)
    missing = missing_keys(result, module.RESULT_SCHEMA)
    if missing:
        result["error"] = f"the result lacks {', '.join(missing)} (RESULT_SCHEMA of bench.{name})"
    result["machine"] = facts
    emit(result, args.out)
    return 1 if "error" in result else 0


def standalone(description: str, add_args, run, argv=None) -> int:
    """main() of a module not yet registered as a part: parse args, run it, print its JSON (and write --out)."""
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="Fewer repeats and sizes.")
    parser.add_argument("--out", help="Also write the JSON here; runs go in a folder beside it.")
    add_args(parser)
    args = parser.parse_args(argv)
    root = run_root(args.out, os.path.splitext(os.path.basename(sys.argv[0]))[0])
    result = guarded(os.path.basename(sys.argv[0]), run, args, root)
    emit(result, args.out)
    return 1 if "error" in result else 0


def interleaved(variants: dict, repeats: int, root: str, first_seed: int = 0, on_run=None) -> dict:
    """The benchmarks' one run loop: `variants` {name: (spec, variant or None)} each `repeats` times, taking turns
    within a repeat (machine load drifts alike over all of them); repeat r runs with seed (the spec's seed +
    first_seed + r), as `syncswitch experiment` seeds its repeats. A variant is a `syncswitch experiment` variant
    name, None the spec's own schedule. A spec may be a function of the runs so far ({name: [summary, ...]}), for a
    variant that learns from the others (a recurring job reading what earlier runs stored). Returns {name: [summary,
    ...]}; `on_run(name, r, summary)` after each run."""
    import dataclasses

    runs = {name: [] for name in variants}
    for r in range(repeats):
        for name, (spec, variant) in variants.items():
            spec = spec(runs) if callable(spec) else spec
            seed = spec.seed + first_seed + r
            seeded = dataclasses.replace(spec, seed=seed, raw={**spec.raw, "seed": seed})
            summary = run_summary(seeded, variant, os.path.join(root, f"{name}-s{seed}"))
            runs[name].append(summary)
            if on_run is not None:
                on_run(name, r, summary)
    return runs


# What a process is, from a needle in its command line: every sampler of the benchmarks names roles alike.
ROLES = (("syncswitch.node.agent", "agent"), ("syncswitch.node.task", "task"), ("evaluator", "evaluator"),
         ("syncswitch.node.forkserver", "fork_server"), ("bare_loop", "bare_worker"))  # -m bench.bare_loop
# Processes forked by the fork server share its command line; they carry their role in their name.
FORKED = {"syncswitch-task": "task", "syncswitch-eval": "evaluator"}


def role_of(cmdline: list[str], name: str = "") -> str:
    if name in FORKED:
        return FORKED[name]
    text = " ".join(cmdline)
    return next((role for needle, role in ROLES if needle in text), "other")


class ProcessSampler:
    """Calls `sample()` every `interval_s` from a daemon thread while used as a context manager; `self.me`
    is this process (the manager: runs go through the in-process cluster manager)."""

    def __init__(self, interval_s: float, name: str):
        import psutil

        self.psutil = psutil
        self.interval_s = interval_s
        self.me = psutil.Process()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def sample(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval_s)

