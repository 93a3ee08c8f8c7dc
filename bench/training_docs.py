"""results.md's figures of training on a local cluster as shipped: time to accuracy (`python -m bench tta`), the
protocols side by side (`bench protocols`) and the straggler policies (`bench stragglers`), with their README lines."""

from __future__ import annotations

from bench import common
from bench.docs_figure import Figure
from bench.docs_format import spread_text, table, x

# -- time to accuracy ---------------------------------------------------------------------------------------------

def tta_render(docs: list[dict]) -> list[str]:
    doc = docs[0]
    rows = [[name, str(doc[name]["final_accuracy"]["n"]), spread_text(doc[name]["final_accuracy"]),
             spread_text(doc[name]["total_time_s"], 1), spread_text(doc[name]["tta_s"], 1),
             doc[name]["tta_s"]["reached"]] for name in ("bsp", "asp", "switch")]
    against_asp = (f"{x(doc['speedup_vs_asp'])} ASP's" if doc["speedup_vs_asp"] is not None
                   else "ASP's median run never reached the target")
    return [f"`{doc['job']}`, {doc['workers']} workers, switch at {doc['switch_at']:g}, target accuracy "
            f"{doc['target_accuracy']:.3f} ({doc['target_source']}; a run that never reaches it counts as "
            f"infinitely late). Time to accuracy of the switched run: {x(doc['speedup_vs_bsp'])} BSP's speed, "
            f"{against_asp}; total training time {x(doc['time_speedup_vs_bsp'])} BSP's speed.", ""] + \
        table(["variant", "seeds", "final accuracy", "total time s", "time to accuracy s", "reached target"], rows)


def tta_headline(docs: list[dict]) -> tuple[str, str]:
    doc = docs[0]
    sw, bsp, speedup = doc["switch"], doc["bsp"], doc["speedup_vs_bsp"]
    if not any(sw.get("switches") or []):  # no run left BSP: the two are the same training, a ratio is noise
        verdict = "no run switched (BSP's own training)"
    elif speedup is None:  # the switched runs' median never reached the target (counted infinitely late)
        verdict = "slower"
    else:
        verdict = f"{x(speedup)} faster" if speedup >= 1 else f"slower, {x(speedup)} BSP's speed"

    def seconds(v):
        return "never" if v is None else f"{v:.1f} s"

    return (f"The switched run's time to accuracy against BSP (quickstart, {doc['workers']} workers)",
            f"{verdict}: median {seconds(sw['tta_s']['median'])} vs {seconds(bsp['tta_s']['median'])}, "
            f"{sw['tta_s']['reached']} and {bsp['tta_s']['reached']} runs reached {doc['target_accuracy']:.3f}; "
            f"accuracy {sw['final_accuracy']['median']:.3f} vs {bsp['final_accuracy']['median']:.3f}")


# -- protocols ----------------------------------------------------------------------------------------------------

def protocols_render(docs: list[dict]) -> list[str]:
    variants = docs[0]["jobs"]["quickstart"]["variants"]
    bsp, bsp_speed = variants["bsp"]["final_accuracy"]["median"], variants["bsp"]["examples_per_s"]["median"]
    asp_speed = variants["asp"]["examples_per_s"]["median"]
    rows = [[f"`{_variant(name)}`", v["completed"], spread_text(v["final_accuracy"]),
             f"{(v['final_accuracy']['median'] - bsp) * 100:+.1f}",
             x(common.ratio(v["examples_per_s"]["median"], bsp_speed)),
             x(common.ratio(v["examples_per_s"]["median"], asp_speed))]
            for name, v in variants.items()]
    return ["`switch@0.25:local-sgd` is BSP for the first quarter, then `local-sgd`: the default switch on more "
            "than 2 workers. Throughput is the whole run's (its switch included).", ""] + \
        table(["variant", "runs", "final accuracy", "points vs BSP", "throughput vs BSP", "throughput vs ASP"], rows)


def protocols_headline(docs: list[dict]) -> tuple[str, str]:
    v = {_variant(name): doc for name, doc in docs[0]["jobs"]["quickstart"]["variants"].items()}
    switched, bsp, asp = v["switch@0.25:local-sgd"], v["bsp"], v["asp"]
    speed = switched["examples_per_s"]["median"]
    return ("BSP then local SGD against BSP and ASP (quickstart, 4 workers)",
            f"{switched['final_accuracy']['median']:.3f} vs BSP's {bsp['final_accuracy']['median']:.3f}, at "
            f"{x(common.ratio(speed, bsp['examples_per_s']['median']))} BSP's and "
            f"{x(common.ratio(speed, asp['examples_per_s']['median']))} ASP's throughput "
            f"({switched['completed']} runs)")


def _variant(name: str) -> str:
    """A variant as `syncswitch experiment` names it (files from before name a second phase `bsp>X`)."""
    return f"switch@0.25:{name[4:]}" if name.startswith("bsp>") else name


# -- stragglers ---------------------------------------------------------------------------------------------------

def stragglers_render(docs: list[dict]) -> list[str]:
    part = docs[0]["results"]["stragglers"]
    rows = [[name, spread_text(part[name]["final_accuracy"]), spread_text(part[name]["tta_s"], 1),
             part[name]["tta_s"]["reached"], x(part[name].get("speedup_vs_none")),
             spread_text(part[name]["total_time_s"], 1)] for name in ("none", "greedy", "elastic")]
    return [f"`{part['job']}`, {part['workers']} workers at {part['cpus_per_node']} CPU each (the PS node 0.3 more), "
            f"scenario {part['scenario']} (CPU stragglers), {part['repeats']} runs per policy, target "
            f"{part['target_accuracy']:.3f}.", ""] + \
        table(["policy", "final accuracy", "time to accuracy s", "reached", "TTA speedup vs none", "total time s"],
              rows)


def stragglers_headline(docs: list[dict]) -> tuple[str, str]:
    part = docs[0]["results"]["stragglers"]
    return ("Elastic straggler policy against none (MNIST-1D, 4 budgeted workers, moderate stragglers)",
            f"{x(part['elastic'].get('speedup_vs_none'))} time to accuracy, {part['repeats']} runs each")


FIGURES = (
    Figure("tta", "Time to accuracy: the quickstart as shipped",
           ("tta-quickstart-2workers-2026-11-26.json",),
           "python -m bench tta --workers 2 --repeats 5", tta_render, headline=tta_headline,
           note="Under /work/bin/quiet, from a clone of 7017876. No switched run left BSP: on this 5-s job the "
                "speed rule found that a trial of `lookahead` that went back would cost more than a switch could "
                "win, so the default ran BSP's path in place and ended with each seed's BSP accuracy to the last "
                "digit; its time against BSP's is the machine's noise on the same training."),
    Figure("protocols", "Protocols on 4 workers: accuracy and throughput",
           ("protocols-quickstart-10seeds-4workers-2026-11-26.json",),
           "python -m bench protocols --job jobs/quickstart.yaml --workers 4 --repeats 10 --first-seed 10 --set "
           "policy.guard.enabled=false --variants 'bsp,asp,local-sgd,switch@0.25:local-sgd'",
           protocols_render, headline=protocols_headline,
           note="Guard off (each protocol as it is)."),
    Figure("stragglers", "Stragglers: policies under CPU stragglers",
           ("stragglers-mnist1d-cpu040-ps030-4workers-lookahead-2026-11-25.json",),
           "python -m bench stragglers --job jobs/mnist1d_cnn.yaml --repeats 3 --set cluster.cpus_per_node=0.4 "
           "--set cluster.cpus_per_ps=0.3", stragglers_render, headline=stragglers_headline,
           note="Needs root (each node in its own CPU cgroup)."),
)
