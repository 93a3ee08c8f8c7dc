"""results.md's figure of `python -m bench guard-corpus`: the guard's false alarms and verdicts on recorded runs."""

from __future__ import annotations

from bench.docs_format import table

GUARD_CORPUS_NOTE = (
    "Every run is a real local run of the job as shipped (`syncswitch submit`, seeds 1-5, the ResNet's 1-8), "
    "replayed through the guard at its defaults, its scores fed where their checkpoints were written. The guard "
    "caught each switch into ASP that collapsed (the quickstart on 4 workers, switched at 0.25 with the switch rule "
    "fixed and the speed rule off: 29-44 points below BSP) at 0.35-0.36, and none of the 70 pretended switches of the "
    "six other jobs drew a false alarm. The ResNet's own BSP runs drew 10 in 16, between 0.31 and 0.46: at its high "
    "rate before the decay at 0.5 its evaluations swing under BSP (seed 1: 0.67, 0.56, 0.28, 0.65), and the rule "
    "reads two evaluations 5 points below the best as a degradation. A switched ResNet run that falls back there "
    "(2 of 5 in float32 at 50 Mbit/s, the compression figure) loses the switch's speed, not accuracy. Before this "
    "figure the replay tool fed such runs' scores in their recorded order, after training and newest first, in which "
    "no verdict could fire. Tried on the same runs, not made defaults: `accuracy_drop` 0.1 leaves 4 false alarms "
    "and 0.15 two, each catching the collapses by 0.4; a `window` of 0.1 leaves two but catches them only at "
    "0.4-0.65; a prototype drop of twice the scatter of BSP's evaluations before the switch leaves two, catches "
    "each collapse where the default does, and keeps both real switched ResNet runs' fall-backs (local SGD dipped "
    "further than BSP's noise). This corpus holds no switch that lost a few points, where a wider margin would "
    "cost: none of these is shown safe to ship. bench/notebook/2026-11-29-coordinator-22.md.")


def _points(below: float | None) -> str:
    return "–" if below is None else f"{below:g}"


def _verdict(v: dict | None) -> str:
    return "–" if not v else f"{v['reason']} at {v['fraction']:.2f}"


def guard_corpus_render(docs: list[dict]) -> list[str]:
    """Per job and cluster: the false alarms among the pretended switches; then each unguarded switched run."""
    doc = docs[-1]
    cells = doc["table"]
    rows = []
    for name, cell in cells.items():
        if not cell["pretended"]:
            continue
        where = ", ".join(f"seed {a['seed']} at {a['switch_at']:g}: {a['fraction']:.2f}" for a in cell["false_alarms"])
        rows.append([f"`{name}`", str(cell["pretended"]), str(len(cell["false_alarms"])), where or "–"])
    lines = [f"BSP runs replayed as though switched at {', '.join(f'{x:g}' for x in doc['switch_at'])}: "
             "any verdict is a false alarm.", "",
             *table(["job-workers", "pretended switches", "false alarms", "where (verdict's fraction)"], rows), ""]
    switched = [[f"`{name}`", str(run["seed"]), _points(run["points_below_bsp"]), _verdict(run["verdict"])]
                for name, cell in cells.items() for run in cell["switched"]]
    if switched:
        lines += ["Switched runs with their guard off, replayed as they ran: points below the same seed's BSP, and "
                  "the verdict the guard would have given.", "",
                  *table(["job-workers", "seed", "points below BSP", "verdict"], switched)]
    return lines
