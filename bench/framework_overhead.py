"""What the framework costs: syncswitch against the hand-written PS loop of bench/bare_loop.py, side by side.

Same job, workers, schedule (BSP to 25%, then ASP) and PS layout; runs interleaved (the order alternates per
repeat) so both see the same machine. Reports syncswitch/bare for training time, per-phase throughput and
submit-to-first-step, the accuracy of both, and the CPU seconds each process role used.
"""

from __future__ import annotations

import os
import sys

from bench import common

MNIST1D = os.path.join(common.ROOT, "jobs", "mnist1d_cnn.yaml")
# (job, spec overrides) per mode; quick mode shortens the workloads only
QUICK_JOBS = ((common.QUICKSTART, ["workload.epochs=2"]), (MNIST1D, ["workload.epochs=3"]))
FULL_JOBS = ((common.QUICKSTART, []), (MNIST1D, []))
SWITCH_AT = 0.25
# The bare loop has no accuracy guard: syncswitch runs without it too, so both train the same schedule (a guard
# rollback re-trains part of the workload, a policy decision rather than framework cost). The bare loop switches
# to plain ASP: so does syncswitch here, whatever the default switch target.
# The bare loop switches to ASP at SWITCH_AT: syncswitch's side must too, so the switch rule and the speed rule,
# which may time the switch later or keep a short job synchronous (the quickstart stays on BSP at their defaults),
# are off.
SYNCSWITCH_OVERRIDES = ["policy.guard.enabled=false", "policy.switch_to=asp", "policy.switch_rule=fixed",
                        "policy.switch_speed=false"]


class CpuSampler(common.ProcessSampler):
    """CPU seconds (user + system) per process role among this process's descendants, sampled from a thread."""

    def __init__(self, interval_s: float = 0.5):
        super().__init__(interval_s, "cpu-sampler")
        self.start = sum(self.me.cpu_times()[:2])
        self.last: dict[int, tuple[str, float]] = {}

    def sample(self) -> None:
        for proc in self.me.children(recursive=True):
            try:
                cmdline, name = proc.cmdline(), proc.name()
                cpu = sum(proc.cpu_times()[:2])
            except self.psutil.Error:
                continue
            role = common.role_of(cmdline, name)
            if role == "other" and proc.pid in self.last:
                role = self.last[proc.pid][0]  # an exiting process's command line reads empty
            self.last[proc.pid] = (role, cpu)

    def report(self) -> dict:
        out = {"manager": round(sum(self.me.cpu_times()[:2]) - self.start, 1)}
        for role, cpu in self.last.values():
            out[role] = round(out.get(role, 0.0) + cpu, 1)
        return out


def phase_rates(summary: dict) -> dict:
    rates = {}
    for phase in summary.get("schedule") or []:
        rates.setdefault(phase["protocol"], phase.get("examples_per_s"))
    return rates


def startup(summary: dict) -> dict:
    """Submit to first step in three parts: agents answering, every task ready (TF import, graph, session,
    warm-up steps), and the chief's phase entry to the first step."""
    t = {}
    for s in summary.get("states") or []:
        t.setdefault(s["state"], s["t"])
    init = summary.get("init_time_s")
    if not {"launching", "running"} <= t.keys() or init is None:
        return {}
    return {"provision": t["launching"], "launch_to_ready": t["running"] - t["launching"],
            "ready_to_first_step": init - t["running"]}


def run_bare(job, overrides, workers, ps, run_dir) -> dict:
    args = ["-m", "bench.bare_loop", job, "--workers", str(workers), "--ps", str(ps),
            "--switch-at", str(SWITCH_AT)]
    for o in overrides:
        args += ["--set", o]
    with CpuSampler() as cpu:
        out = common.run_json_script(args, timeout_s=1800)
    out["cpu_s"] = cpu.report()
    common.log(f"  bare ps={ps} -> train {out['total_time_s']:.1f} s, start {out['init_time_s']:.1f} s, "
               f"acc {out['final_accuracy']:.3f}, rates {phase_rates(out)}")
    return out


def run_syncswitch(job, overrides, workers, layout, run_dir) -> dict:
    spec = common.load_spec(job, common.with_workers(
        list(overrides) + SYNCSWITCH_OVERRIDES + [f"cluster.parameter_servers={layout}"], workers))
    with CpuSampler() as cpu:
        summary = common.run_summary(spec, f"switch@{SWITCH_AT}", run_dir)
    keep = ("status", "message", "total_time_s", "init_time_s", "final_accuracy", "converged_accuracy",
            "total_samples", "run_dir", "switches")
    out = {k: summary.get(k) for k in keep}
    out["best_accuracy"] = max((e["accuracy"] for e in summary.get("evaluations") or []), default=None)
    out["schedule"] = [{k: p.get(k) for k in ("protocol", "samples", "wall_time_s", "examples_per_s")}
                       for p in summary.get("schedule") or []]
    out["startup_s"] = startup(summary)
    out["cpu_s"] = cpu.report()
    return out


def compare(job, overrides, workers, layout, repeats, root) -> dict:
    """`repeats` interleaved pairs of one job under one PS layout; paired ratios and their medians."""
    ps = workers if layout == "per-node" else int(layout)
    pairs = []
    for r in range(repeats):
        pair = {}
        order = ("bare", "syncswitch") if r % 2 == 0 else ("syncswitch", "bare")
        for who in order:
            run_dir = os.path.join(root, f"{who}-r{r}")
            if who == "bare":
                pair[who] = run_bare(job, overrides, workers, ps, run_dir)
            else:
                pair[who] = run_syncswitch(job, overrides, workers, layout, run_dir)
        s, b = pair["syncswitch"], pair["bare"]
        rs, rb = phase_rates(s), phase_rates(b)
        pair["ratios"] = {"training_time": common.ratio(s.get("total_time_s"), b.get("total_time_s")),
                          "submit_to_first_step": common.ratio(s.get("init_time_s"), b.get("init_time_s")),
                          **{f"{p}_throughput": common.ratio(rs.get(p), rb.get(p)) for p in ("bsp", "asp")}}
        common.log(f"  ratios syncswitch/bare: {pair['ratios']}")
        pairs.append(pair)
    ratios = {k: common.spread([p["ratios"][k] for p in pairs]) for k in pairs[0]["ratios"]}
    med = {who: {k: common.spread([p[who].get(k) for p in pairs])["median"]
                 for k in ("total_time_s", "init_time_s", "final_accuracy")} for who in ("bare", "syncswitch")}
    for who in ("bare", "syncswitch"):
        for proto in ("bsp", "asp"):
            rates = [phase_rates(p[who]).get(proto) for p in pairs]
            med[who][f"{proto}_examples_per_s"] = common.spread(rates)["median"]
    return {"job": os.path.relpath(job, common.ROOT), "overrides": list(overrides), "workers": workers,
            "parameter_servers": layout, "repeats": repeats, "ratios": ratios, "medians": med, "pairs": pairs}


def measure(repeats: int, root: str, workers: int, full: bool, only_job: str | None = None, layouts=None) -> dict:
    jobs = [(j, o) for j, o in (FULL_JOBS if full else QUICK_JOBS) if not only_job or only_job in j]
    # The targets compare the bare loop's layout (one PS task); full mode also reports the paper's per-node one.
    layouts = layouts or (("1", "per-node") if full else ("1",))
    results = []
    for job, overrides in jobs:
        for layout in layouts:
            name = f"{os.path.splitext(os.path.basename(job))[0]}-ps{layout}"
            common.log(f"framework_overhead: {name}, {repeats} interleaved pair(s)")
            part_root = os.path.join(root, name)
            os.makedirs(part_root, exist_ok=True)
            results.append(compare(job, overrides, workers, layout, repeats, part_root))
    summary = {f"{r['job']}@ps={r['parameter_servers']}": {k: v["median"] for k, v in r["ratios"].items()}
               for r in results}
    return {"switch_at": SWITCH_AT, "repeats": repeats, "median_ratios": summary, "comparisons": results}


RESULT_SCHEMA = {
    "switch_at": "the switch point of both sides", "repeats": "interleaved pairs per comparison",
    "median_ratios": "{job@ps=N: {ratio: median}}: syncswitch / bare for training time, BSP and ASP throughput, "
                     "submit to first step",
    "comparisons": "per job and PS layout: the pairs, their ratios and medians",
}


def add_options(parser) -> None:
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--full", action="store_true")
    parser.add_argument("--job", help="Only the job whose path contains this (development).")
    parser.add_argument("--layouts", help="Comma-separated PS layouts, e.g. 1,per-node (development).")


def run_part(args, root) -> dict:
    repeats = args.repeats or (1 if args.quick or not args.full else 3)
    layouts = tuple(args.layouts.split(",")) if args.layouts else None
    return measure(repeats, root, args.workers, args.full, args.job, layouts)


if __name__ == "__main__":
    from bench import parts

    sys.exit(parts.main_of(__spec__.name))
