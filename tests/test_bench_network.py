"""bench network: the links it simulates on, its projection's rows and the figure that shows them."""

from __future__ import annotations

from bench.network import link, project_rows
from bench.network_docs import network_render
from syncswitch.simulator.network import Link, parse_link


def test_the_links_it_simulates_on_are_the_ones_it_names():
    assert parse_link(link(None, 3.1, True)[len("+link:"):], "") == Link(1e6, latency_s=0.0031)
    assert parse_link(link(50.0, 3.1, True)[len("+link:"):], "") == Link(50.0, 0.0031, 256 * 1024, shared=True)
    assert parse_link(link(1000.0, 0.5, False)[len("+link:"):], "") == Link(1000.0, 0.0005)


def _run(variant, seed, time_s, tta, accuracy, schedule=("bsp",), actions=()):
    return {"variant": variant, "seed": seed, "time_s": time_s, "time_to_accuracy_s": tta,
            "final_accuracy": accuracy, "schedule": list(schedule), "guard_actions": list(actions)}


def test_projection_rows_compare_each_variant_with_float32_bsp_on_its_link():
    runs = {(50.0, "bsp"): [_run("bsp", s, 10.0 + s, 6.0 + s, 0.95) for s in range(3)],
            (50.0, "switch"): [_run("switch", 0, 8.0, 4.0, 0.95, ("bsp", "local-sgd")),
                               _run("switch", 1, 9.0, None, 0.93, ("bsp", "local-sgd", "bsp"), ["fall back"]),
                               _run("switch", 2, 10.0, 5.0, 0.94, ("bsp",))]}
    rows = {r["variant"]: r for r in project_rows(runs)}
    assert rows["bsp"]["time_over_bsp"] == 1.0 and rows["bsp"]["tta_over_bsp"] == 1.0
    assert rows["switch"]["time_over_bsp"] == 9.0 / 11.0
    assert rows["switch"]["median_tta_s"] == 5.0  # a miss counts as infinitely late
    assert rows["switch"]["tta_over_bsp"] == 5.0 / 7.0
    assert rows["switch"]["kept_switch"] == 1 and rows["switch"]["guard_acted"] == 1
    lines = network_render([{"mode": "project", "job": "jobs/x.yaml", "seeds": 3, "latency_ms": 3.1, "target": 0.9,
                             "rows": list(rows.values())}])
    assert any("| 50 Mbit/s | `switch` | 0.940 [0.930, 0.950] | 9.0 [8.0, 10.0] | 5.0 | 0.82x | 0.71x | 1/3 | 1/3 |"
               == line for line in lines)


def test_the_validation_table_names_every_rate_and_wire():
    doc = {"mode": "validate", "job": "jobs/r.yaml", "seed": 1, "burst_kb": 256, "latency_ms": 3.11,
           "rows": [{"mbit": None, "wire": "none", "real_s": 10.6, "sim_s": 10.6, "sim_over_real": 1.0},
                    {"mbit": 50.0, "wire": "bf16", "real_s": 16.9, "sim_s": 17.5, "sim_over_real": 17.5 / 16.9}]}
    lines = network_render([doc])
    assert "| unlimited | float32 | 10.6 | 10.6 | 1.00x |" in lines
    assert "| 50 Mbit/s | bf16 | 16.9 | 17.5 | 1.04x |" in lines
    assert "3.11 ms" in lines[0]
