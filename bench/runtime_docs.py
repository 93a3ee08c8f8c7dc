"""results.md's figures of what the runtime costs and how it recovers: killed nodes and managers (`python -m bench
chaos`), the framework against a hand-written PS loop, switch, start-up and hook costs, the switch overhead at the
current code, and the ray backend against the local one."""

from __future__ import annotations

from bench.docs_figure import Figure
from bench.docs_format import spread_text, table, x

# -- recovery, overheads ------------------------------------------------------------------------------------------

def chaos_render(docs: list[dict]) -> list[str]:
    a = docs[0]["aggregate"]
    rows = [["runs completed", f"{a['failed_runs_completed']}/{a['failed_runs']} with a kill, "
                               f"{a['unfailed_completed']}/{a['unfailed_runs']} without"],
            ["detection (kill to noticed), s", spread_text(a["detection_s"], 2)],
            ["recovery (noticed to every worker training), s", spread_text(a["recovery_s"], 1)],
            ["samples lost (checkpoint every 2000)", spread_text(a["samples_lost"], 0)],
            ["final accuracy, killed runs minus the unfailed median",
             spread_text(a["accuracy_gap_vs_unfailed_median"])],
            ["processes left after a run", str(a["runs_with_leftovers"])]]
    return table(["measure", "median [min, max]"], rows)


def chaos_headline(docs: list[dict]) -> tuple[str, str]:
    r = docs[0]["aggregate"]["recovery_s"]
    return ("Recovery from a killed node (quickstart, 4 workers)", f"{r['median']:.1f} s median over {r['n']} kills")


def overhead_render(docs: list[dict]) -> list[str]:
    rows = [[job.split("@")[0], r["training_time"], r["bsp_throughput"], r["asp_throughput"], r["submit_to_first_step"]]
            for job, r in docs[0]["median_ratios"].items()]
    return ["syncswitch / a hand-written `tf.compat.v1` PS loop on the same job, schedule and PS layout (one PS "
            f"task, 4 workers), {docs[0]['repeats']} interleaved pairs; medians of the paired ratios.", ""] + \
        table(["job", "training time", "BSP throughput", "ASP throughput", "submit to first step"],
              [[r[0]] + [x(v) for v in r[1:]] for r in rows])


CHAOS_NOTE = (
    "On fc-v595 at 16484ff (2026-11-28). The table before it (21c9c2a, 2026-11-26, fc-v769): recovery 5.7 s "
    "[3.7, 7.9], samples lost 704 [0, 1920], killed runs' accuracy -0.021 "
    "[-0.090, 0.044] against the unfailed median, 18/18 and 6/6 completed, no process left; a resumed manager "
    "8.9 s against 5.9 s now. Recovery relaunches the lost node's task, which rebuilds and warms its graph: the "
    "start-up cuts since (bench/notebook/2026-11-28-coordinator-14.md) shorten it too.")

RUNTIME_NOTE = (
    "Table: fc-v595 at 16484ff (2026-11-28). The table before it (7faa3bc, 2026-11-27, on fc-v657): in place "
    "0.14/0.20/0.42 s and relaunch 2.94/6.76/12.37 s at 2/4/8 workers, submit to first step 9.9 s, hooks 0.952. "
    "Side by side on fc-v595, 16484ff against 7faa3bc (`syncswitch submit jobs/quickstart.yaml --set seed=S`, seeds "
    "1-6, order alternating, one quiet call; bench/notebook/2026-11-28-coordinator-15.md section 5): submit to first "
    "step 4.9 s against 5.4 s (median of the paired ratios 0.91), training 2.8 s against 3.1 s, the same final "
    "accuracy seed by seed. "
    "Against 2026-11-21 (5322d17: in place 0.06/0.14/0.23 s, relaunch 1.75/3.16/7.29 s at 2/4/8 workers, submit to "
    "first step 8.7 s): a node's graph now holds BSP by all-reduce and local SGD on a worker-side replica, each "
    "warmed up before training so that an in-place switch pays no registration; a relaunch builds and warms its "
    "protocol's graph again, and start-up pays it once. Against 255d372 (2026-11-25, before the all-reduce "
    "engines; bench/notebook/2026-11-27-coordinator-8.md section 5 and -9 section 1): in place and relaunch within "
    "noise; start-up 1.18x in the notebook's interleaved rounds (10.1 s against 8.5 s median to median; 1.44x "
    "before a fallback rung outside the schedule stopped being warmed up and BSP's parameter-server path stopped "
    "being built where no phase takes it); the quickstart's own schedule (BSP then local SGD, 4 workers) 1.34x, "
    "and 0.98x since its switch target, which the rules may never enter, stopped being warmed up before training "
    "(11.35 s against 11.63 s, median of three interleaved rounds; 2 workers, BSP then lookahead: 1.09x; "
    "bench/notebook/2026-11-27-coordinator-10.md); on fc-v595 at 94a1fd4 (the rate decay built as a gather, not a "
    "case of conds) 1.10x (5.85 s against 5.31 s, five interleaved rounds; main before it 1.18x in the same rounds; "
    "bench/notebook/2026-11-28-coordinator-13.md section 3). "
    "The switch-overhead job pins its switch (`switch_rule: fixed`) since 7faa3bc: the loss rule had kept 2 of 3 "
    "in-place runs at 2 workers on BSP.")


def runtime_render(docs: list[dict]) -> list[str]:
    """One suite file (`--only switch_overhead,init_time,hook_overhead`)."""
    full = docs[0]["results"]
    hook = full["hook_overhead"]
    sizes = full["switch_overhead"]["sizes"]
    rows = [[f"in-place switch, {n} workers, s", spread_text(full["switch_overhead"][str(n)]["in_place_s"], 2)]
            for n in sizes]
    rows += [[f"relaunch switch, {n} workers, s", spread_text(full["switch_overhead"][str(n)]["relaunch_s"], 2)]
             for n in sizes]
    init = full["init_time"]
    rows.append([f"submit to first step, {init['workers']} workers, s",
                 f"{init['init_time_s']:.1f} [{init['min']:.1f}, {init['max']:.1f}]"])
    rows.append(["training loop with hooks / plain `session.run`",
                 f"{hook['hook_overhead_ratio']:.3f} [{hook['ratio_min']:.3f}, {hook['ratio_max']:.3f}]"])
    return table(["measure", "median [min, max]"], rows)


def core_overhead_render(docs: list[dict]) -> list[str]:
    doc = docs[0]
    rows = [[label, spread_text(doc[key]["in_place_s"], 2), spread_text(doc[key]["relaunch_s"], 2)]
            for key, label in (("main", "before the run's refactor into collaborators"), ("branch", "now"))]
    return ["BSP then `lookahead` on 4 local workers (digits MLP), the two trees interleaved, 2 rounds.", ""] + \
        table(["code", "in-place switch s", "relaunch switch s"], rows)


def ray_render(docs: list[dict]) -> list[str]:
    compare, recovery, fanout = (docs + [None])[:3]  # the fan-out file where there is one
    rows = [[name, spread_text(compare["final_accuracy"][name]),
             spread_text(compare["submit_to_first_step_s"][name], 1),
             spread_text(compare["switch_overhead_s"][name], 2)]
            + ([spread_text({k: 1000 * v for k, v in fanout[name]["parallel"].items() if k != "n"}, 2)]
               if fanout else []) for name in ("local", "ray")]
    fan = f", fan-out {x(fanout['ratio_ray_over_local']['parallel'])}" if fanout else ""
    return table(["backend", "final accuracy", "submit to first step s", "switch overhead s"]
                 + ([f"Status to {fanout['agents']} agents ms"] if fanout else []), rows) + [
        "", f"Ray over local: first step {x(compare['ratios_ray_over_local']['submit_to_first_step_s'])} "
            f"({compare['first_step_gap_s']:+.1f} s on the medians), switch overhead "
            f"{x(compare['ratios_ray_over_local']['switch_overhead_s'])}{fan}.",
        "", f"A node lost at {recovery['at'] * 100:.0f}% of the workload (checkpoint every "
            f"{recovery['checkpoint_every'] * 100:.0f}%; Ray's health check every "
            f"{recovery['ray_health_check_period_ms'] / 1000:g} s, a silent node declared dead after 5). "
            "Noticed after: from the node's last event to the manager's notice; training again after: from that "
            "notice to every worker training again; and the share of the workload trained twice:",
        ""] + table(["what was lost", "runs completed", "noticed after s", "training again after s",
                     "workload trained twice"],
                    [[kill["what"], f"{kill['completed']}/{len(kill['runs'])}",
                      spread_text(kill["detected_after_s"], 1), spread_text(kill["recovered_after_s"], 1),
                      spread_text(kill["lost_fraction"], 4)] for kill in recovery["kills"].values()])


FIGURES = (
    Figure("recovery", "Fault tolerance: killed nodes and managers",
           ("chaos-quickstart-4workers-2026-11-28.json", "chaos-quickstart-4workers-2026-11-26.json"),
           ("python -m bench chaos --runs 18 --unfailed 6 --scenarios worker-bsp,ps-asp,worker-asp,agent,switch,"
            "manager --set cluster.workers=4 (one quiet call; the table's)",
            "python -m bench chaos --runs 18 --unfailed 6 --scenarios worker-bsp,ps-asp,worker-asp,agent,switch,"
            "manager --set cluster.workers=4 (at 21c9c2a, on fc-v769: the note's figures)"),
           chaos_render, headline=chaos_headline, note=CHAOS_NOTE),
    Figure("overhead", "Framework overhead: syncswitch against a hand-written PS loop",
           ("framework-overhead-ps1-4workers-2026-11-28.json",
            "framework-overhead-ps1-4workers-onecall-2026-11-23.json"),
           ("python -m bench framework-overhead --full --layouts 1 --repeats 3 (one quiet call; the table's)",
            "python -m bench framework-overhead --full --layouts 1 --repeats 3 (at b9ac715: the note's figures)"),
           overhead_render,
           commit="58429da",
           note="The bare loop's BSP is SyncReplicasOptimizer on its parameter server, syncswitch's is its default, "
                "BSP by all-reduce on worker replicas: the BSP column is that engine against the PS path users "
                "of the v1 runtime write (MultiWorkerMirroredStrategy is the peers figure's). Both sides switch to "
                "ASP at 0.25 (syncswitch with its switch and speed rules off, which would keep the quickstart "
                "synchronous). On fc-v595. At b9ac715 (2026-11-23), with syncswitch's BSP on the PS as well, it ran "
                "at 0.85x and 1.05x the bare loop's BSP throughput (the second file)."),
    Figure("runtime", "Runtime costs: switch, start-up, hooks",
           ("runtime-2026-11-28.json", "runtime-2026-11-27.json"),
           ("python -m bench suite --only switch_overhead,init_time,hook_overhead (one quiet call; the table's)",
            "python -m bench suite --only switch_overhead,init_time,hook_overhead (nothing else running; at 7faa3bc "
            "on fc-v657: the note's figures)"),
           runtime_render, note=RUNTIME_NOTE),
    Figure("core-overhead", "Switch overhead at the current code",
           ("core-switch-overhead-2026-11-25.json",),
           "python -m bench switch-overhead --repeats 1 --sizes 4 (per tree, interleaved, nothing else running)",
           core_overhead_render, commit="6605dd6", note="Two rounds: a check that the refactor cost nothing."),
    Figure("ray", "The ray backend against the local one (quickstart, 3 nodes, 5 seeds)",
           ("ray-compare-2026-11-26.json", "ray-recovery-2026-11-26.json", "ray-fanout-2026-11-26.json"),
           ("python -m bench ray-backend compare --seeds 5 (nothing else running)",
            "python -m bench ray-backend recovery --runs 2 --first-seed 1, then --runs 3 --first-seed 3 --add-to "
            "the first's file (nothing else running)",
            "python -m bench ray-backend fanout --agents 8 --repeats 20 (nothing else running)"),
           ray_render,
           note="Measured 2026-11-26 with the fork server for co-located nodes; recovery at commit 616a308, after the "
                "fix that makes a lost Ray node's agent and task die with it."),
)
