"""results.md's figures of scale in the simulator (`python -m bench scale`): 2 to 64 workers, at a fixed global
batch and with the workload fixed in epochs."""

from __future__ import annotations

from bench.docs_figure import Figure

def scale_render(docs: list[dict]) -> list[str]:
    from bench.scale import mode_text

    lines = []
    for doc in docs:
        for name, job in doc["jobs"].items():
            reference = job.get("bsp_reference")
            pooled = (f"; BSP's reference is the median of its runs at every size, {reference:.3f}"
                      if reference is not None else "")
            lines += [f"`{name}`, the cluster grown as {mode_text(doc['args'])}{pooled}:", ""]
            lines += [line for line in job["table"].splitlines() if line.startswith(("|", "guard verdicts"))] + [""]
    return ["Final accuracy in syncswitch's one-process simulator, median [min-max] over seeds (a diverged run "
            "counts 0); the last column is the fewest workers at which the median falls more than 1 point below "
            "BSP's at the same global batch ('-': never in the sizes shown).", ""] + lines[:-1]


GLOBAL_BATCH_NOTE = (
    "Every size trains at global batch 64, the shipped jobs' own at 2 workers (32 a worker): at N workers each "
    "takes 64/N examples a step at the job's rate x (64/N)/32, so BSP is the same training at every size (its "
    "global batch 64 at twice the job's rate, 625 updates on the quickstart) and its row stays level; an "
    "asynchronous protocol makes N times BSP's updates, each of 1/N of its examples and stale by about N - 1 "
    "updates (arrivals `speeds:0.2`, each worker a core of its own). So 'below BSP from' is the size from which the "
    "protocol's staleness costs accuracy against synchronous training that trains. The default switch (`switch`) "
    "goes to lookahead at 2 workers and to local SGD from 3, after the switch rule's decision; the guard judges "
    "those phases, and its line under each table says what it did per size. At 32 and 64 workers only BSP and the "
    "default switch were run (the guard's verdicts there are the point; a worker's step is 1-2 examples). Seeds: "
    "five a cell at every size on both jobs (seeds 0-4). The quickstart's file "
    "also holds its seed 0 at 16 workers, left out of the table (one seed). Runs at 2-16 workers from a copy of the "
    "tree at 30bd4a1 (seeds 3-4 at 2-8 workers, and the quickstart's BSP seeds 3-4 at 32-64, from "
    "2c7d783); at 32-64 workers the quickstart's seed 0 at 32 from 51902f4, the rest from 178629d-33e6228 "
    "(a round's first steps in one TensorFlow call: the same bits, tested; 64 simulated workers of the quickstart "
    "now take 52-131 s a run, host_s in the files), each in the benches' child process at one TensorFlow thread. "
    "BSP's reference pools its runs at every size, near-copies of one training per seed.")


FIGURES = (
    Figure("scale-global", "Scale in the simulator at a fixed global batch: 2 to 64 workers",
           ("scale-global-batch-quickstart-2026-11-26.json", "scale-global-batch-digits-cnn-2026-11-26.json"),
           "python -m bench scale --jobs J --global-batch 64 --workers W --variants V --seeds K --first-seed S "
           "[--budget-s 445] --add-to F (J: quickstart, digits_cnn; W: 2,4,8 with every variant, 32,64 with "
           "switch,bsp; one call under /work/bin/heavy per job and group of seeds, sizes and variants, each under 8 "
           "minutes, each --add-to the last call's file); tables by python -m bench scale --table-from F --workers "
           "2,4,8,32,64",
           scale_render, commit="33e6228",
           note=GLOBAL_BATCH_NOTE),
    Figure("scale", "Scale in the simulator: 2 to 64 workers",
           ("scale-quickstart-2026-11-26.json", "scale-digits-cnn-2026-11-26.json"),
           ("python -m bench scale --jobs quickstart --workers 2,8,32,64 --seeds 5 (in calls of under 8 minutes, "
            "each with --add-to the previous call's runs)",
            "python -m bench scale --jobs digits_cnn --workers 2,8,32,64 --seeds 5 (its 2 complete seeds kept), then "
            "--seeds 3 --first-seed 2 --add-to F"),
           scale_render, commit="63981ef",
           note=("Quickstart: five seeds a cell at this simulator (b-fasgd fetches as the worker's next step gets a "
                 "core; the `switch` variant with the loss switch rule of 325c508; the other variants' seeds 0-1 "
                 "recorded earlier the same day, no rule of theirs changed since). Digits CNN: 5 "
                 "seeds a cell, seeds 0-1 at this simulator, seeds 2-4 at 097c98b (no simulator change between). "
                 "Each run in the benches' child process at one TensorFlow thread, arrivals `speeds:0.2` (each "
                 "worker a core of its own). With the workload fixed in epochs BSP itself falls toward chance from "
                 "8-32 workers (the linearly scaled rate, and too few updates), so 'below BSP' says little there; "
                 "from 32 workers the switch rule keeps the default switch synchronous, so the guard judges BSP "
                 "alone. 64 simulated workers took 1.7-29 s a run (quickstart) and 2.1-17 s (digits CNN's seeds 2-4; "
                 "host_s in the file). The table above, at a fixed global batch, is the one that says where a "
                 "protocol falls behind synchronous training that still trains.")),
)
