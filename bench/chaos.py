"""Chaos runs: SIGKILL a worker's task, a PS-hosting task, an agent or the manager at scheduled points of
a quickstart run, and measure what recovery costs (`python -m bench chaos --runs 20 --out FILE.json`).

Every syncswitch node hosts one parameter-server task and one worker in one training process, so "a PS
kill" is a kill of a node's training process while its parameter shard serves the others (node 0's holds
the chief); "a worker kill" is a kill of a non-chief node's process in the BSP phase.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time

from bench import common

# name: (what to kill, node, fraction of the workload at which to kill, what the point is)
SCENARIOS = {
    "worker-bsp": ("task", 1, 0.12, "a worker's training process in the BSP phase"),
    "ps-asp": ("task", 0, 0.6, "node 0's process (chief worker + PS shard 0) in the ASP phase"),
    "worker-asp": ("task", 1, 0.45, "node 1's process (worker + PS shard 1) in the ASP phase"),
    "agent": ("agent", 1, 0.5, "node 1's agent (its task dies with it)"),
    "switch": ("task", 1, 0.25, "node 1's process at the in-place BSP->ASP switch"),
    "manager": ("manager", None, 0.5, "the manager (then `syncswitch resume`)"),
}


def _cmdline(proc) -> str:
    try:
        return " ".join(proc.cmdline())
    except Exception:  # noqa: BLE001 - gone or not ours
        return ""


def node_processes(run_dir: str, node: int) -> tuple[list, list]:
    """(agents, training tasks) of node `node` of the run in `run_dir` on this machine."""
    import psutil

    work_dir = os.path.join(os.path.abspath(run_dir), "nodes", str(node))
    agents = [p for p in psutil.process_iter() if "syncswitch.node.agent" in _cmdline(p)
              and f"--work-dir {work_dir}" in _cmdline(p)]
    tasks = []
    for agent in agents:
        try:
            tasks += [c for c in agent.children() if "syncswitch.node.task" in _cmdline(c)]
        except psutil.Error:
            continue
    # Tasks forked by the local backend's fork server are its children, named for their role. A task runs in its
    # script's folder, so it is told by its log (its stderr), which its agent opened in the node's folder.
    for proc in psutil.process_iter(["name"]):
        try:
            if proc.info["name"] == "syncswitch-task" and \
                    os.readlink(f"/proc/{proc.pid}/fd/2").startswith(work_dir + os.sep):
                tasks.append(proc)
        except (psutil.Error, OSError):
            continue
    return agents, tasks


def reached(run_dir: str) -> float:
    """The largest workload fraction a worker reported so far (metrics.jsonl)."""
    best = 0.0
    try:
        with open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") as fh:
            for line in fh:
                if '"kind": "metrics"' in line:
                    try:
                        best = max(best, json.loads(line).get("fraction", 0.0))
                    except ValueError:
                        continue
    except FileNotFoundError:
        pass
    return best


class Killer(threading.Thread):
    """SIGKILLs node `node`'s task or agent (or the process `manager_pid`) once the run reaches `at`; `sig`
    another signal (SIGSTOP: a process that hangs, alive and silent)."""

    def __init__(self, run_dir: str, what: str, node: int | None, at: float, manager_pid: int | None = None,
                 timeout_s: float = 600.0, sig: int = signal.SIGKILL):
        super().__init__(daemon=True)
        self.run_dir, self.what, self.node, self.at = run_dir, what, node, at
        self.manager_pid, self.timeout_s, self.sig = manager_pid, timeout_s, sig
        self.killed_at: float | None = None   # wall time of the kill
        self.fraction: float | None = None    # progress when it was sent
        self.pid: int | None = None
        self.done = threading.Event()

    def run(self) -> None:
        deadline = time.time() + self.timeout_s
        while not self.done.is_set() and time.time() < deadline:
            fraction = reached(self.run_dir)
            if fraction >= self.at:
                pid = self._pick()
                if pid is not None:
                    try:
                        os.kill(pid, self.sig)
                    except ProcessLookupError:
                        time.sleep(0.05)
                        continue
                    self.killed_at, self.fraction, self.pid = time.time(), fraction, pid
                    return
            time.sleep(0.05)

    def _pick(self) -> int | None:
        if self.what == "manager":
            return self.manager_pid
        agents, tasks = node_processes(self.run_dir, self.node)
        chosen = agents if self.what == "agent" else tasks
        return chosen[0].pid if chosen else None


def run_one(job: str, run_dir: str, scenario: str | None, sets: list[str], timeout_s: float = 900) -> dict:
    """One quickstart run via the CLI, with `scenario`'s kill (None: unfailed); the summary and the kill."""
    env = dict(os.environ)
    cmd = [sys.executable, "-m", "syncswitch", "submit", job, "--output-dir", run_dir, "--quiet"]
    for s in sets:
        cmd += ["--set", s]
    t0 = time.time()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    killer = None
    if scenario is not None:
        what, node, at, _ = SCENARIOS[scenario]
        killer = Killer(run_dir, what, node, at, manager_pid=proc.pid)
        killer.start()
    out, _ = proc.communicate(timeout=timeout_s)
    resumed = None
    if scenario == "manager":
        killer.join(1)
        # The manager died without tearing down: its agents are orphans a resume must not meet.
        _kill_orphans(run_dir)
        r = subprocess.run([sys.executable, "-m", "syncswitch", "resume", run_dir, "--quiet"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout_s)
        out += r.stdout
        resumed = r.returncode
    if killer is not None:
        killer.done.set()
    summary = _summary(run_dir)
    result = {"scenario": scenario or "none", "rc": proc.returncode if resumed is None else resumed,
              "wall_s": time.time() - t0, "output_tail": out[-800:]}
    if killer is not None:
        result.update(killed_at_fraction=killer.fraction, kill_sent=killer.killed_at is not None,
                      kill_t=None if killer.killed_at is None else killer.killed_at - t0)
    if summary:
        result.update({k: summary.get(k) for k in ("status", "final_accuracy", "converged_accuracy", "total_time_s",
                                                   "init_time_s", "failures", "goodput", "message", "resumes")})
        if killer is not None and killer.killed_at and summary.get("failures"):
            first = summary["failures"][0]
            # detected at (since submission) against the kill time: the detection latency
            result["detection_s"] = first["t"] - (killer.killed_at - _submit_time(run_dir, summary))
    result["leftovers"] = _leftovers(run_dir)
    return result


def _submit_time(run_dir: str, summary: dict) -> float:
    return summary["t_submit"]


def _summary(run_dir: str) -> dict | None:
    try:
        with open(os.path.join(run_dir, "summary.json"), encoding="utf-8") as fh:
            return json.load(fh)
    except (FileNotFoundError, ValueError):
        return None


def _kill_orphans(run_dir: str) -> None:
    for node in range(16):
        agents, tasks = node_processes(run_dir, node)
        for p in agents + tasks:
            try:
                p.kill()
            except Exception:  # noqa: BLE001
                pass


def _leftovers(run_dir: str) -> list[int]:
    time.sleep(0.5)
    left = []
    for node in range(16):
        agents, tasks = node_processes(run_dir, node)
        left += [p.pid for p in agents + tasks]
    return left


RESULT_SCHEMA = {"runs": "one row per run: scenario, status, accuracy, failures, goodput, leftovers",
                 "aggregate": "recovery times, samples lost, accuracy against the unfailed runs", "sets": "overrides"}


def add_options(parser) -> None:
    parser.add_argument("--job", default=common.QUICKSTART)
    parser.add_argument("--scenarios", default="worker-bsp,ps-asp,worker-asp,agent,switch",
                        help=f"comma-separated, of: {', '.join(SCENARIOS)}")
    parser.add_argument("--runs", type=int, default=20, help="failed runs in all, cycling through the scenarios")
    parser.add_argument("--unfailed", type=int, default=5, help="unfailed runs, interleaved, for the baseline")
    parser.add_argument("--set", dest="sets", action="append", default=[])
    parser.add_argument("--reaggregate", metavar="RESULT.json", help="recompute a result file's aggregate (reading "
                        "init times from its run folders where the runs lack them) instead of running")


def reaggregate(path: str) -> dict:
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    folder = doc.get("run_root") or os.path.splitext(path)[0] + "-runs"
    for i, r in enumerate(doc["runs"]):
        summary = _summary(os.path.join(folder, f"{i:02d}-{r['scenario']}")) or {}
        r.setdefault("init_time_s", summary.get("init_time_s"))
    doc["aggregate"] = aggregate(doc["runs"])
    return doc


def plan_order(scenarios: list[str], runs: int, unfailed: int) -> list[str | None]:
    """The failed runs cycling through the scenarios, unfailed ones (None) spread among them: machine load drifts."""
    plan = [scenarios[i % len(scenarios)] for i in range(runs)]
    step = max(1, len(plan) // max(1, unfailed))
    order = []
    for i, s in enumerate(plan):
        if i % step == 0 and sum(1 for o in order if o is None) < unfailed:
            order.append(None)
        order.append(s)
    while sum(1 for o in order if o is None) < unfailed:
        order.append(None)
    return order


def run_part(args, root) -> dict:
    if args.reaggregate:
        return reaggregate(args.reaggregate)
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    order = plan_order(scenarios, args.runs, args.unfailed)
    results = []
    for i, scenario in enumerate(order):
        run_dir = os.path.join(root, f"{i:02d}-{scenario or 'none'}")
        common.log(f"run {i + 1}/{len(order)}: {scenario or 'unfailed'}")
        result = run_one(args.job, run_dir, scenario, args.sets)
        results.append(result)
        common.log(f"  -> {result.get('status')} acc {result.get('final_accuracy')} "
                   f"failures {len(result.get('failures') or [])}")
        common.write_json(os.path.join(root, "partial.json"),
                          {"runs": results, "aggregate": aggregate(results), "sets": args.sets, "run_root": root})
    return {"runs": results, "aggregate": aggregate(results), "sets": args.sets, "run_root": root}


def aggregate(results: list[dict]) -> dict:
    failed = [r for r in results if r["scenario"] != "none"]
    clean = [r for r in results if r["scenario"] == "none"]
    acc = [r["final_accuracy"] for r in clean if r.get("final_accuracy") is not None]
    base = statistics.median(acc) if acc else None
    recoveries = [f["recovered_after_s"] for r in failed for f in (r.get("failures") or [])]
    # Against the same run's own start (submit to first step): a busy machine slows both alike.
    against_init = [f["recovered_after_s"] / r["init_time_s"] for r in failed for f in (r.get("failures") or [])
                    if r.get("init_time_s")]
    lost = [f["samples_lost"] for r in failed for f in (r.get("failures") or []) + (r.get("resumes") or [])]
    # A resume: from `syncswitch resume` starting to every worker training again (the downtime before is ours).
    resumes = [m["training_again_s"] - m["t"] for r in failed for m in (r.get("resumes") or [])]
    goodput = lambda rs: [r["goodput"]["useful_samples_per_s"] for r in rs  # noqa: E731
                          if r.get("goodput") and r["goodput"].get("useful_samples_per_s")]
    return {
        "failed_runs": len(failed), "failed_runs_completed": sum(r.get("status") == "completed" for r in failed),
        "unfailed_runs": len(clean), "unfailed_completed": sum(r.get("status") == "completed" for r in clean),
        "kills_sent": sum(bool(r.get("kill_sent")) for r in failed),
        "recovery_s": common.spread(recoveries), "recovery_over_init": common.spread(against_init),
        "resume_s": common.spread(resumes), "detection_s": common.spread([r.get("detection_s") for r in failed]),
        "samples_lost": common.spread(lost),
        "unfailed_accuracy": common.spread(acc),
        "failed_accuracy": common.spread([r.get("final_accuracy") for r in failed]),
        "accuracy_gap_vs_unfailed_median": None if base is None else common.spread(
            [r["final_accuracy"] - base for r in failed if r.get("final_accuracy") is not None]),
        "goodput_failed": common.spread(goodput(failed)), "goodput_unfailed": common.spread(goodput(clean)),
        "runs_with_leftovers": sum(bool(r.get("leftovers")) for r in results),
        "by_scenario": {s: sum(r["scenario"] == s and r.get("status") == "completed" for r in failed)
                        for s in {r["scenario"] for r in failed}},
    }


if __name__ == "__main__":
    from bench import parts

    sys.exit(parts.main_of(__spec__.name))
