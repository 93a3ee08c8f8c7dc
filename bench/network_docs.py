"""The network figure of docs/results.md: the simulator's link model against real runs, and what it projects.

Its files are `python -m bench network` results: a validation (real runs through the limited loopback beside their
simulations) and projections (simulated variants on per-node links).
"""

from __future__ import annotations

from bench.docs_format import spread_text, table, x


def _rate(mbit) -> str:
    return "unlimited" if mbit is None else f"{mbit:g} Mbit/s"


def validate_render(doc: dict) -> list[str]:
    rows = [[_rate(r["mbit"]), "float32" if r["wire"] == "none" else r["wire"], f"{r['real_s']:.1f}",
             f"{r['sim_s']:.1f}", x(r["sim_over_real"])] for r in doc["rows"]]
    return [f"Simulated against real: `{doc['job']}`, BSP by all-reduce, seed {doc['seed']}, 4 workers on this "
            f"host's 2 cores, every process's traffic through one token bucket on `lo` (burst {doc['burst_kb']} KB). "
            f"The simulations replay the unlimited float32 run's step times on `+link:R:burst={doc['burst_kb']}:"
            f"shared`, a ring message's latency fitted on that one run ({doc['latency_ms']:.2f} ms); every other "
            "row is a prediction.", "",
            *table(["loopback", "all-reduce in", "real training s", "simulated s", "simulated / real"], rows)]


def project_render(doc: dict) -> list[str]:
    rows = [[_rate(r["mbit"]), f"`{r['variant']}`", spread_text(r["final_accuracy"]),
             spread_text(r["time_s"], 1), "–" if r["median_tta_s"] is None else f"{r['median_tta_s']:.1f}",
             x(r["time_over_bsp"]), x(r["tta_over_bsp"]), f"{r['kept_switch']}/{len(r['runs'])}",
             f"{r['guard_acted']}/{len(r['runs'])}"]
            for r in sorted(doc["rows"], key=lambda r: (-r["mbit"], r["variant"]))]
    return [f"Projected: `{doc['job']}` on 4 simulated workers, each node on a link of its own, {doc['seeds']} "
            f"seeds; compute the validation's replayed step times, latency {doc['latency_ms']:.2f} ms; time to "
            f"{doc['target']:g}. `bsp` moves the bytes MultiWorkerMirroredStrategy's ring moves.", "",
            *table(["link", "variant", "final accuracy", "time s", "time to accuracy s", "time / bsp", "TTA / bsp",
                    "left BSP", "guard acted"], rows)]


def network_render(docs: list[dict]) -> list[str]:
    lines: list[str] = []
    for doc in docs:
        lines += (validate_render(doc) if doc["mode"] == "validate" else project_render(doc)) + [""]
    return lines[:-1]
