"""syncswitch against what TensorFlow users run: MultiWorkerMirroredStrategy (synchronous all-reduce),
ParameterServerStrategy with a ClusterCoordinator (asynchronous), one process alone (the machine's limit), and
syncswitch's `bsp`, `asp` and default switch, on the same job, seeds and nodes; `no-sync` (no communication at all)
is the nodes' own ceiling, and `tf-no-sync` TensorFlow's: the one-process loop in one process per node, each on its
shard of the data, which tells how much of MWMS's time its all-reduce takes; `switched` is the default with its speed
rule off (the switch taken where the default would weigh a trial first). --loopback-mbit limits all loopback traffic
(every process of every variant talks over lo) to that rate for the part, a network that costs time as a cluster's
does (bench/loopback.py), and records the bytes each run sent over it. A syncswitch variant with `+fp16` or `+bf16`
(`bsp+bf16`) runs with `hyperparameters.compression` so.

Peers are plain TF2 scripts (bench/peer_scripts/, no syncswitch imports) given the job's script, params, batch,
rate and sample count; they have models of their own for the MNIST-1D CNN, the synthetic ResNet and the big-vocabulary
probe, and build any other job's model_fn as a Keras functional model (peer_common.MODELS). With
--cpus-per-node each node gets its own cgroup with that CPU budget, as each syncswitch node does: one per MWMS
worker; for ParameterServerStrategy worker i and parameter server i share node i, the coordinator node 0.
Variants are interleaved within each seed. --allocator tcmalloc preloads gperftools' tcmalloc into every
process of every variant (peers and syncswitch's nodes alike): on some hosts glibc's malloc hands each step's
tensor memory back to the kernel and faults it in again, and a TF user would tune that away. Prints (and with
--out writes) JSON: every run, then per variant median [min-max] of training time, time to accuracy, final
accuracy and throughput, and each median as a ratio to one process alone and to MWMS.

    python -m bench peers --seeds 1,2,3 --variants mwms,single,bsp,default --out bench/results/peers-x.json
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time

from bench import common, loopback
from bench.allocators import ALLOCATORS, allocator_env, allocator_library, allocator_of

SCRIPTS = os.path.join(common.ROOT, "bench", "peer_scripts")
PEERS = ("single", "mwms", "ps-strategy", "tf-no-sync")  # plain TF2 scripts in bench/peer_scripts/
SCRIPT_OF = {"tf-no-sync": "single"}  # tf-no-sync: single.py on a shard in each of the nodes
# `no-sync`: syncswitch's workers each stepping on their own copy, averaged once at the end (local SGD with the
# longest period): what the same nodes do with no communication at all, the ceiling of any data-parallel
# protocol's throughput there. Its accuracy is not a training result.
# `switched`: the default with its speed rule off, so the switch is taken at the switch rule's point where the
# default would weigh a trial first (a short job, or a target with no measured speed, stays on BSP).
VARIANTS = (*PEERS, "bsp", "asp", "default", "switched", "no-sync")
# A syncswitch variant with `+fp16` or `+bf16` runs with hyperparameters.compression so (e.g. `bsp+bf16`).
WIRES = ("fp16", "bf16")
NO_SYNC = "policy.schedule=[{protocol: local-sgd, period: 10000}]"
DECAY = ["--set", "hyperparameters.lr_decay.boundaries=[0.5,0.75]",
         "--set", "hyperparameters.lr_decay.factors=[0.1,0.01]"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def budgets(cpus, nodes: int, label: str):
    """Per-process cgroups with `cpus` CPUs each (syncswitch's own cgroup code); None: no budgets."""
    if not cpus:
        yield None
        return
    from syncswitch.backends.cgroups import CpuHierarchy

    hierarchy = CpuHierarchy.find()
    hierarchy.prepare()
    run = hierarchy.create_run(f"peers-{label}-{os.getpid()}", nodes, cpus)
    try:
        yield run
    finally:
        run.remove()


# which model the peers build for a job's script (peer_common.MODELS)
PEER_MODELS = {"mnist1d_cnn.py": "mnist1d_cnn", "resnet_synthetic.py": "resnet", "big_vocab.py": "bag_of_words"}


def peer_model(job) -> str:
    """The peers' own model of the job's script, or `model_fn`: the script's model_fn as a Keras model."""
    return PEER_MODELS.get(os.path.basename(job.script), "model_fn")


def peer_args(job, seed: int, lr: float) -> list[str]:
    h = job.hyperparameters
    samples = round(job.workload.epochs * job_examples(job))
    return ["--script", job.script, "--params", json.dumps(dict(job.params)), "--batch", str(h.batch_size),
            "--lr", str(lr), "--momentum", str(h.momentum), "--samples", str(samples), "--seed", str(seed),
            "--model", peer_model(job)]


def job_examples(job) -> int:
    import importlib.util

    spec = importlib.util.spec_from_file_location("peer_job_script", job.script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.num_examples("train", dict(job.params))


def parse(out: str) -> dict:
    lines = [line for line in out.splitlines() if line.startswith("PEER_RESULT ")]
    if not lines:
        raise RuntimeError(f"peer printed no result: {out[-600:]!r}")
    return json.loads(lines[-1][len("PEER_RESULT "):])


def layout(kind: str, workers: int, ps_tasks: int) -> list[tuple]:
    """The processes of one peer run as (TF_CONFIG task or None, node); the first prints the result (tf-no-sync:
    each prints its own).

    ps-strategy places parameter server i on node i % workers beside worker i (syncswitch's per-node layout) and
    the coordinator (chief) on node 0."""
    if kind == "single":
        return [(None, 0)]
    if kind == "tf-no-sync":
        return [(None, i) for i in range(workers)]
    if kind == "mwms":
        return [(("worker", i), i) for i in range(workers)]
    return [(("chief", 0), 0)] + [(("worker", i), i) for i in range(workers)] + \
        [(("ps", i), i % workers) for i in range(ps_tasks)]


def tf_config(tasks: list[tuple]) -> dict:
    cluster = {}
    for kind, _ in tasks:
        cluster.setdefault(kind, []).append(f"127.0.0.1:{free_port()}")
    return cluster


def process_args(kind: str, args: list[str], index: int, workers: int) -> list[str]:
    """Process `index`'s arguments of a peer run: tf-no-sync's each train a 1/workers share of the samples on their
    own shard and evaluate once, at the end."""
    if kind != "tf-no-sync":
        return args
    out = list(args)
    at = out.index("--samples") + 1
    out[at] = str(int(out[at]) // workers)
    return [*out, "--shard", str(index), "--shards", str(workers), "--evals", "1"]


def combine(kind: str, outputs: list[str]) -> dict:
    """A peer run's result: the first process's report; tf-no-sync's, its processes' together (the slowest one's
    time, their samples over it; each trained its own model, so no accuracy)."""
    if kind != "tf-no-sync":
        return parse(outputs[0])
    parts = [parse(out) for out in outputs]
    slowest = max(p["train_time_s"] for p in parts)
    samples = sum(p["examples_per_s"] * p["train_time_s"] for p in parts)
    return {"train_time_s": slowest, "examples_per_s": samples / slowest, "final_accuracy": None, "evaluations": [],
            "steps": sum(p["steps"] for p in parts), "each_train_time_s": [p["train_time_s"] for p in parts]}


def run_peer(kind: str, job, seed: int, workers: int, cpus, timeout_s: float, library: str | None = None) -> dict:
    """One peer run: `single` in one process, `mwms` in `workers` processes, `ps-strategy` in a chief, `workers`
    worker servers and the job's parameter servers, `tf-no-sync` in `workers` lone processes. Each node's
    processes share its cgroup when budgeted."""
    lr = job.hyperparameters.learning_rate * (workers if kind == "mwms" else 1)  # BSP's scaled rate; async: one's
    args = peer_args(job, seed, lr)
    procs_of = layout(kind, workers, job.cluster.ps_tasks)
    tasks = [task for task, _ in procs_of if task]
    cluster = tf_config(tasks) if tasks else None
    script = os.path.join(SCRIPTS, f"{SCRIPT_OF.get(kind, kind).replace('-', '_')}.py")
    started = time.time()
    with budgets(cpus, 1 + max(node for _, node in procs_of), kind) as groups, \
            tempfile.TemporaryDirectory() as tmp:
        procs = []
        for i, (task, node) in enumerate(procs_of):
            env = allocator_env(library, dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
            # the user's script imports helpers beside it, as it would run with `python train.py`
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.dirname(job.script), env.get("PYTHONPATH")]))
            if task:
                env["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": task[0], "index": task[1]}})
            cmd = [sys.executable, script, *process_args(kind, args, i, workers)]
            if groups is not None:
                cmd = groups.nodes[node].command(cmd)
            log = open(os.path.join(tmp, f"{i}.log"), "w+")
            procs.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=common.ROOT), log))
        codes, outputs = wait_all(procs, procs[:1] if kind == "ps-strategy" else procs, timeout_s)
    if any(codes):
        bad = next(i for i, c in enumerate(codes) if c)
        raise RuntimeError(f"{kind} exited {codes}: {outputs[bad][-600:]}")
    result = combine(kind, outputs)
    result["wall_s"] = round(time.time() - started, 1)
    return result


def wait_all(procs: list, waited: list, timeout_s: float) -> tuple[list, list[str]]:
    """(exit codes of `waited`, every process's output); every process is stopped on the way out (ps-strategy's
    servers run until stopped: the chief's exit ends the run; the others end with their work)."""
    try:
        codes = [p.wait(timeout=timeout_s) for p, _ in waited]
    finally:
        for p, _ in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    outputs = []
    for _, log in procs:
        log.seek(0)
        outputs.append(log.read())
        log.close()
    return codes, outputs


def allreduce_is_default() -> bool:
    """Whether syncswitch's `bsp` runs by all-reduce without being asked (its catalog's default)."""
    from syncswitch.protocols.catalog import PROTOCOLS

    return bool(next(p.default for p in PROTOCOLS.get("bsp").params if p.name == "allreduce"))


def known(variant: str) -> bool:
    base, plus, wire = variant.partition("+")
    return base in VARIANTS and (not plus or (base not in PEERS and wire in WIRES))


def syncswitch_variant(variant: str) -> list[str]:
    """The submit options of a syncswitch variant: `default` is the job as shipped; BSP by all-reduce, asked for
    where it is not yet the default; a `+wire` suffix compresses the all-reduce."""
    variant, plus, wire = variant.partition("+")
    if plus:
        return [*syncswitch_variant(variant), "--set", f"hyperparameters.compression={wire}"]
    if variant == "asp":
        return ["--protocol", "asp"]
    if variant == "no-sync":
        return ["--set", NO_SYNC]
    if variant == "switched":
        return ["--set", "policy.switch_speed=false"]
    if allreduce_is_default():
        return ["--protocol", "bsp"] if variant == "bsp" else []
    if variant == "bsp":
        return ["--set", "policy.schedule=[{protocol: bsp, allreduce: true}]"]
    return ["--set", "policy.schedule=[{protocol: bsp, allreduce: true, until: 0.25}, {protocol: local-sgd}]"]


def run_syncswitch(variant: str, job_path: str, seed: int, workers: int, cpus, target: float, out_dir: str,
                   library: str | None = None) -> dict:
    cmd = [sys.executable, "-m", "syncswitch", "submit", job_path, "--quiet", "--workers", str(workers),
           "--output-dir", out_dir, "--target-accuracy", str(target), "--set", f"seed={seed}", *DECAY]
    cmd += syncswitch_variant(variant)
    path = os.path.join(out_dir, "summary.json")
    if os.path.exists(path):  # submit refuses the folder, and its old summary (maybe another job's) is not this run
        raise RuntimeError(f"{out_dir} already holds a run: give --runs-dir a folder of this cell's own")
    if cpus:
        cmd += ["--cpus-per-node", str(cpus)]
    started = time.time()
    # the manager's environment reaches its fork server, agents and evaluator: the whole node tree preloads it
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=common.ROOT, timeout=900, check=False,
                          env=allocator_env(library, dict(os.environ)))
    if not os.path.exists(path):
        raise RuntimeError(f"syncswitch {variant} wrote no summary (code {proc.returncode}): {proc.stderr[-600:]}")
    with open(path) as f:
        s = json.load(f)
    phases = [{"protocol": p["protocol"], "examples_per_s": p.get("examples_per_s"),
               "wall_time_s": p.get("wall_time_s")} for p in s.get("schedule", [])]
    return {"train_time_s": s.get("total_time_s"), "time_to_accuracy_s": s.get("time_to_accuracy_s"),
            "final_accuracy": s.get("final_accuracy"), "status": s.get("status"),
            "examples_per_s": s["total_samples"] / s["total_time_s"] if s.get("total_time_s") else None,
            "phases": phases, "init_time_s": s.get("init_time_s"), "wall_s": round(time.time() - started, 1),
            "run_dir": out_dir}


def children_cpu_s() -> float:
    """CPU seconds (user + system) of this process's ended and waited-for descendants so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_to(result: dict, target: float):
    if "time_to_accuracy_s" in result:
        return result["time_to_accuracy_s"]
    return next((t for t, acc in result.get("evaluations", []) if acc >= target), None)


def one(variant, job, job_path, seed, args, root) -> dict:
    common.log(f"seed {seed}: {variant} (load {os.getloadavg()[0]:.1f})")
    cpu, sent = children_cpu_s(), loopback.sent_bytes() if args.loopback_mbit else None
    try:
        if variant in PEERS:
            r = run_peer(variant, job, seed, args.workers, args.cpus_per_node, args.timeout, args.library)
        else:
            r = run_syncswitch(variant, job_path, seed, args.workers, args.cpus_per_node, args.target,
                               os.path.join(root, f"{variant}-seed{seed}"), args.library)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        return {"variant": variant, "seed": seed, "error": str(exc)}
    r["time_to_accuracy_s"] = time_to(r, args.target)
    r["cpu_s"] = round(children_cpu_s() - cpu, 1)  # the whole run's CPU, start-up and evaluations included
    if sent is not None:  # everything through the limited loopback during the run, start-up and teardown included
        r["loopback_bytes"] = loopback.sent_bytes() - sent
    common.log(f"  -> train {common.fmt(r.get('train_time_s'))} s, tta {common.fmt(r['time_to_accuracy_s'])} s, "
               f"acc {common.fmt(r.get('final_accuracy'), 3)}")
    return {"variant": variant, "seed": seed, **r}


def summarize(runs: list[dict]) -> dict:
    fields = ("train_time_s", "time_to_accuracy_s", "final_accuracy", "examples_per_s", "cpu_s")
    table = {}
    for variant in dict.fromkeys(r["variant"] for r in runs):
        mine = [r for r in runs if r["variant"] == variant]
        table[variant] = {f: common.spread([r.get(f) for r in mine]) for f in fields}
    for base in ("single", "mwms"):
        ref = table.get(base, {}).get("train_time_s", {}).get("median")
        for row in table.values():
            row[f"train_time_vs_{base}"] = common.ratio(row["train_time_s"]["median"], ref)
            if base == "mwms" and "mwms" in table:  # a cell without MWMS (syncswitch variants alone) has no ratio
                row["tta_vs_mwms"] = common.ratio(row["time_to_accuracy_s"]["median"],
                                                  table["mwms"]["time_to_accuracy_s"]["median"])
                row["throughput_vs_mwms"] = common.ratio(row["examples_per_s"]["median"],
                                                         table["mwms"]["examples_per_s"]["median"])
    return table


RESULT_SCHEMA = {"job": "the job spec", "workers": "nodes", "cpus_per_node": "each node's CPU budget (null: none)",
                 "target_accuracy": "the time-to-accuracy threshold", "seeds": "the seeds run",
                 "peer_model": "the model the TF peers built (peer_common.MODELS)",
                 "allocator": "the malloc every process of every variant ran on (system: glibc's; tcmalloc: "
                              "preloaded) and the library preloaded",
                 "bsp_allreduce": "whether syncswitch's BSP ran by all-reduce as its default or when asked",
                 "table": "per variant: median [min, max] of time, TTA, accuracy, throughput; ratios to single "
                          "and mwms",
                 "loopback_mbit": "all loopback traffic limited to this many Mbit/s for the part (tc tbf on lo: "
                                  "an emulated network every process shares; null: unlimited); each run's "
                                  "loopback_bytes is what crossed it",
                 "runs": "every run"}


def add_options(parser) -> None:
    parser.add_argument("--job", default=os.path.join(common.ROOT, "jobs", "mnist1d_cnn.yaml"))
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--cpus-per-node", type=float, help="each node / peer process in a cgroup of this budget")
    parser.add_argument("--target", type=float, default=0.95, help="time-to-accuracy threshold")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--runs-dir", help="where syncswitch's run folders go (default: beside --out)")
    parser.add_argument("--allocator", default="system", choices=ALLOCATORS,
                        help="the malloc of every process of every variant: the system's, or tcmalloc preloaded")
    parser.add_argument(loopback.OPTION, type=float, metavar="MBIT",
                        help="limit all loopback traffic to MBIT Mbit/s for the part (tc tbf on lo; root): an "
                             "emulated network, every variant's processes sharing it")
    parser.add_argument("--add-to", help="a result file of the same job, workers and budget whose runs this one "
                                         "keeps (seeds measured in short chunks); the summary covers them all")


def earlier_runs(args) -> list[dict]:
    """The runs of --add-to, checked to be of the same cell (job, workers, budget, target)."""
    if not args.add_to or not os.path.exists(args.add_to):
        return []
    with open(args.add_to) as f:
        doc = json.load(f)
    theirs = dict(doc, allocator=allocator_of(doc))
    for key, mine in (("job", args.job), ("workers", args.workers), ("cpus_per_node", args.cpus_per_node),
                      ("target_accuracy", args.target), ("allocator", args.allocator),
                      ("loopback_mbit", args.loopback_mbit)):
        if theirs.get(key) != mine:
            raise SystemExit(f"--add-to {args.add_to}: its {key} is {theirs.get(key)!r}, this run's {mine!r}")
    return doc["runs"]


def run_part(args, root) -> dict:
    job = common.load_spec(args.job)
    variants = [v for v in args.variants.split(",") if v]
    unknown = sorted(v for v in set(variants) if not known(v))
    if unknown:
        raise SystemExit(f"--variants: unknown variant(s) {unknown}; valid: {', '.join(VARIANTS)}, and a "
                         f"syncswitch one with +{' or +'.join(WIRES)}")
    model = peer_model(job) if set(variants) & set(PEERS) else None  # before any run: the peers know the job
    args.library = allocator_library(args.allocator)
    seeds = [int(s) for s in args.seeds.split(",")]
    root = args.runs_dir or root
    runs = earlier_runs(args)
    with loopback.limited(args.loopback_mbit):
        for seed in seeds:
            k = seed % len(variants)  # interleaved: no variant always first, also when seeds run one per invocation
            order = variants[k:] + variants[:k]
            runs += [one(v, job, args.job, seed, args, root) for v in order]
    return {"job": args.job, "workers": args.workers, "cpus_per_node": args.cpus_per_node,
            "target_accuracy": args.target, "seeds": sorted({r["seed"] for r in runs}), "peer_model": model,
            "allocator": {"name": args.allocator, "library": args.library}, "loopback_mbit": args.loopback_mbit,
            "bsp_allreduce": "the default" if allreduce_is_default() else "asked for (allreduce: true)",
            "table": summarize([r for r in runs if "error" not in r]), "runs": runs}


if __name__ == "__main__":
    from bench import parts

    sys.exit(parts.main_of(__spec__.name))
