"""The peers figure of docs/results.md and its README headline: syncswitch against what TensorFlow users run.

A cell is one result file of `python -m bench peers`: one job, CPU budget, host and malloc, its variants interleaved
seed by seed. The page shows each cell that answers the user's question (MultiWorkerMirroredStrategy, syncswitch's
BSP and its default switch side by side) in full, the latest of its job, budget, host and malloc; every other cell
(earlier code's, and diagnostic cells that only say where a gap lies) is one row of its ratios to MWMS. How each
cell was reached is in the lab notebook.
"""

from __future__ import annotations

import os

from bench import common
from bench.docs_format import recorded_commit, spread_text, table, x
from bench.peers import allocator_of

ANSWER = frozenset({"mwms", "bsp", "default"})  # the variants that answer "as good as MWMS, and sooner?"
HEADLINE_SEEDS = 5  # a claim's bar (docs/results.md's rule): a cell of fewer seeds is shown, never headlined

PEER_NAMES = {"single": "one process alone", "mwms": "TensorFlow's MultiWorkerMirroredStrategy",
              "ps-strategy": "TensorFlow's ParameterServerStrategy with a ClusterCoordinator (asynchronous)",
              "bsp": "syncswitch BSP by all-reduce", "asp": "syncswitch ASP",
              "bsp-prefetch": "syncswitch BSP by all-reduce with one batch read ahead at the end of each worker's "
                              "input (30a9ec4; `bsp` in the same cell is the tree before it)",
              "switched": "the default with its speed rule off (the switch taken at the switch rule's point, without "
                          "weighing a trial first)",
              "default": "syncswitch's default switch (BSP by all-reduce until the switch rule's point, 0.25 at the "
                         "earliest, then `local-sgd` averaging by all-reduce every 2 steps)",
              "no-sync": "syncswitch's workers on their own copies, averaged once at the end (no communication: the "
                         "nodes' ceiling for any protocol; its accuracy is not a result)",
              "tf-no-sync": "the one-process TF2 loop in one process per node, each on its shard of the data (MWMS's "
                            "workers without the all-reduce; each trains its own model: no accuracy)"}


def peers_kernel(doc: dict) -> str:
    """The kernel of the host a cell ran on, as the platform names it (`Linux-6.18.44-fc-v657`)."""
    return doc.get("machine", {}).get("platform", "?").split("-x86_64")[0]


def peers_host(doc: dict) -> str:
    """The host a cell ran on: the same two frameworks rank differently on two of this project's hosts, and a
    cell measured on a lent machine with more cores says how many."""
    machine = doc.get("machine", {})
    model, cpus = machine.get("cpu_model"), machine.get("cpu_count")
    model = f"{model} ({cpus} CPUs)" if model and cpus and cpus != 2 else model
    return f"{model}, {peers_kernel(doc)}" if model else peers_kernel(doc)


def peers_setting(doc: dict) -> str:
    """What a cell ran: the job, the CPU budget, the malloc."""
    budget = f"{doc['cpus_per_node']} CPU per node" if doc.get("cpus_per_node") else "no CPU budget"
    malloc = "tcmalloc" if allocator_of(doc) == "tcmalloc" else "glibc malloc"
    network = f", loopback limited to {doc['loopback_mbit']:g} Mbit/s" if doc.get("loopback_mbit") else ""
    job = os.path.relpath(doc["job"], common.ROOT) if os.path.isabs(doc["job"]) else os.path.normpath(doc["job"])
    return f"`{job}`, {budget}, {malloc}{network}"  # as given from the repository root (bench/workloads/ too)


def peers_cell(doc: dict) -> str:
    return f"{peers_setting(doc)}, host {peers_host(doc)}"


def cell_key(doc: dict) -> tuple:
    return doc["job"], doc.get("cpus_per_node"), peers_kernel(doc), allocator_of(doc), doc.get("loopback_mbit")


def answering_cells(docs: list[dict]) -> list[dict]:
    """The latest (last listed) cell of each job, budget, host and malloc that runs MWMS, syncswitch's BSP and its
    default switch side by side, in the order listed; any number of seeds."""
    latest = {cell_key(doc): doc for doc in docs if ANSWER <= set(doc["table"])}
    kept = {id(doc) for doc in latest.values()}
    return [doc for doc in docs if id(doc) in kept]


def headline_cells(docs: list[dict]) -> list[dict]:
    """The answering cells the README may claim from: at least HEADLINE_SEEDS seeds. A diagnostic cell (`tf-no-sync`
    against `no-sync`), a cell of fewer seeds (a lent machine's few minutes) and earlier code's cells stay in
    results.md only."""
    return answering_cells([doc for doc in docs if len(doc["seeds"]) >= HEADLINE_SEEDS
                            and not doc.get("loopback_mbit")])  # an emulated network is results.md's alone


def peers_strongest(docs: list[dict]) -> list[dict]:
    """The cells against the strongest MWMS measured: a glibc cell gives way to a tcmalloc cell of the same job,
    budget and host (MWMS ran 2.3x faster on tcmalloc on fc-v657); results.md keeps both."""
    def key(doc):
        return doc["job"], doc.get("cpus_per_node"), peers_kernel(doc)

    tuned = {key(doc) for doc in docs if allocator_of(doc) == "tcmalloc"}
    return [doc for doc in docs if allocator_of(doc) == "tcmalloc" or key(doc) not in tuned]


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("s" if n != 1 else "")


def _launch_to_exit(doc: dict, variant: str) -> dict:
    """A variant's seconds from its launch to its last process's exit (every run records it): what the user waits
    for, start-up, the peers' evaluations (their training clock stops for them) and syncswitch's scoring included."""
    return common.spread([r.get("wall_s") for r in doc.get("runs", []) if r["variant"] == variant])


def _full_table(doc: dict) -> list[str]:
    rows = [[f"`{name}`", spread_text(v["final_accuracy"]), spread_text(v["train_time_s"], 1),
             spread_text(v["time_to_accuracy_s"], 1), spread_text(v["examples_per_s"], 0),
             x(v.get("train_time_vs_single")), x(v.get("train_time_vs_mwms")), x(v.get("tta_vs_mwms")),
             x(v.get("throughput_vs_mwms")), spread_text(_launch_to_exit(doc, name), 1)]
            for name, v in doc["table"].items()]
    header = ["variant", "final accuracy", "training time s", "time to accuracy s", "examples/s",
              "time / one process's", "time / MWMS's", "TTA / MWMS's", "throughput / MWMS's", "launch to exit s"]
    if doc.get("loopback_mbit"):  # what each variant moved over the emulated network, start-up included
        header.append("MB through lo")
        for row, name in zip(rows, doc["table"]):
            row.append(spread_text(common.spread([r["loopback_bytes"] / 1e6 for r in doc["runs"]
                                                  if r["variant"] == name and "loopback_bytes" in r]), 0))
    title = f"### {peers_cell(doc)}: {_count(len(doc['seeds']), 'seed')}, time to {doc['target_accuracy']}"
    return [title, "", f"At {_commit(doc)}.", "",
            *table(header, rows), ""]


def _commit(doc: dict) -> str:
    return f"`{recorded_commit(doc) or '?'}`"


def _other_row(name: str, doc: dict) -> list[str]:
    t = doc["table"]
    speeds = ", ".join(f"`{v}` {x(t[v].get('throughput_vs_mwms'))}" for v in t if v != "mwms")
    default = t.get("default", {})
    accuracy = (f"{spread_text(default['final_accuracy'])} / {spread_text(t['mwms']['final_accuracy'])}"
                if default and "mwms" in t else "–")
    return [f"`{name}`", peers_setting(doc), peers_kernel(doc).split("-", 2)[-1], _commit(doc),
            str(len(doc["seeds"])), speeds, x(default.get("tta_vs_mwms")), accuracy]


def peer_name(variant: str) -> str:
    """What a variant is; `base+fp16` / `base+bf16`: the base's all-reduce compressed (hyperparameters.compression)."""
    base, plus, wire = variant.partition("+")
    if not plus:
        return PEER_NAMES.get(variant, variant)
    return f"{PEER_NAMES.get(base, base)}, its all-reduce sent in {wire} (`hyperparameters.compression: {wire}`)"


def _variants_line(docs: list[dict]) -> str:
    """What the cells ran: the workers, the interleaving, the target, each variant named once."""
    seen = dict.fromkeys(v for doc in docs for v in doc["table"])
    return (f"{docs[0]['workers']} workers, variants interleaved within each seed; time to accuracy is the first "
            "evaluation at the cell's target. Variants: " + "; ".join(f"`{v}` {peer_name(v)}" for v in seen))


def peers_render(docs: list[dict], names: list[str]) -> list[str]:
    """Each answering cell in full, then one row per other cell (`names`: the files, in the docs' order)."""
    lines = [_variants_line(docs) +
             f". syncswitch's BSP ran by all-reduce ({docs[0].get('bsp_allreduce', 'asked for (allreduce: true)')}).",
             "", "The latest cell of each job, CPU budget, host and malloc, commit as named in its file:", ""]
    answering = answering_cells(docs)
    for doc in answering:
        lines += _full_table(doc)
    shown = {id(doc) for doc in answering}
    others = [(name, doc) for name, doc in zip(names, docs) if id(doc) not in shown]
    if others:
        lines += ["Earlier cells (code since changed) and diagnostic cells (variants that say where a gap lies), "
                  "medians; the notebook tells what each measured:", ""]
        lines += table(["file (bench/results/)", "cell", "host", "commit", "seeds", "throughput / MWMS's",
                        "default's TTA / MWMS's", "default's accuracy / MWMS's"],
                       [_other_row(name[:-len(".json")], doc) for name, doc in others])
        lines.append("")
    return lines[:-1]


def _range(values: list[float | None]) -> str:
    values = [v for v in values if v is not None]  # None: a cell where no run reached its time-to-accuracy target
    if not values:
        return "target not reached"
    lo, hi = min(values), max(values)
    return f"{lo:.2f}x" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}-{hi:.2f}x"


def job_name(doc: dict) -> str:
    """A cell's job as the headline names it: the file's stem, the shipped jobs' without their model's suffix."""
    stem = os.path.splitext(os.path.basename(doc["job"]))[0]
    return {"mnist1d_cnn": "mnist1d", "resnet_synthetic": "resnet"}.get(stem, stem)


def peers_headline(docs: list[dict]) -> tuple[str, str]:
    """Per job, the range over every headline cell (each against the strongest MWMS of its host) of the default
    switch's time to accuracy and BSP's throughput, the missed cells included: the comparison a TensorFlow user
    makes, on every host measured."""
    docs = peers_strongest(headline_cells(docs))
    jobs: dict[str, list[dict]] = {}
    for doc in docs:
        jobs.setdefault(job_name(doc), []).append(doc)
    parts = []
    for job, cells in jobs.items():
        hosts = len({peers_kernel(doc) for doc in cells})
        tta = _range([doc["table"]["default"]["tta_vs_mwms"] for doc in cells])
        bsp = _range([doc["table"]["bsp"]["throughput_vs_mwms"] for doc in cells])
        where = f" ({_count(len(cells), 'cell')}, {_count(hosts, 'host')})" if len(cells) > 1 else ""  # one: said once
        parts.append(f"{job}{where}: {tta} / {bsp}")
    gaps = [doc["table"]["mwms"]["final_accuracy"]["median"] - doc["table"]["default"]["final_accuracy"]["median"]
            for doc in docs]
    cells = "; ".join(parts)
    return ("syncswitch against MultiWorkerMirroredStrategy, 4 workers: the default switch's time to accuracy / "
            "BSP's throughput, as ratios to MWMS's (range over each job's cells: hosts, CPU budgets, 5 seeds each; "
            "one cell where none is named)",
            cells + ("; the default's accuracy at or above MWMS's in every cell" if max(gaps) <= 0 else
                     f"; the default's accuracy within {max(gaps) * 100:.1f} points of MWMS's"))


PEERS_NOTE = (
    "Every variant of every cell, peers and syncswitch alike, trains on the quickstart's rate schedule (x0.1 at half "
    "the workload, x0.01 at three quarters) in place of the job's own: the ResNet's own is that one, the residual "
    "MLP's differs (x0.1 at 0.6, x0.01 at 0.85), and the other jobs below have none. "
    "How the peers run: MWMS and one process alone are TensorFlow 2 custom loops (`strategy.run` in a `tf.function`) "
    "written as a TensorFlow user writes them, without syncswitch imports (bench/peer_scripts/), stepping with "
    "`tf.compat.v1.train.MomentumOptimizer`, the update rule syncswitch applies (Keras' SGD carries the old rate's "
    "velocity past each rate drop: 0.03-0.08 accuracy on the ResNet's 93-update job); every process of a budgeted "
    "cell, peers too, runs in its own cgroup of that budget. How time is counted: the peers evaluate 10 times and "
    "stop their clock while they do (and start it after their first step); syncswitch's training time runs from its "
    "first step to its last without a stop (a synchronous run's checkpoints are scored after its last step, a "
    "switched run's guarded phase live: docs/evaluation.md). Launch to exit is the whole wait, from the first "
    "process's launch to the last one's exit: each peer process's TensorFlow import, tracing and evaluations, "
    "syncswitch's manager, nodes' start-up, scoring and teardown (ecd4914 and b12e69f took about 3 s off a ResNet BSP "
    "run's start-up here, bench/notebook/2026-11-28-coordinator-14.md; of the cells above only the unbudgeted "
    "ones on fc-v595 have them). "
    "Hosts: the same code ranks differently on this project's hosts (kernel builds fc-v769, fc-v657, fc-v595; a lent "
    "16-core Xeon, fc-v657-gpu). On fc-v657 MWMS on glibc's malloc spent half its CPU in the kernel (page faults, "
    "zeroing and unmapping what its steps free and take back) and ran at 0.53-0.67x one process's speed; preloading "
    "tcmalloc (`--allocator tcmalloc`, into every process of every variant) made it 2.3x faster, and a TensorFlow "
    "user can do the same, so the README's line compares each host's cells against the strongest MWMS measured "
    "there (tcmalloc where a host has both). "
    "MNIST-1D: syncswitch's BSP runs above MWMS's throughput in every cell, and the default switches to local SGD "
    "after the switch rule's point and keeps it after its speed trial (a run that finds local SGD not faster goes "
    "back to BSP, rolled back to the trial's start; on fc-v595 four of five kept it). The fc-v595 cells (2026-11-28, "
    "main's code at 1bedbc0) are the latest code measured on a host none of the defaults was tuned on: the same "
    "ranking as on fc-v657, every variant 1.6-2.5x faster in seconds than at e3fe8a6 there. "
    "The ResNet: every default run stays on BSP without a trial (the speed rule finds that a trial that goes back "
    "would cost more than a 1.25x target could win back), so its time to accuracy is BSP's, and the 0.8x bar is out "
    "of reach on these hosts: `no-sync`, the same workers with no communication at all, runs at 1.06-1.19x BSP's "
    "throughput and 0.81-1.00x a tuned MWMS's, so no protocol syncswitch could switch to reaches MWMS's speed by "
    "communicating less. The `tf-no-sync` cell says where the gap lies: MWMS takes 1.09x the time of TensorFlow's "
    "own workers with no all-reduce and syncswitch's BSP 1.09x its `no-sync`'s (the two all-reduces cost the same "
    "share), while syncswitch's `no-sync` takes 1.16x `tf-no-sync`'s: a syncswitch worker's CPU per sample outside "
    "communication (idle pool threads spinning and the OS switching between a node's threads, now stopped where "
    "threads outnumber cores; one batch read ahead at the end of each worker's input, the 16-core `bsp-prefetch` "
    "row). The same diagnostic on fc-v595 at ff458df (five seeds): syncswitch's `no-sync` 1.09x `tf-no-sync`'s time, "
    "MWMS 1.21x, and syncswitch's BSP at 1.01x MWMS's throughput (10.3 s against 10.4 s), where the cell of 1bedbc0 "
    "had it at 0.91x: five seeds of one batch against another on this host differ by about that much. "
    "The big-vocabulary probe (`bench/probes/big_vocab.yaml`, a 50k x 64 embedding mean-pooled into a small head, "
    "written as a user would, not tuned on): BSP's all-reduce applies the embedding's rows and gathers them (it "
    "reduced the dense 12.8 MB table, 5.3x slower, before 5e18d3d); MWMS all-gathers them too; the default stays on "
    "BSP (the speed rule), and one process alone runs 8x MWMS's speed: 4 workers on 2 cores pay per step more than "
    "this model's compute. "
    "The tabular MLP (`bench/workloads/tabular_mlp.yaml`: scikit-learn's make_classification, 8 classes, a 3-layer "
    "MLP with dropout, written as a user would and not tuned on; its peers train the script's own model_fn, built as "
    "a Keras model, as they do for any job they have no model of): syncswitch's BSP at 1.27x MWMS's throughput; the "
    "default stays on BSP in all five runs (the speed rule: a trial that went back would cost 2.0-2.3 s of this "
    "16-second job, more than a 1.25x target could win), so its time is BSP's; `switched` kept local SGD in all five, "
    "at 0.82x BSP's training time and 0.64x MWMS's, 0.4 points above BSP's accuracy (median). One process alone runs "
    "at 2.7x MWMS's speed: as on the big-vocabulary probe, 4 workers on 2 cores pay per step more than a small "
    "model's compute. "
    "The residual MLP (`bench/workloads/residual_mlp.yaml`: make_classification, 10 classes, three residual blocks "
    "with LayerNorm, GELU, dropout and label smoothing, a step decay of the rate; written as a user would, not tuned "
    "on): syncswitch's BSP at 1.11x MWMS's throughput; the default kept local SGD after its trial in all five runs "
    "(three trials read 1.40-1.61x; two read 1.29x, not clearly the 1.1x bar, and were kept because going back would "
    "have cost more than keeping could lose, 2b0a231), in "
    "0.78x MWMS's training time and 0.87x its time to 0.85, 0.1 points below its accuracy (median). Its time to "
    "accuracy gains less than its training time: this job reaches 0.85 only after the rate's first drop (half the "
    "workload here), near its final accuracy (0.86). One process alone runs at 2.3x MWMS's speed, and at 1.2 points "
    "more accuracy (one worker's 64-example batch takes four times the updates). "
    "The plain 1-D CNN (`bench/workloads/plain_cnn1d.yaml`: five plain ReLU convolutions on MNIST-1D, no "
    "normalization, its initialization picked so that BSP is still at 0.4 accuracy at a quarter of the workload): "
    "with the rate's drop at half the workload, where this job is still at 0.8, no run of any variant reached 0.95. "
    "The default kept local SGD in all five (trials 1.08-1.31x, each kept by 2b0a231's rule) and took 0.74x MWMS's "
    "training time at MWMS's accuracy (0.880 against 0.879), but ended 1.2 points below syncswitch's BSP (median; "
    "per seed -1.1 to -6.0): local SGD climbs more slowly per sample on this job, the drop freezes the lag, and the "
    "guard, which judges the phase against its own best, stays quiet on a phase that falls behind without falling. "
    "Without the drop (the job as written: the safety figures) the same switch catches up and ends 0.8 points above "
    "BSP. A failure of the default against BSP, not fixed (bench/notebook/2026-11-29-coordinator-25.md). "
    "On a network that costs time (`--loopback-mbit 50`: every process's traffic through one 50 Mbit/s token "
    "bucket on the loopback, a slower network than its figure, since a switched cluster gives each node its own "
    "link): MWMS and syncswitch's BSP move the same gradient bytes (178 and 190 MB a run, start-up included) at the "
    "same pace; local SGD moves half of BSP's bytes a step since its averages carry the model alone (8d6701e; it "
    "carried the momentum too and ran at 0.95x BSP's throughput there). The default stays on BSP on this 28-second "
    "job (the speed rule: a trial that goes back would cost more than it could win), so `switched` (the speed rule "
    "off) shows what the switch buys: before 92430b5 four of five switched runs fell back to BSP, two on false "
    "`loss stalled` verdicts (the guard judged the phase's first short-window loss reports against the full-window "
    "means before the switch); since, three of five keep local SGD to the end, each in 0.91-0.92x MWMS's training "
    "time at MWMS's accuracy, and two fall back on an accuracy dip local SGD took before the rate's decay. Their time "
    "to accuracy stays near MWMS's (1.05x, median): the ResNet reaches 0.9 after its rate's first drop, 0.7 of the "
    "workload, and a third of that is BSP's before the switch. "
    "How each cell was reached, and every change measured on the way: bench/notebook/ (coordinator and engine "
    "files of 2026-11-26 to 2026-11-28).")


COMPRESSION_NOTE = (
    "`hyperparameters.compression` (docs/protocols.md#all-reduce-compression) sends the all-reduce's buffer as 16-bit "
    "floats; each `+fp16` / `+bf16` variant is its base variant so, in the same cell, seeds interleaved. MWMS has no "
    "such option (tf.distribute's CommunicationOptions set packing, timeouts and the implementation only), so its "
    "row is what a TensorFlow user runs. A cell limited by `--loopback-mbit` puts every process's traffic through "
    "one token bucket on the loopback (bench/loopback.py), as the peers figure's; the others are the hosts' "
    "compute-bound cells, where the bytes cost little time. "
    "The second cell switches (`switched`: the default with its speed rule off) in float32 and in bf16, at 50 "
    "Mbit/s. "
    "Compressed, the switch costs time here: local SGD ran at 0.84-0.93x the compressed BSP phase's throughput in "
    "the four runs that kept it (in float32, 1.15-1.29x), so `switched+bf16` reached 0.9 in 0.78x MWMS's time where "
    "`bsp+bf16` took 0.59x in the first cell. Each run's own profile (summary.json, `measured`): an average took "
    "0.14-0.15 s, BSP's all-reduce 0.11-0.12 s, but local SGD's rounds spent 0.12-0.15 s outside its averages where "
    "BSP's spent 0.06-0.07 s outside its all-reduce (not yet explained). The default's speed rule measures this and "
    "stays on BSP. Two float32 runs and one bf16 run fell back to BSP on the guard's accuracy rule at 0.46. BSP's own "
    "runs of the job, replayed as if switched at 0.32, draw such a verdict in 4 of 8 at the guard of these runs and "
    "in 1 of 8 with `accuracy_noise` (the figure of the guard on recorded runs); these three runs draw theirs with it "
    "too: local SGD dipped further than BSP's scatter.")


def compression_render(docs: list[dict]) -> list[str]:
    """Every compression cell in full: its variants beside their uncompressed bases and MWMS."""
    lines = [_variants_line(docs) + ".", ""]
    for doc in docs:
        lines += _full_table(doc)
    return lines[:-1]


def compression_headline(docs: list[dict]) -> tuple[str, str]:
    """Per cell, the compressed BSP's time to accuracy against MWMS's, its throughput against uncompressed BSP's;
    over every compressed variant, the widest accuracy gap to its uncompressed base."""
    parts, gaps = [], []
    for doc in docs:
        t = doc["table"]
        bases = {v: v.partition("+")[0] for v in t if "+" in v}
        gaps += [t[base]["final_accuracy"]["median"] - t[v]["final_accuracy"]["median"]
                 for v, base in bases.items() if base in t]
        mine = [v for v in t if v.startswith("bsp+")]
        if not mine:  # a cell of compressed switches: its accuracy counts, its times are results.md's
            continue
        network = f", {doc['loopback_mbit']:g} Mbit/s" if doc.get("loopback_mbit") else ""
        tta = _range([t[v]["tta_vs_mwms"] for v in mine if t[v].get("tta_vs_mwms")]) if "mwms" in t else "–"
        speed = _range([t[v]["examples_per_s"]["median"] / t["bsp"]["examples_per_s"]["median"] for v in mine])
        parts.append(f"{job_name(doc)}{network}: {tta} / {speed}")
    worst = max(gaps)
    return ("`hyperparameters.compression` (fp16, bf16; opt-in): compressed BSP's time to accuracy / throughput, as "
            "ratios to MWMS's / to float32 BSP's (4 workers, 5 seeds a cell; no network limit unless named)",
            "; ".join(parts) + (f"; accuracy within {worst * 100:.1f} points of float32's" if worst > 0 else
                                "; accuracy at or above float32's"))
