"""Markdown tables of a suite result (`python -m bench.report RESULT.json` prints them): one renderer per part."""

from __future__ import annotations

import json
import sys


def _num(value, digits: int = 2) -> str:
    if value is None:
        return "–"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _spread(stats, digits: int = 2, scale: float = 1.0) -> str:
    if not isinstance(stats, dict) or stats.get("median") is None:
        return "–"
    m, lo, hi = (stats.get(k) for k in ("median", "min", "max"))
    if stats.get("n", 1) <= 1 or lo is None:
        return _num(m * scale, digits)
    return f"{_num(m * scale, digits)} [{_num(lo * scale, digits)}–{_num(hi * scale, digits)}]"


def _x(value) -> str:
    return "–" if value is None else f"{value:.2f}x"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]


def _problem(part) -> str | None:
    if not isinstance(part, dict):
        return "not run"
    if "error" in part:
        return f"**error**: {part['error']}"
    if "unavailable" in part:
        return f"unavailable: {part['unavailable']}"
    return None


def _variants(part: dict, names, extra=None) -> list[str]:
    header = ["variant", "total time s", "final acc", "converged acc", "TTA s", "reached"]
    header += [extra[0]] if extra else []
    rows = []
    for name in names:
        v = part.get(name)
        if not isinstance(v, dict) or "unavailable" in v:
            why = str((v or {}).get("unavailable", "not run"))
            rows.append([name, "unavailable: " + why] + [""] * (len(header) - 2))
            continue
        row = [name, _spread(v["total_time_s"], 1), _spread(v["final_accuracy"], 3),
               _spread(v["converged_accuracy"], 3),
               _spread(v["tta_s"], 1), v["tta_s"].get("reached", "")]
        if extra:
            row.append(_x(v.get(extra[1])))
        rows.append(row)
    errors = [f"{name}: {e}" for name in names if isinstance(part.get(name), dict)
              for e in part[name].get("errors", [])]
    return _table(header, rows) + ([""] + _errors(errors)[:1] if errors else [])


def tta_section(title: str, part) -> list[str]:
    lines = [f"### {title}", ""]
    problem = _problem(part)
    if problem:
        return lines + [problem, ""]
    budget = f", {part['cpus_per_node']} CPU per node" if part.get("cpus_per_node") else ""
    lines += [f"`{part['job']}`, {part['workers']} workers{budget}, {part['repeats']} repeat(s); switch at "
              f"{part['switch_at']:g} ({part['switch_source']}); TTA target {_num(part['target_accuracy'], 3)} "
              f"({part['target_source']}). Median [min–max].", ""]
    lines += _variants(part, ("bsp", "asp", "switch"))
    note = f" ({part['speedup_vs_asp_note']})" if part.get("speedup_vs_asp_note") else ""
    lines += ["", f"TTA speedup of the switched run: **{_x(part.get('speedup_vs_bsp'))} vs BSP**, "
                  f"**{_x(part.get('speedup_vs_asp'))} vs ASP**{note}; total-time speedup "
                  f"{_x(part.get('time_speedup_vs_bsp'))} vs BSP, {_x(part.get('time_speedup_vs_asp'))} vs ASP.", ""]
    return lines


def stragglers_section(part) -> list[str]:
    lines = ["### Stragglers (BSP, then the switch target)", ""]
    problem = _problem(part)
    if problem:
        return lines + [problem, ""]
    budget = (f", {part['cpus_per_node']} CPU per node, stragglers by {part.get('method')}"
              if part.get("cpus_per_node") else "")
    lines += [f"`{part['job']}`, scenario {part['scenario']}, {part['workers']} workers{budget}, "
              f"{part['repeats']} repeat(s), switch at {part['switch_at']:g}; TTA target "
              f"{_num(part['target_accuracy'], 3)} ({part['target_source']}).", ""]
    names = [k for k in ("none", "greedy", "elastic") if k in part]
    return lines + _variants(part, names, ("TTA speedup vs none", "speedup_vs_none")) + [""]


def switch_section(part) -> list[str]:
    lines = ["### Switch overhead (s)", ""]
    problem = _problem(part)
    if problem:
        return lines + [problem, ""]
    rows = [[n, _spread(part[str(n)]["in_place_s"]), _spread(part[str(n)]["relaunch_s"]),
             ", ".join("–" if c is None else str(c) for c in part[str(n)].get("relaunch_cold_spares", []))]
            for n in part["sizes"] if str(n) in part]
    errors = [f"{n} workers {mode}: {e}" for n in part["sizes"] if str(n) in part
              for mode in ("in_place", "relaunch") for e in part[str(n)].get(f"{mode}_errors", [])]
    return lines + [f"{part['note']}; {part['repeats']} repeat(s), workload (samples) {part['workload_samples']}.",
                    ""] + \
        _table(["workers", "in-place", "relaunch", "relaunch cold spares per run"], rows) + [""] + _errors(errors)


def _errors(errors) -> list[str]:
    return [f"Failed runs ({len(errors)}): " + "; ".join(str(e) for e in errors[:5]), ""] if errors else []


def fanout_section(part) -> list[str]:
    lines = ["### Actuator fan-out (Status RPC)", ""]
    problem = _problem(part)
    if problem:
        return lines + [problem, ""]
    rows = [[n, _spread(part[str(n)]["parallel_s"], 1, 1000), _spread(part[str(n)]["sequential_s"], 1, 1000),
             _x(part[str(n)].get("parallel_speedup")), _num(1000 * part[str(n)]["parallel_cold_s"], 1)]
            for n in part["sizes"] if str(n) in part]
    lines += _table(["agents", "parallel ms", "sequential ms", "parallel speedup", "first (connect) ms"], rows)
    growth = part.get("growth")
    if growth:
        lines += ["", f"Growth {growth['sizes']}: parallel {_x(growth['parallel'])}, sequential "
                      f"{_x(growth['sequential'])} (linear {growth['linear']:g}x); {part['repeats']} repeats."]
    return lines + [""]


def scalar_section(title: str, part, keys) -> list[str]:
    lines = [f"### {title}", ""]
    problem = _problem(part)
    if problem:
        return lines + [problem, ""]
    rows = [[k, _num(part[k], 3) if not isinstance(part[k], (list, dict)) else json.dumps(part[k])]
            for k in keys(part)]
    return lines + _table(["key", "value"], rows) + [""]


def memory_section(part) -> list[str]:
    lines = ["### Peak resident memory (MiB)", ""]
    problem = _problem(part)
    if problem:
        return lines + [problem, ""]
    rows = [[role, _num(v["max_mib"], 0), _num(v["median_mib"], 0), v["processes"]]
            for role, v in part["by_role"].items()]
    lines += [f"`{part['job']}` {part['variant']}, {part['workers']} workers, sampled every {part['interval_s']} s "
              f"({part['samples']} samples){'; ' + part['source'] if part.get('source') else ''}.", ""]
    lines += _table(["role", "max", "median of process peaks", "processes"], rows)
    if part.get("node_max_mib") is not None:
        lines += ["", "Peak of one node (agent + its task processes at one instant): "
                      f"{_num(part['node_max_mib'], 0)} MiB."]
    return lines + [""]


def _repairs(variant: dict) -> str:
    """How many runs the guard repaired, and how: "2/5 (1, 1)"; results from before fall-backs have no split."""
    acted = f"{variant['rolled_back_runs']}/{len(variant['statuses'])}"
    repairs = variant.get("repairs")
    return f"{acted} ({repairs['rollback']}, {repairs['fall back']})" if repairs else acted


def safety_section(part) -> list[str]:
    lines = ["### Accuracy-safe switching (guard off / on)", ""]
    problem = _problem(part)
    if problem:
        return lines + [problem, ""]
    for label, w in part["workloads"].items():
        lines += [f"`{w['job']}`, {w['workers']} workers, switch at {w['switch_at']:g}, {part['seeds']} seeds:", ""]
        rows = []
        for name in part["variants"]:
            v = w[name]
            acc, t = v["final_accuracy"], v["total_time_s"]
            rows.append([name, f"{_num(acc['median'], 3)} [{_num(acc['min'], 3)}, {_num(acc['max'], 3)}]",
                         f"{_num(t['median'], 1)} [{_num(t['min'], 1)}, {_num(t['max'], 1)}]",
                         _repairs(v), ", ".join(sorted(set(v["statuses"])))])
        lines += _table(["variant", "final accuracy median [min, max]", "total time s median [min, max]",
                         "guard acted (rolled back, fell back)", "statuses"], rows)
        targets = w.get("targets", {})
        for name in ("in-place+guard", "relaunch+guard"):
            t = targets.get(name, {})
            lines += ["", f"{name}: median within 1 pt of BSP: {t.get('median_within_1pt')}; worst within 3 pt of "
                          f"BSP's worst: {t.get('worst_within_3pt')}; time / BSP when the guard was quiet: "
                          f"{_num(t.get('time_vs_bsp_when_quiet'))}, worst when it acted: "
                          f"{_num(t.get('time_vs_bsp_when_rolled_back_worst'))}."]
        lines += ["", "Guard off, switches that lost more than 3 points: in place "
                      f"{targets.get('in-place_lost_more_than_3pt')}, "
                  f"by relaunch {targets.get('relaunch_lost_more_than_3pt')}.", ""]
    return lines


def _protocols(part) -> list[str]:
    from bench.protocols import markdown

    return markdown(part)


# part name -> its section; a part without one is shown as its top-level numbers
RENDERERS = {
    "tta": lambda part: tta_section(f"Time to accuracy: `{part.get('job', '?')}`", part),
    "stragglers": stragglers_section,
    "safety": safety_section,
    "switch-overhead": switch_section,
    "hook-overhead": lambda part: scalar_section("Hook overhead (throughput with hooks / without)", part,
                                                 lambda p: [k for k in p if k not in ("part_wall_s", "part")]),
    "init-time": lambda part: scalar_section("Init time (submit to first step)", part,
                                             lambda p: [k for k in ("init_time_s", "min", "max", "runs", "workers")
                                                        if k in p]),
    "fanout": fanout_section,
    "memory": memory_section,
    "protocols": _protocols,
    "framework-overhead": lambda part: overhead_section(part),
}


def _generic(label: str, part) -> list[str]:
    keys = lambda p: [k for k, v in p.items() if not isinstance(v, (dict, list))]  # noqa: E731
    return scalar_section(label, part, keys)


def render(doc: dict) -> str:
    m = doc.get("machine", {})
    lines = ["## syncswitch benchmarks", "",
             f"{m.get('date')} · {m.get('cpu_count')} CPUs · Python {m.get('python')} · TensorFlow "
             f"{m.get('tensorflow')} · commit `{m.get('git_commit')}` · `{m.get('command')}` · "
             f"{_num(doc.get('wall_s'), 0)} s", ""]
    if doc.get("interrupted"):
        lines += ["**Interrupted**: the parts below are those that finished.", ""]
    parts = doc.get("results", {})
    for label, part in parts.items():
        name = part.get("part", label) if isinstance(part, dict) else label
        renderer = RENDERERS.get(name)
        lines += renderer(part) if renderer and not _problem(part) else _generic(label, part) if not _problem(part) \
            else [f"### {label}", "", _problem(part), ""]
    failed = [k for k, v in parts.items() if isinstance(v, dict) and "error" in v]
    if failed:
        lines += [f"Failed parts: {', '.join(failed)}.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as fh:
        print(render(json.load(fh)))


def overhead_section(part: dict) -> list[str]:
    """syncswitch / bare PS loop, per job and PS layout (medians of paired, interleaved runs)."""
    lines = ["### Framework overhead (syncswitch / hand-written PS loop, same job, workers, schedule, PS layout)", ""]
    if "error" in part:
        return lines + [f"Failed: {part['error']}", ""]
    lines += [("| job | PS tasks | pairs | training time | BSP throughput | ASP throughput | submit to first step "
               "| accuracy bare / syncswitch |"), "|---|---|---|---|---|---|---|---|"]
    for c in part.get("comparisons", []):
        r, m = c["ratios"], c["medians"]
        acc = f"{_num(m['bare']['final_accuracy'], 3)} / {_num(m['syncswitch']['final_accuracy'], 3)}"
        lines.append(f"| {c['job']} {' '.join(c['overrides'])} | {c['parameter_servers']} | {c['repeats']} | "
                     + " | ".join(f"{_num(r[k]['median'], 2)}x" for k in ("training_time", "bsp_throughput",
                                                                           "asp_throughput", "submit_to_first_step"))
                     + f" | {acc} |")
    return lines + [""]
