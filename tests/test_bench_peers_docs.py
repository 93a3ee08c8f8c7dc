"""The peers figure: which cells a reader sees in full, which as a row, and what the README claims from them."""

from bench import docs as pages
from bench import peers_docs as docs
from bench.docs_figure import Figure


def _stat(median):
    return {"median": median, "min": median, "max": median, "n": 5, "runs": [median] * 5}


def _cell(job="jobs/resnet_synthetic.yaml", variants=("mwms", "bsp", "default"), seeds=5, kernel="fc-v657",
          commit="a" * 40, tta=1.0, throughput=1.0, accuracy=0.93):
    table = {}
    for v in variants:
        table[v] = {"final_accuracy": _stat(accuracy), "train_time_s": _stat(10.0), "time_to_accuracy_s": _stat(8.0),
                    "examples_per_s": _stat(500.0), "throughput_vs_mwms": 1.0 if v == "mwms" else throughput,
                    "tta_vs_mwms": 1.0 if v == "mwms" else tta}
    return {"job": job, "workers": 4, "cpus_per_node": None, "target_accuracy": 0.9, "seeds": list(range(seeds)),
            "table": table, "machine": {"platform": f"Linux-6.18.44-{kernel}-x86_64", "git_commit": commit}}


def test_a_peers_cell_names_its_host():
    doc = {"job": "jobs/resnet_synthetic.yaml", "cpus_per_node": None,
           "machine": {"platform": "Linux-6.18.44-fc-v657-x86_64-with-glibc2.36", "cpu_model": "AMD EPYC"}}
    assert docs.peers_cell(doc).endswith("host AMD EPYC, Linux-6.18.44-fc-v657")
    doc["machine"]["cpu_count"] = 2  # this project's machine: its cores go without saying
    assert docs.peers_cell(doc).endswith("host AMD EPYC, Linux-6.18.44-fc-v657")
    doc["machine"]["cpu_count"] = 16  # a lent machine's cell says how many cores it had
    assert docs.peers_cell(doc).endswith("host AMD EPYC (16 CPUs), Linux-6.18.44-fc-v657")
    del doc["machine"]["cpu_model"]  # files written before the processor was recorded
    assert docs.peers_cell(doc).endswith("host Linux-6.18.44-fc-v657")


def test_a_peers_cell_names_its_allocator():
    doc = {"job": "jobs/resnet_synthetic.yaml", "cpus_per_node": None, "machine": {"platform": "Linux-6.1-x86_64"}}
    assert ", glibc malloc, host" in docs.peers_cell(doc)  # files before --allocator ran on the system's
    doc["allocator"] = {"name": "tcmalloc", "library": "/usr/lib/libtcmalloc_minimal.so.4"}
    assert ", tcmalloc, host" in docs.peers_cell(doc)


def test_the_headline_compares_against_tcmalloc_where_a_host_has_both():
    def cell(job, allocator=None, kernel="fc-v657"):
        doc = {"job": job, "cpus_per_node": None, "machine": {"platform": f"Linux-6.18.44-{kernel}-x86_64"}}
        return dict(doc, allocator={"name": allocator}) if allocator else doc

    glibc, tuned = cell("jobs/resnet_synthetic.yaml"), cell("jobs/resnet_synthetic.yaml", "tcmalloc")
    other_host, other_job = cell("jobs/resnet_synthetic.yaml", kernel="fc-v769"), cell("jobs/mnist1d_cnn.yaml")
    assert docs.peers_strongest([glibc, tuned, other_host, other_job]) == [tuned, other_host, other_job]
    assert docs.peers_strongest([glibc]) == [glibc]


def test_a_diagnostic_cell_without_the_default_switch_stays_out_of_the_headline():
    seeds = [1, 2, 3, 4, 5]
    full = {"job": "j", "seeds": seeds, "table": dict.fromkeys(["mwms", "bsp", "default", "no-sync"], {})}
    diagnostic = {"job": "j", "seeds": seeds, "table": dict.fromkeys(["mwms", "tf-no-sync", "bsp", "no-sync"], {})}
    assert docs.headline_cells([full, diagnostic]) == [full]


def test_a_cell_of_fewer_than_five_seeds_stays_out_of_the_headline():
    def cell(seeds, kernel):
        return {"job": "j", "seeds": seeds, "table": dict.fromkeys(["mwms", "bsp", "default"], {}),
                "machine": {"platform": f"Linux-6.18.44-{kernel}-x86_64"}}

    five, three = cell([1, 2, 3, 4, 5], "fc-v657"), cell([1, 2, 3], "fc-v657-gpu")
    assert docs.headline_cells([five, three]) == [five]


def test_the_headline_takes_the_latest_cell_of_a_job_budget_host_and_malloc():
    def cell(job, cpus=None):
        return {"job": job, "cpus_per_node": cpus, "seeds": [1, 2, 3, 4, 5],
                "table": dict.fromkeys(["mwms", "bsp", "default"], {})}

    resnet = "jobs/resnet_synthetic.yaml"
    old, other, new, budgeted = cell(resnet), cell("jobs/mnist1d_cnn.yaml"), cell(resnet), cell(resnet, 0.4)
    assert docs.headline_cells([old, other, budgeted, new]) == [other, budgeted, new]


def test_a_later_cell_of_the_same_key_is_shown_in_full_and_the_earlier_as_one_row():
    old = _cell(commit="1" * 40, throughput=0.88)
    diagnostic = _cell(variants=("mwms", "tf-no-sync", "bsp", "no-sync"), commit="2" * 40, throughput=0.9)
    new = _cell(commit="3" * 40, throughput=0.97)
    few = _cell(job="jobs/mnist1d_cnn.yaml", seeds=1, kernel="fc-v657-gpu", commit="4" * 40)
    lines = docs.peers_render([old, diagnostic, new, few], ["old.json", "diag.json", "new.json", "few.json"])
    text = "\n".join(lines)
    full = [line for line in lines if line.startswith("### ")]
    assert len(full) == 2 and "1 seed," in full[1]  # the latest answering cell of each key, any number of seeds
    assert "At `3333333`." in text and "At `1111111`." not in text
    rows = [line for line in lines if line.startswith("| `old` ") or line.startswith("| `diag` ")]
    assert len(rows) == 2
    assert "`bsp` 0.88x" in rows[0] and "`1111111`" in rows[0]
    assert "`tf-no-sync`" in rows[1] and rows[1].endswith("| – | – |")  # no default switch: no TTA, no accuracy


def test_the_headline_gives_each_jobs_range_over_hosts_and_budgets():
    cells = [_cell(tta=1.08, throughput=0.97), _cell(kernel="fc-v769", tta=1.13, throughput=0.85),
             _cell(job="jobs/mnist1d_cnn.yaml", tta=0.6, throughput=1.56, accuracy=0.961),
             _cell(job="jobs/mnist1d_cnn.yaml", seeds=1, kernel="fc-v657-gpu", tta=2.0, throughput=0.1)]
    claim, value = docs.peers_headline(cells)
    assert "resnet (2 cells, 2 hosts): 1.08-1.13x / 0.85-0.97x" in value
    assert "mnist1d: 0.60x / 1.56x;" in value  # the one-seed cell is left out; one cell is not counted aloud
    assert "range over each job's cells" in claim and "one cell where none is named" in claim
    # A cell where no run reached the target says so rather than give a ratio.
    _, value = docs.peers_headline([_cell(tta=None, throughput=1.27)])
    assert value.startswith("resnet: target not reached / 1.27x")


def test_the_readme_row_names_the_newest_file_and_its_commit():
    figure = Figure("f", "t", ("x-2026-11-26.json", "y-2026-11-28.json", "z-2026-11-27.json"), "c",
                    lambda d: [])
    found = [{"machine": {"git_commit": c * 40}} for c in "123"]
    assert pages.newest(figure, found) == 1
    assert pages.commits_text(figure, found).endswith("(the newest file's `2222222`)")
    assert pages.commits_text(figure, found[:1]) == "at commit `1111111`"


def test_a_cell_on_a_limited_loopback_says_so_shows_its_bytes_and_stays_out_of_the_headline():
    plain = _cell()
    limited = dict(_cell(), loopback_mbit=50.0,
                   runs=[{"variant": v, "seed": s, "loopback_bytes": b * 1e6} for v, b in (("mwms", 200), ("bsp", 190),
                                                                                          ("default", 110))
                         for s in range(5)])
    assert docs.answering_cells([plain, limited]) == [plain, limited]  # two cells: the network differs
    assert docs.headline_cells([plain, limited]) == [plain]
    lines = docs.peers_render([limited], ["limited.json"])
    title = next(line for line in lines if line.startswith("### "))
    assert ", loopback limited to 50 Mbit/s, host" in title
    header = next(line for line in lines if line.startswith("| variant"))
    assert header.endswith("| MB through lo |")
    assert next(line for line in lines if line.startswith("| `default`")).endswith("| 110 [110, 110] |")
    plain_lines = docs.peers_render([plain], ["plain.json"])
    assert "MB through lo" not in "\n".join(plain_lines) and "loopback" not in "\n".join(plain_lines)
