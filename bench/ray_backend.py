"""The ray backend against the local backend, side by side on one machine.

    python -m bench.ray_backend compare --seeds 5     # quickstart on 3 nodes: local, then ray, per seed
    python -m bench.ray_backend recovery --runs 5     # quickstart struck at 45%: local agent, Ray actor, Ray node
    python -m bench.ray_backend fanout --agents 8     # Status to 8 agents of each backend, Actuator and serial

The Ray cluster is real: `ray.cluster_utils.Cluster` with three raylets on this machine (1 CPU each), started
once for the whole bench; every job connects to it as a driver and removes its actors and placement group.
"""

from __future__ import annotations

import json
import sys
import os
import signal
import statistics
import threading
import time

from bench import common

NODES = 3
NODE_ARGS = {"num_cpus": 1, "object_store_memory": 80 * 1024 * 1024}
HEALTH_CHECK_PERIOD_MS = 1000
RESULTS = os.path.join(common.ROOT, "bench", "results")


class ActorKiller(threading.Thread):
    """SIGKILLs the Ray actor process that owns node `node`'s agent once the run reaches fraction `at`."""

    def __init__(self, run_dir: str, node: int, at: float, timeout_s: float = 300):
        super().__init__(daemon=True)
        self.run_dir, self.node, self.at, self.timeout_s = run_dir, node, at, timeout_s
        self.done, self.killed_at = threading.Event(), None

    def _reached(self) -> float:
        try:
            with open(os.path.join(self.run_dir, "metrics.jsonl"), encoding="utf-8") as fh:
                records = [json.loads(line) for line in fh if line.startswith('{"kind": "metrics"')]
        except (OSError, ValueError):
            return 0.0
        return max([r.get("fraction", 0.0) for r in records] + [0.0])

    def run(self) -> None:
        deadline = time.time() + self.timeout_s
        while not self.done.is_set() and time.time() < deadline:
            if self._reached() >= self.at:
                with open(os.path.join(self.run_dir, "ray-nodes.json"), encoding="utf-8") as fh:
                    agent = json.load(fh)["agents"][str(self.node)]
                os.kill(agent["actor_pid"], signal.SIGKILL)
                self.killed_at = self._reached()
                return
            time.sleep(0.1)


class NodeRemover(ActorKiller):
    """Removes a whole Ray node (SIGKILLs its raylet and the rest of its processes, `Cluster.remove_node`) once
    the run reaches fraction `at`: the Ray node of one of the job's nodes, never the head (the GCS lives there)
    nor the raylet this process's driver is connected to."""

    def __init__(self, cluster, run_dir: str, at: float, timeout_s: float = 300):
        super().__init__(run_dir, node=-1, at=at, timeout_s=timeout_s)
        self.cluster, self.removed_node_id = cluster, None

    def _pick(self):
        import ray

        with open(os.path.join(self.run_dir, "ray-nodes.json"), encoding="utf-8") as fh:
            agents = json.load(fh)["agents"]
        driver = getattr(ray._private.worker.global_worker.node, "_raylet_socket_name", None)
        by_id = {node.node_id: node for node in self.cluster.worker_nodes
                 if node._raylet_socket_name != driver}
        for index, agent in sorted(agents.items(), key=lambda item: -int(item[0])):
            if agent["node_id"] in by_id:
                return int(index), by_id[agent["node_id"]]
        raise RuntimeError(f"no job node on a removable Ray node: {agents}")

    def run(self) -> None:
        deadline = time.time() + self.timeout_s
        while not self.done.is_set() and time.time() < deadline:
            if self._reached() >= self.at:
                self.node, target = self._pick()
                self.removed_node_id = target.node_id
                self.cluster.remove_node(target, allow_graceful=False)
                self.killed_at = self._reached()
                return
            time.sleep(0.1)


def start_cluster():
    from ray.cluster_utils import Cluster

    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    # Ray declares a silent node dead after 5 failed health checks: 5 s at this period (Ray's default is 3 s, so
    # 15 s); a lost Ray node's bundle moves only then. The same setting as the tests' cluster.
    config = {"health_check_period_ms": HEALTH_CHECK_PERIOD_MS}
    cluster = Cluster(initialize_head=True, head_node_args={**NODE_ARGS, "include_dashboard": False,
                                                            "_system_config": config})
    for _ in range(NODES - 1):
        cluster.add_node(**NODE_ARGS)
    cluster.wait_for_nodes()
    return cluster


def submit(backend: str, seed: int, out: str, address: str = "", extra: tuple = ()) -> dict:
    from syncswitch import spec as specmod
    from syncswitch.cluster_manager import submission

    # One PS task on both: the local backend's default; the ray backend's (one per node) would change the layout.
    sets = [f"cluster.workers={NODES}", "cluster.parameter_servers=1", f"seed={seed}", *extra]
    if backend == "ray":
        sets += ["cluster.backend=ray", f"cluster.address={address}"]
    spec = specmod.load(common.QUICKSTART, sets)
    return submission.submit(spec, out, progress=False)


def _row(summary: dict) -> dict:
    switch = summary["switches"][0]["overhead_s"] if summary["switches"] else None
    return {"status": summary["status"], "final_accuracy": summary["final_accuracy"],
            "submit_to_first_step_s": summary["init_time_s"], "switch_overhead_s": switch,
            "total_time_s": summary["total_time_s"], "failures": summary["failures"]}


def stats(values: list[float]) -> dict:
    values = [v for v in values if v is not None]
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)} \
        if values else {}


def compare(cluster, seeds: int, work: str) -> dict:
    runs = {"local": [], "ray": []}
    for seed in range(1, seeds + 1):
        for backend in ("local", "ray"):  # interleaved: the machine's load drifts over minutes
            summary = submit(backend, seed, os.path.join(work, f"{backend}-{seed}"), cluster.address)
            runs[backend].append({"seed": seed, **_row(summary)})
            print(backend, seed, {k: v for k, v in runs[backend][-1].items() if k != "failures"}, flush=True)
    out = {"runs": runs}
    for key in ("final_accuracy", "submit_to_first_step_s", "switch_overhead_s"):
        out[key] = {b: stats([r[key] for r in runs[b]]) for b in runs}
    out["ratios_ray_over_local"] = {k: out[k]["ray"]["median"] / out[k]["local"]["median"]
                                    for k in ("submit_to_first_step_s", "switch_overhead_s")}
    out["first_step_gap_s"] = out["submit_to_first_step_s"]["ray"]["median"] - \
        out["submit_to_first_step_s"]["local"]["median"]
    return out


AT = 0.45  # where the recovery runs are struck: in the ASP phase, between two checkpoints
KILLS = {
    "local": "local backend: node 1's agent SIGKILLed (its forked task dies with it)",
    "ray-actor": "ray backend: node 1's Ray actor SIGKILLed (its agent and task die with it)",
    "ray-node": "ray backend: a whole Ray node removed (Cluster.remove_node SIGKILLs its raylet and processes)",
}


def _kill_run(kind: str, cluster, seed: int, run_dir: str) -> dict:
    """One quickstart run (checkpoint every 10%) struck at AT by `kind`; its row."""
    from bench.chaos import Killer

    if kind == "local":
        killer, backend = Killer(run_dir, "agent", 1, AT), "local"
    elif kind == "ray-actor":
        killer, backend = ActorKiller(run_dir, node=1, at=AT), "ray"
    else:  # a 4th Ray node, for the lost one's bundle: the cluster has NODES alive again after the removal
        cluster.add_node(**NODE_ARGS)
        cluster.wait_for_nodes()
        killer, backend = NodeRemover(cluster, run_dir, at=AT), "ray"
    killer.start()
    try:
        summary = submit(backend, seed, run_dir, cluster.address, ("checkpoint.every=0.1",))
    finally:
        killer.done.set()
    failure = (summary["failures"] or [{}])[0]
    struck = killer.fraction if kind == "local" else killer.killed_at
    return {"kind": kind, "seed": seed, **_row(summary), "killed_at": struck,
            "detected_after_s": failure.get("detected_after_s"), "recovered_after_s": failure.get("recovered_after_s"),
            "lost_fraction": failure.get("samples_lost", 0) / summary["total_samples"]}


def recovery(cluster, runs: int, work: str, kinds: list[str], first_seed: int = 1, add_to: str | None = None) -> dict:
    """Each kind of kill, `runs` seeds from `first_seed`, kinds interleaved per seed; with `add_to`, the runs of
    that result file too (a long measurement split into calls)."""
    rows = []
    if add_to:
        with open(add_to, encoding="utf-8") as fh:
            rows = [row for kind in json.load(fh)["kills"].values() for row in kind["runs"]]
    for seed in range(first_seed, first_seed + runs):
        for kind in kinds:
            rows.append(_kill_run(kind, cluster, seed, os.path.join(work, f"{kind}-{seed}")))
            print(kind, seed, rows[-1]["status"], rows[-1]["recovered_after_s"], rows[-1]["lost_fraction"], flush=True)
    out = {"at": AT, "checkpoint_every": 0.1, "ray_health_check_period_ms": HEALTH_CHECK_PERIOD_MS, "kills": {}}
    for kind in KILLS:
        mine = sorted((r for r in rows if r["kind"] == kind), key=lambda r: r["seed"])
        if mine:
            out["kills"][kind] = {
                "what": KILLS[kind], "runs": mine, "completed": sum(r["status"] == "completed" for r in mine),
                **{key: stats([r[key] for r in mine]) for key in ("recovered_after_s", "detected_after_s",
                                                                  "lost_fraction")}}
    return out


class Fleet:
    """`count` agents provisioned by one backend (no training task: forked tasks only, none started), with the
    manager's Actuator over them: what a switch or a stop fans out to."""

    def __init__(self, backend: str, count: int, work: str, address: str):
        import secrets

        from syncswitch.backends import ProvisionRequest, get_backend
        from syncswitch.cluster_manager.actuator import Actuator
        from syncswitch.wire.client import AgentClient

        options = {"address": address, "resources_per_node": {"CPU": 0.25}} if backend == "ray" else {}
        token = secrets.token_urlsafe(16)
        self.backend = get_backend(backend)()
        cluster = self.backend.provision(ProvisionRequest(f"fanout-{backend}", count, token, work, options))
        self.clients = [AgentClient(n.index, n.agent_address, token) for n in cluster.nodes]
        self.actuator = Actuator(self.clients)
        self.rounds = {"parallel": [], "sequential": []}

    def round(self, mode: str) -> None:
        t0 = time.perf_counter()
        replies = [c.status() for c in self.clients] if mode == "sequential" else \
            self.actuator.map(lambda c: c.status())
        self.rounds[mode].append(time.perf_counter() - t0)
        assert len(replies) == len(self.clients)

    def close(self) -> None:
        for client in self.clients:
            client.close()
        self.actuator.close()
        self.backend.teardown()


def fanout(cluster, agents: int, repeats: int, work: str) -> dict:
    """Status to every agent, parallel (the Actuator) and one by one, local and ray fleets up together and
    measured in alternating order, after two untimed warm-up rounds each (channels connect)."""
    fleets = {}
    try:
        for backend in ("local", "ray"):
            fleets[backend] = Fleet(backend, agents, os.path.join(work, f"fanout-{backend}"), cluster.address)
            for _ in range(2):
                fleets[backend].round("parallel")
            fleets[backend].rounds["parallel"].clear()
        for r in range(repeats):
            for backend in (("local", "ray") if r % 2 == 0 else ("ray", "local")):
                for mode in ("parallel", "sequential"):
                    fleets[backend].round(mode)
    finally:
        for fleet in fleets.values():
            fleet.close()
    out = {"agents": agents, "repeats": repeats,
           **{backend: {mode: stats(v) for mode, v in fleet.rounds.items()} for backend, fleet in fleets.items()}}
    out["ratio_ray_over_local"] = {mode: out["ray"][mode]["median"] / out["local"][mode]["median"]
                                   for mode in ("parallel", "sequential")}
    return out


RESULT_SCHEMA = {"command": "how it was run"}


def add_options(parser) -> None:
    parser.add_argument("what", nargs="?", default="compare", choices=("compare", "recovery", "fanout"),
                        help="compare local and ray (default), recover on ray, or fan a Status call out on both")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--agents", type=int, default=8, help="fanout: agents per backend (the quick bench's 8)")
    parser.add_argument("--repeats", type=int, default=20, help="fanout: timed rounds per backend and mode")
    parser.add_argument("--kills", default=",".join(KILLS),
                        help=f"recovery: the kinds of kill, comma-separated, from {', '.join(KILLS)}")
    parser.add_argument("--first-seed", type=int, default=1, help="recovery: the first run's seed")
    parser.add_argument("--add-to", help="recovery: a result file whose runs this call's join")


def run_part(args, root) -> dict:
    kinds = [k.strip() for k in args.kills.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KILLS]
    if unknown:  # before a cluster starts
        raise SystemExit(f"--kills: unknown {', '.join(unknown)}; valid are {', '.join(KILLS)}")
    cluster = start_cluster()
    try:
        if args.what == "fanout":
            result = fanout(cluster, args.agents, args.repeats, root)
        elif args.what == "compare":
            result = compare(cluster, args.seeds, root)
        else:
            result = recovery(cluster, args.runs, root, kinds, args.first_seed, args.add_to)
    finally:
        cluster.shutdown()
    if args.what == "recovery":
        result["command"] = f"python -m bench ray-backend recovery --runs {args.runs} --kills {args.kills} " \
                            f"--first-seed {args.first_seed}" + (f" --add-to {args.add_to}" if args.add_to else "")
    else:
        result["command"] = f"python -m bench ray-backend {args.what} --seeds {args.seeds}" + \
            (f" --agents {args.agents} --repeats {args.repeats}" if args.what == "fanout" else "")
    return result


if __name__ == "__main__":
    from bench import parts

    sys.exit(parts.main_of(__spec__.name))
