"""The bare baseline of the framework-overhead part: a hand-written tf.compat.v1 parameter-server loop training
a job's model.

No syncswitch at run time: one process per worker (PS tasks in the first `--ps` of them, as syncswitch
places them), numpy batches fed with feed_dict, MonitoredTrainingSession-style sessions, BSP through
SyncReplicasOptimizer until the switch point, then plain asynchronous updates of the same optimizer (the
flip is decided in the graph's own counter: a worker reads the global step after its update), and the chief
evaluating the test split every `evaluation.every` of the workload. Hyperparameters follow the paper's
linear scaling rule as syncswitch's default configuration does: BSP at n * lr, ASP at lr, batch B per worker.

Run `python -m bench.bare_loop JOB.yaml --workers 4 --ps 1 [--set KEY=VALUE]`; it prints one JSON object.
The job's script must expose `_data(num_samples, seed)` arrays (examples/mnist1d_cnn.py does).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import subprocess
import sys
import time
from typing import NamedTuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPORT = "BARE-REPORT "
READY = "BARE-READY"


# -- the parent: read the job, start the workers, collect what they report ----------------------------
def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def plan_from_spec(path: str, overrides, workers: int, ps: int, switch_at: float) -> dict:
    """What every worker needs, from the same job spec syncswitch reads (validated by syncswitch's loader)."""
    # Imported for their registrations: the backends, policies and protocols a spec names.
    import syncswitch.backends
    import syncswitch.policies  # noqa: F401
    from syncswitch import spec as specmod

    job = specmod.load(path, list(overrides))
    hp = job.hyperparameters
    return {"script": job.script, "params": job.params, "batch": hp.batch_size, "lr": hp.learning_rate,
            "momentum": hp.momentum, "boundaries": list(hp.lr_decay.boundaries), "factors": list(hp.lr_decay.factors),
            "epochs": job.workload.epochs, "samples": job.workload.samples, "eval_every": job.evaluation.every,
            "seed": job.seed, "workers": workers, "ps": ps, "switch_at": switch_at, "job": job.name}


def run(plan: dict, timeout_s: float = 1800) -> dict:
    n, k = plan["workers"], plan["ps"]
    ports = free_ports(2 * n)
    plan = dict(plan, worker_hosts=[f"127.0.0.1:{p}" for p in ports[:n]],
                ps_hosts=[f"127.0.0.1:{p}" for p in ports[n:n + k]])
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2")
    t_start = time.time()
    procs = []
    try:
        for i in range(n):
            procs.append(subprocess.Popen([sys.executable, "-m", "bench.bare_loop", "--worker", str(i)],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT,
                                          start_new_session=True))
            procs[-1].stdin.write(json.dumps(plan) + "\n")
            procs[-1].stdin.flush()
        # A start barrier, as syncswitch's: under BSP the fastest workers would otherwise make every update
        # alone (SyncReplicasOptimizer counts gradients, not workers) while the others still build sessions.
        for i, p in enumerate(procs):
            _read_until(p, READY, i)
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        reports = [None] * n
        # Workers 1.. exit when done; the PS hosts (0..k-1) keep serving until every worker has finished.
        order = list(range(k, n)) + list(range(k))
        deadline = t_start + timeout_s
        for i in order:
            reports[i] = json.loads(_read_until(procs[i], REPORT, i)[len(REPORT):])
            if i >= k:
                procs[i].wait(timeout=max(1.0, deadline - time.time()))
            if time.time() > deadline:
                raise RuntimeError(f"bare loop did not finish within {timeout_s:.0f} s")
        for i in range(k):
            procs[i].stdin.close()  # the PS hosts may go now
            procs[i].wait(timeout=30)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return summarize(plan, reports, t_start)


def _read_until(proc, prefix: str, index: int) -> str:
    line = proc.stdout.readline()
    while line and not line.startswith(prefix):  # whatever else a library printed
        line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"bare worker {index} exited with code {proc.wait()} before {prefix.strip()}")
    return line


def summarize(plan: dict, reports: list[dict], t_start: float) -> dict:
    # Training starts when every worker trains (after the start barrier the workers' first steps are close).
    first = max(r["first_step"] for r in reports)
    end = max(r["end"] for r in reports)
    switch = [r["switched"] for r in reports if r["switched"] is not None]
    chief = reports[0]
    out = {"job": plan["job"], "workers": plan["workers"], "parameter_servers": plan["ps"],
           "switch_at": plan["switch_at"], "total_samples": chief["total"],
           "init_time_s": first - t_start, "total_time_s": end - first,
           "first_step_spread_s": first - min(r["first_step"] for r in reports),
           "evaluations": chief["evaluations"],
           "final_accuracy": chief["evaluations"][-1]["accuracy"] if chief["evaluations"] else None,
           "steps": [r["steps"] for r in reports], "schedule": []}
    bsp_samples = chief["switch_samples"]
    if switch:
        t_switch_first, t_switch_last = min(switch), max(switch)
        out["schedule"].append({"protocol": "bsp", "samples": bsp_samples, "wall_time_s": t_switch_last - first,
                                "examples_per_s": bsp_samples / (t_switch_last - first)})
        asp_samples = chief["total"] - bsp_samples
        out["schedule"].append({"protocol": "asp", "samples": asp_samples, "wall_time_s": end - t_switch_first,
                                "examples_per_s": asp_samples / (end - t_switch_first)})
    return out


# -- a worker process ------------------------------------------------------------------------------
class _Schedule(NamedTuple):
    """Where the workload ends and where it switches, in samples and in global steps."""
    workers: int
    batch: int
    total: int
    switch_steps: int
    switch_samples: int


class _Ops(NamedTuple):
    """What the training loop feeds and fetches."""
    features: object
    labels: object
    correct: object
    step_after_sync: object
    step_after_async: object
    sync: object


def worker(index: int) -> None:
    plan = json.loads(sys.stdin.readline())
    import tensorflow as tf

    tf.compat.v1.disable_eager_execution()
    cluster, servers = _start_servers(plan, index)  # held to the end: a PS host serves until told to go
    module = _load_script(plan["script"])
    params = plan["params"]
    x, y, x_test, y_test = module._data(params.get("num_samples", 5000), params.get("data_seed", 42))
    sched = _schedule(plan, len(x))
    graph = tf.Graph()
    with graph.as_default():
        ops = _build_graph(plan, index, cluster, module, x.shape[1:], sched)
        session = _open_session(ops.sync, index, servers[-1].target)
        sys.stdout.write(READY + "\n")
        sys.stdout.flush()
        sys.stdin.readline()  # go: every worker has its session
        trained = _train(session, ops, plan, index, sched, (x, y, x_test, y_test))
    report = {"index": index, "first_step": trained["first_step"], "switched": trained["switched"],
              "end": trained["end"], "steps": trained["steps"], "total": sched.total,
              "switch_samples": sched.switch_samples, "evaluations": trained["evaluations"]}
    sys.stdout.write(REPORT + json.dumps(report) + "\n")
    sys.stdout.flush()
    if index < plan["ps"]:
        sys.stdin.read()  # serve the variables until the parent says every worker is done
    os._exit(0)  # a SyncReplicasOptimizer chief can hang in session teardown


def _start_servers(plan: dict, index: int):
    """This worker's server, and before it the PS task's when the worker hosts one (PS tasks 0..ps-1)."""
    import tensorflow as tf

    v1 = tf.compat.v1
    cluster = tf.train.ClusterSpec({"ps": plan["ps_hosts"], "worker": plan["worker_hosts"]})
    threads = v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=2)
    servers = []
    if index < plan["ps"]:
        servers.append(tf.distribute.Server(cluster, job_name="ps", task_index=index, config=threads))
    server = tf.distribute.Server(cluster, job_name="worker", task_index=index, config=threads)
    servers.append(server)
    return cluster, servers


def _load_script(path: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location("bare_user_script", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _schedule(plan: dict, per_epoch: int) -> _Schedule:
    n, batch = plan["workers"], plan["batch"]
    total = int(plan["samples"] or round(plan["epochs"] * per_epoch))
    # BSP applies one update of n * B samples per global step, ASP one of B: the switch is a step count.
    switch_steps = math.ceil(plan["switch_at"] * total / (n * batch))
    switch_samples = switch_steps * n * batch
    return _Schedule(n, batch, total, switch_steps, switch_samples)


def _learning_rate(plan: dict, global_step, sched: _Schedule):
    """n * lr under BSP, lr under ASP, decayed at the workload fractions the plan names (samples, not steps)."""
    import tensorflow as tf

    v1 = tf.compat.v1
    n, batch, total, switch_steps, switch_samples = sched
    gs = tf.cast(global_step, tf.float32)
    bsp = gs < switch_steps
    samples = tf.where(bsp, gs * n * batch, switch_samples + (gs - switch_steps) * batch)
    values = [1.0] + list(plan["factors"])
    decay = (v1.train.piecewise_constant(samples / total, [float(b) for b in plan["boundaries"]], values)
             if plan["boundaries"] else 1.0)
    return tf.where(bsp, n * plan["lr"], plan["lr"]) * decay


def _build_graph(plan: dict, index: int, cluster, module, feature_shape, sched: _Schedule) -> _Ops:
    """The model on the PS tasks' variables, trained by SyncReplicasOptimizer (BSP) or the bare optimizer (ASP)."""
    import tensorflow as tf

    v1 = tf.compat.v1
    n = sched.workers
    v1.set_random_seed(plan["seed"])
    setter = v1.train.replica_device_setter(ps_tasks=plan["ps"], worker_device=f"/job:worker/task:{index}",
                                            cluster=cluster)
    with v1.device(setter):
        global_step = v1.train.get_or_create_global_step()
        opt = v1.train.MomentumOptimizer(_learning_rate(plan, global_step, sched), plan["momentum"])
        features = v1.placeholder(tf.float32, [None] + list(feature_shape), name="features")
        labels = v1.placeholder(tf.int64, [None], name="labels")
        out = module.model_fn(features, labels, plan["params"], True)
        loss = out["loss"]
        correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(out["logits"], 1), labels), tf.int32))
        grads = opt.compute_gradients(loss)
        sync = v1.train.SyncReplicasOptimizer(opt, replicas_to_aggregate=n, total_num_replicas=n)
        sync_train = sync.apply_gradients(grads, global_step)
        async_train = opt.apply_gradients(grads, global_step)  # the same momentum slots
        # The step after this worker's update: under BSP read once its token arrived (the update applied).
        with tf.control_dependencies([sync_train]):
            step_after_sync = tf.identity(global_step.read_value())
        with tf.control_dependencies([async_train]):
            step_after_async = tf.identity(global_step.read_value())
    return _Ops(features, labels, correct, step_after_sync, step_after_async, sync)


def _open_session(sync, index: int, master: str):
    import tensorflow as tf

    v1 = tf.compat.v1
    hook = sync.make_session_run_hook(index == 0)
    config = v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=2,
                            device_filters=["/job:ps", f"/job:worker/task:{index}"])
    return v1.train.MonitoredSession(session_creator=_creator(index == 0, master, config), hooks=[hook])


def _batches(rng, x, y, batch: int):
    """Batches of B drawn without replacement, a fresh permutation every epoch (the last partial batch dropped)."""
    while True:
        order = rng.permutation(len(x))
        for s in range(0, len(order) - batch + 1, batch):
            idx = order[s:s + batch]
            yield x[idx], y[idx]


def _accuracy(session, ops: _Ops, x_test, y_test) -> float:
    right = sum(session.run(ops.correct, {ops.features: x_test[s:s + 500], ops.labels: y_test[s:s + 500]})
                for s in range(0, len(x_test), 500))
    return right / len(x_test)


def _eval_points(plan: dict, index: int) -> list[float]:
    """The workload fractions the chief evaluates at before the end (the end's evaluation comes after the loop)."""
    points = [round(j * plan["eval_every"], 9) for j in range(1, int(1 / plan["eval_every"]) + 1)]
    return [p for p in points if p < 1.0] if index == 0 else []


def _train(session, ops: _Ops, plan: dict, index: int, sched: _Schedule, data) -> dict:
    """Steps until the workload is done: BSP's op until the switch step, then ASP's; the chief evaluates."""
    import numpy as np

    x, y, x_test, y_test = data
    n, batch, total, switch_steps, switch_samples = sched
    rng = np.random.RandomState(plan["seed"] * 1000 + index)
    points = _eval_points(plan, index)
    evaluations = []

    def evaluate(fraction):
        accuracy = _accuracy(session, ops, x_test, y_test)
        evaluations.append({"fraction": fraction, "time": time.time(), "accuracy": accuracy})

    first_step = switched = None
    steps = 0
    step = 0
    feed = _batches(rng, x, y, batch)
    done = 0
    while done < total:
        bx, by = next(feed)
        op = ops.step_after_sync if step < switch_steps else ops.step_after_async
        step = session.run(op, {ops.features: bx, ops.labels: by})
        steps += 1
        if first_step is None:
            first_step = time.time()
        if switched is None and step >= switch_steps:
            switched = time.time()
        done = step * n * batch if step <= switch_steps else switch_samples + (step - switch_steps) * batch
        while points and done / total >= points[0]:
            evaluate(points.pop(0))
    end = time.time()
    if index == 0:
        evaluate(1.0)
    return {"first_step": first_step, "switched": switched, "end": end, "steps": steps, "evaluations": evaluations}


def _creator(is_chief: bool, master: str, config):
    """The MonitoredTrainingSession creators, polling readiness every 0.1 s instead of 30 s (as syncswitch's)."""
    import tensorflow as tf

    v1 = tf.compat.v1
    base = v1.train.ChiefSessionCreator if is_chief else v1.train.WorkerSessionCreator

    class Creator(base):
        def _get_session_manager(self):
            if self._session_manager is None:
                self._session_manager = v1.train.SessionManager(
                    local_init_op=self._scaffold.local_init_op, ready_op=self._scaffold.ready_op,
                    ready_for_local_init_op=self._scaffold.ready_for_local_init_op,
                    graph=v1.get_default_graph(), recovery_wait_secs=0.1)
            return self._session_manager

    return Creator(master=master, config=config)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("job", nargs="?", help="Job spec (YAML).")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--ps", type=int, default=1, help="PS tasks, hosted by workers 0..ps-1.")
    parser.add_argument("--switch-at", type=float, default=0.25)
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        worker(args.worker)
        return 0
    if not args.job:
        parser.error("a job spec is required")
    result = run(plan_from_spec(args.job, args.sets, args.workers, args.ps, args.switch_at))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
