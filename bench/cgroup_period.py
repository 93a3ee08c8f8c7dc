"""CFS period of a node budget: step-time spread of a small TF job capped at --cpus CPU under each period.

Each round starts one child per period, in turn (rotated each round, so machine noise hits all alike), in its
own cgroup capped at --cpus (the same machinery the local backend uses, the same sh wrapper). The child builds
the quickstart CNN (examples/mnist1d_cnn.py model_fn, random inputs of MNIST-1D's shape) in a tf.compat.v1
session with the task's thread settings (intra 1, inter 2) and times each training step. A long period lets a
node burn its quota in one burst and then stalls it for the rest of the period, so a few steps take a whole
stall longer than their neighbours; the measure is how far the slow tail (p99, max) is from the median, and
whether short periods cost throughput. Prints JSON. Needs a writable cgroup cpu controller (root).

Also measures the wrapper: the on-CPU time of the sh wrapper up to the point where it joins the group (all it
spends outside the budget), against the on-CPU time a Python child has already spent by the time its parent,
right after Popen returns, could write its pid into the group.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from bench import common

ROOT = common.ROOT


def _matrix():
    import numpy as np

    return np.random.default_rng(0).normal(size=(96, 96)).astype(np.float32)


def matmuls_for(step_cpu_ms: float) -> int:
    """How many 96x96 single-threaded matmuls take step_cpu_ms of CPU here (measured unconstrained, once, so
    every variant runs the same work per step)."""
    a = _matrix()
    for _ in range(50):
        a @ a
    t = time.process_time()
    for _ in range(2000):
        a @ a
    return max(1, round(step_cpu_ms / 1e3 / ((time.process_time() - t) / 2000)))


def child_numpy(steps: int, warmup: int, matmuls: int, threads: int) -> None:
    """Steps of fixed CPU work: `matmuls` matmuls split over `threads` threads (numpy releases the GIL)."""
    from concurrent.futures import ThreadPoolExecutor

    a = _matrix()

    def work(k):
        for _ in range(k):
            a @ a

    shares = [matmuls // threads + (1 if i < matmuls % threads else 0) for i in range(threads)]
    times = []
    with ThreadPoolExecutor(threads) as pool:
        for i in range(warmup + steps):
            if i == warmup:
                cpu = time.process_time()
            t = time.perf_counter()
            list(pool.map(work, shares))
            if i >= warmup:
                times.append(time.perf_counter() - t)
    print(json.dumps({"step_s": times, "cpu_s": time.process_time() - cpu}))


def child(steps: int, warmup: int) -> None:
    import numpy as np
    import tensorflow as tf

    import importlib.util

    found = importlib.util.spec_from_file_location("mnist1d_cnn", os.path.join(ROOT, "examples", "mnist1d_cnn.py"))
    mnist1d_cnn = importlib.util.module_from_spec(found)
    found.loader.exec_module(mnist1d_cnn)

    v1 = tf.compat.v1
    v1.disable_eager_execution()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4000, 40)).astype(np.float32)
    y = rng.integers(0, 10, size=4000).astype(np.int64)
    features, labels = v1.data.make_one_shot_iterator(
        tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(32)).get_next()
    out = mnist1d_cnn.model_fn(features, labels, {}, True)
    train = v1.train.MomentumOptimizer(0.02, 0.9).minimize(out["loss"])
    config = v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=2)
    with v1.Session(config=config) as sess:
        sess.run(v1.global_variables_initializer())
        for _ in range(warmup):
            sess.run(train)
        times = []
        cpu = time.process_time()
        for _ in range(steps):
            t = time.perf_counter()
            sess.run(train)
            times.append(time.perf_counter() - t)
    print(json.dumps({"step_s": times, "cpu_s": time.process_time() - cpu}))


def stats(step_s: list[float]) -> dict:
    ordered = sorted(step_s)
    n = len(ordered)
    med = statistics.median(ordered)
    return {"median_ms": round(med * 1e3, 2), "p90_ms": round(ordered[int(0.90 * (n - 1))] * 1e3, 2),
            "p99_ms": round(ordered[int(0.99 * (n - 1))] * 1e3, 2), "max_ms": round(ordered[-1] * 1e3, 2),
            "cv": round(statistics.pstdev(ordered) / statistics.mean(ordered), 3),
            "p99_over_median": round(ordered[int(0.99 * (n - 1))] / med, 2),
            "steps_per_s": round(n / sum(ordered), 1)}


def run_one(hierarchy, cpus: float | None, period_us: int, args) -> dict:
    cmd = [sys.executable, "-m", "bench.cgroup_period", "--child", "--work", args.work, "--steps", str(args.steps),
           "--warmup", str(args.warmup), "--matmuls", str(args.matmuls), "--threads", str(args.threads)]
    throttling = None
    if cpus is None:  # the reference: no group, no quota
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=ROOT)
    else:
        run = hierarchy.create_run(f"period-bench-{period_us}", 1, cpus, period_us)
        try:
            proc = subprocess.run(run.nodes[0].command(cmd), capture_output=True, text=True, timeout=900, cwd=ROOT)
            throttling = run.nodes[0].stat()
        finally:
            run.remove()
    if proc.returncode != 0:
        raise RuntimeError(f"child failed: {proc.stderr[-500:]}")
    result = common.last_json(proc.stdout)
    out = stats(result["step_s"])
    out["cpu_ms_per_step"] = round(result["cpu_s"] / len(result["step_s"]) * 1e3, 3)
    if throttling:  # share of periods in which the group ran out of quota: does the cap bind at all?
        out["throttled_share"] = round(throttling.get("nr_throttled", 0) / max(1, throttling.get("nr_periods", 1)), 3)
    return out


def _on_cpu_ns(pid: int) -> int:
    with open(f"/proc/{pid}/schedstat", encoding="ascii") as fh:
        return int(fh.read().split()[0])


def wrapper_cost(repeats: int = 20) -> dict:
    """On-CPU time of the sh wrapper when it joins the group, and of a Python child when Popen has returned."""
    sh = []
    for _ in range(repeats):
        out = subprocess.run(["/bin/sh", "-c", 'echo $$ > /dev/null && read ns rest < /proc/$$/schedstat && echo $ns'],
                             capture_output=True, text=True, check=True)
        sh.append(int(out.stdout.split()[0]))
    popen = []
    for _ in range(repeats):
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1)"])
        # What a parent moving the pid right after Popen would leave outside the group.
        popen.append(_on_cpu_ns(proc.pid))
        proc.kill()
        proc.wait()
    return {"sh_wrapper_before_exec_us": round(statistics.median(sh) / 1e3, 1),
            "python_child_before_move_us": round(statistics.median(popen) / 1e3, 1), "repeats": repeats}


RESULT_SCHEMA = {
    "cgroup": "the cpu controller used", "work": "tf or numpy", "cpus": "the budget", "steps": "timed steps per run",
    "rounds": "rounds, each running every period", "median_of_rounds": "{period: step-time statistics}",
    "runs": "every run's statistics", "wrapper": "on-CPU cost of the sh wrapper outside the budget",
}


def add_options(parser) -> None:
    parser.add_argument("--cpus", type=float, default=0.45)
    parser.add_argument("--periods-ms", default="100,20,10,5", help="Comma-separated CFS periods in ms.")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--reference", action="store_true", help="Also run without a quota each round.")
    parser.add_argument("--work", choices=("tf", "numpy"), default="tf",
                        help="tf: the quickstart CNN's training step; numpy: fixed single-threaded CPU work per step "
                             "(--step-cpu-ms), for machines without TensorFlow.")
    parser.add_argument("--step-cpu-ms", type=float, default=4.0, help="CPU per step of --work numpy.")
    parser.add_argument("--threads", type=int, default=1, help="Threads sharing each step of --work numpy.")
    parser.add_argument("--matmuls", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)


def run_part(args, root) -> dict:
    from syncswitch.backends.cgroups import CpuHierarchy

    hierarchy = CpuHierarchy.find()
    hierarchy.prepare()
    os.environ.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    args.matmuls = matmuls_for(args.step_cpu_ms) if args.work == "numpy" else 0
    periods = [int(float(p) * 1000) for p in args.periods_ms.split(",")]
    variants = [(args.cpus, p) for p in periods] + ([(None, 100_000)] if args.reference else [])
    results: dict[str, list] = {}
    for r in range(args.rounds):
        order = variants[r % len(variants):] + variants[:r % len(variants)]
        for cpus, period in order:
            key = "unlimited" if cpus is None else f"{period / 1000:g}ms"
            common.log(f"round {r + 1}: {key} (load {os.getloadavg()[0]:.1f})")
            results.setdefault(key, []).append(run_one(hierarchy, cpus, period, args))
    summary = {key: {field: statistics.median(run[field] for run in runs) for field in runs[0]}
               for key, runs in results.items()}
    if "unlimited" in summary:
        # Work done per CPU of budget: steps/s times the CPU an unconstrained step costs, over the budget
        # (1.0: the budget turns into steps as efficiently as an unconstrained process does).
        cost = summary["unlimited"]["cpu_ms_per_step"] / 1e3
        for key, row in summary.items():
            if key != "unlimited":
                row["efficiency"] = round(row["steps_per_s"] * cost / args.cpus, 3)
    return {"cgroup": repr(hierarchy), "work": args.work, "threads": args.threads, "matmuls_per_step": args.matmuls,
            "load_after": os.getloadavg(), "cpus": args.cpus, "steps": args.steps, "rounds": args.rounds,
            "median_of_rounds": summary, "runs": results, "wrapper": wrapper_cost()}


def child_main(argv) -> int:
    """A timed child (`--child`), started by run_one inside a node's group."""
    parser = argparse.ArgumentParser()
    add_options(parser)
    args = parser.parse_args(argv)
    if args.work == "numpy":
        child_numpy(args.steps, args.warmup, args.matmuls, args.threads)
    else:
        child(args.steps, args.warmup)
    return 0


if __name__ == "__main__":
    from bench import parts

    sys.exit(child_main(sys.argv[1:]) if "--child" in sys.argv else parts.main_of(__spec__.name))
