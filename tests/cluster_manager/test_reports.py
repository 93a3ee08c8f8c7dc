"""`syncswitch report`: variant grouping, statistics, TTA and speedups, outputs and one-line errors."""

import json
import os
import statistics

import pytest
from click.testing import CliRunner

from syncswitch.cli import cli
from syncswitch.cluster_manager import reports
from syncswitch.errors import SpecError


def phase(protocol, start, end, wall):
    return {"protocol": protocol, "start_fraction": start, "end_fraction": end, "wall_time_s": wall,
            "samples": 100, "steps": 10, "examples_per_s": 10.0, "config": {}}


def write_run(root, name, *, switch_at, total, accuracy, evals, status="completed", overhead=None,
              target=None, extra=None, schedule=None):
    """A run folder in the manager's format; evals are (time_s, accuracy) pairs."""
    run = root / name
    run.mkdir(parents=True)
    if schedule is None:
        if switch_at == 1.0:
            schedule = [phase("bsp", 0.0, 1.0, total)]
        elif switch_at == 0.0:
            schedule = [phase("asp", 0.0, 1.0, total)]
        else:
            schedule = [phase("bsp", 0.0, switch_at, 20.0), phase("asp", switch_at, 1.0, total - 20.0 - overhead)]
    switches = [] if overhead is None else [{"from": "bsp", "to": "asp", "at_fraction": switch_at,
                                             "mode": "in-place", "overhead_s": overhead}]
    n = len(evals)
    evaluations = [{"fraction": (i + 1) / n, "time_s": t, "accuracy": a, "loss": 1.0 - a}
                   for i, (t, a) in enumerate(evals)]
    summary = {"job": "t", "status": status, "workers": 2, "schedule": schedule, "switches": switches,
               "switch_at": switch_at, "total_time_s": total, "final_accuracy": accuracy,
               "converged_accuracy": accuracy, "converged": True, "time_to_accuracy_s": None,
               "target_accuracy": target, "evaluations": evaluations, **(extra or {})}
    (run / "summary.json").write_text(json.dumps(summary))
    records = [{"kind": "ready", "source": 0, "t": 0.5}]
    for k in range(10):
        for worker in (0, 1):
            records.append({"kind": "metrics", "t": 1.0 + k, "worker": worker, "protocol": "bsp", "phase": 0,
                            "samples": 10 * k, "fraction": k / 10, "local_steps": k, "step_time_s": 0.1,
                            "examples_per_s": 100.0, "loss": 2.0 - k / 10 + worker / 10})
    records += [{"kind": "evaluation", "event": "evaluation", **e} for e in evaluations]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return run


@pytest.fixture
def experiment(tmp_path):
    """2 BSP, 2 switch@0.25 (+1 failed) and 1 ASP run under one experiment root; no shared target."""
    root = tmp_path / "exp"
    write_run(root, "bsp-r0", switch_at=1.0, total=100.0, accuracy=0.90,
              evals=[(10, 0.5), (50, 0.85), (80, 0.895), (95, 0.902), (100, 0.90)])
    write_run(root, "bsp-r1", switch_at=1.0, total=110.0, accuracy=0.92,
              evals=[(12, 0.5), (60, 0.88), (90, 0.91), (110, 0.92)])
    write_run(root, "switch0.25-r0", switch_at=0.25, total=60.0, accuracy=0.89, overhead=2.0,
              evals=[(5, 0.5), (30, 0.86), (40, 0.905), (60, 0.89)])
    write_run(root, "switch0.25-r1", switch_at=0.25, total=70.0, accuracy=0.895, overhead=3.0,
              evals=[(6, 0.5), (35, 0.87), (50, 0.91), (70, 0.895)])
    write_run(root, "switch0.25-r2", switch_at=0.25, total=None, accuracy=None, status="failed",
              evals=[(4, 0.5)], schedule=[])
    write_run(root, "asp-r0", switch_at=0.0, total=50.0, accuracy=0.80, evals=[(5, 0.4), (50, 0.80)])
    (root / "notes").mkdir()  # a non-run subfolder is ignored
    return root


def test_grouping_statistics_tta_and_speedups(experiment):
    runs = reports.load_runs([str(experiment)])
    assert len(runs) == 6
    target, how = reports.choose_target(runs)
    assert target == pytest.approx((0.90 + 0.92) / 2 - 0.01) and "BSP" in how
    rows = {r.label: r for r in reports.summarize(runs, target)}
    assert list(rows) == ["bsp", "asp", "switch@0.25"]

    bsp, asp, sw = rows["bsp"], rows["asp"], rows["switch@0.25"]
    assert (bsp.completed, len(bsp.runs), sw.completed, len(sw.runs), asp.completed) == (2, 2, 2, 3, 1)
    assert bsp.time_mean == pytest.approx(105.0)
    assert bsp.time_std == pytest.approx((5.0 ** 2 + 5.0 ** 2) ** 0.5)  # sample std, n - 1 = 1
    assert sw.time_mean == pytest.approx(65.0)  # the failed run is excluded
    assert bsp.accuracy_mean == pytest.approx(0.91)
    assert bsp.accuracy_std == pytest.approx(statistics.stdev([0.90, 0.92]))
    assert (sw.accuracy_min, sw.accuracy_max) == (0.89, 0.895)
    assert asp.time_std is None and asp.accuracy_std is None

    # target 0.90: bsp-r0 first reaches it at 95 s, bsp-r1 at 90 s; the switch runs at 40 and 50 s.
    assert bsp.tta_reached == 2 and bsp.tta_mean == pytest.approx((95 + 90) / 2)
    assert sw.tta_reached == 2 and sw.tta_mean == pytest.approx((40 + 50) / 2)
    assert asp.tta_reached == 0 and asp.tta_mean is None
    assert sw.tta_speedup_vs_bsp == pytest.approx(92.5 / 45.0)
    assert sw.tta_speedup_vs_asp is None and bsp.tta_speedup_vs_bsp == pytest.approx(1.0)
    assert sw.time_speedup_vs_bsp == pytest.approx(105.0 / 65.0)
    assert sw.time_speedup_vs_asp == pytest.approx(50.0 / 65.0)
    assert sw.overhead_mean == pytest.approx(2.5) and bsp.overhead_mean is None


def test_explicit_and_shared_targets(tmp_path, experiment):
    runs = reports.load_runs([str(experiment)])
    rows = {r.label: r for r in reports.summarize(runs, 0.85)}
    assert rows["bsp"].tta_mean == pytest.approx((50 + 60) / 2)
    assert rows["switch@0.25"].tta_mean == pytest.approx((30 + 35) / 2)
    assert rows["switch@0.25"].tta_speedup_vs_bsp == pytest.approx(55.0 / 32.5)
    assert reports.choose_target(runs, 0.85) == (0.85, "given explicitly (--target-accuracy)")

    shared = tmp_path / "shared"
    write_run(shared, "a", switch_at=1.0, total=10.0, accuracy=0.7, evals=[(5, 0.6), (10, 0.7)], target=0.65)
    write_run(shared, "b", switch_at=0.0, total=8.0, accuracy=0.7, evals=[(3, 0.66), (8, 0.7)], target=0.65)
    runs = reports.load_runs([str(shared)])
    assert reports.choose_target(runs)[0] == 0.65
    rows = {r.label: r for r in reports.summarize(runs, 0.65)}
    assert rows["bsp"].tta_mean == 10.0 and rows["asp"].tta_speedup_vs_bsp == pytest.approx(10.0 / 3.0)


def test_no_target_means_na(tmp_path):
    write_run(tmp_path, "only-asp", switch_at=0.0, total=8.0, accuracy=0.7, evals=[(8, 0.7)])
    runs = reports.load_runs([str(tmp_path / "only-asp")])
    target, _ = reports.choose_target(runs)
    assert target is None
    table = reports.markdown_table(reports.summarize(runs, target), target)
    assert "| asp | 1/1 | 8.0 ± – | 0.7000 | – | 0.7000–0.7000 | n/a | n/a | n/a |" in table


def test_labels():
    assert reports.variant_label({"switch_at": 1.0}) == "bsp"
    assert reports.variant_label({"switch_at": 0.0, "straggler_policy": "none"}) == "asp"
    assert reports.variant_label({"switch_at": 0.125, "straggler_policy": "greedy"}) == "switch@0.125+greedy"
    assert reports.variant_label({"switch_at": None, "straggler_policy": None,
                                  "schedule": [phase("bsp", 0, 0.2, 1), phase("asp", 0.2, 0.6, 1),
                                               phase("bsp", 0.6, 1, 1)]}) == "bsp->asp->bsp"
    assert reports.variant_label({"switch_at": None, "schedule": [phase("bsp", 0, 0.5, 1),
                                                                  phase("bsp", 0.5, 1, 1)]}) == "bsp"
    assert reports.variant_label({}) == "unknown"


def test_switch_times_and_binned_loss(experiment):
    run = reports.load_run(str(experiment / "switch0.25-r0"))
    assert run.switch_times() == [20.0]  # the wall time of the BSP phase before the switch
    assert len(run.losses) == 20
    curve = reports._binned_loss(run.losses, bins=10)
    assert curve[0] == (pytest.approx(0.05), pytest.approx((2.0 + 2.1) / 2))
    assert len(curve) == 10


def test_write_report_outputs(experiment, tmp_path):
    runs = reports.load_runs([str(experiment)])
    png, md = reports.write_report(runs, str(tmp_path / "out"))
    with open(png, "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(png) > 1000
    text = open(md, encoding="utf-8").read()
    assert "| bsp | 2/2 | 105.0 ± 7.1 | 0.9100 | 0.0141 | 0.9000–0.9200 |" in text
    assert "| switch@0.25 | 2/3 | 65.0 ± 7.1 | 0.8925 | 0.0035 | 0.8900–0.8950 | 45.0 (2/2 reached) |" in text
    assert "| asp | 1/1 | 50.0 ± – | 0.8000 | – | 0.8000–0.8000 | not reached (0/1) |" in text
    assert "minus 0.01" in text
    assert f"- {experiment / 'switch0.25-r2'} (failed, excluded from means)" in text
    assert sorted(os.listdir(tmp_path / "out")) == ["report.md", "report.png"]


def test_cli_report(experiment, tmp_path):
    out = tmp_path / "rep"
    result = CliRunner().invoke(cli, ["report", str(experiment / "bsp-r0"), str(experiment), "--out", str(out),
                                      "--target-accuracy", "0.85"])
    assert result.exit_code == 0, result.output
    assert f"wrote {out / 'report.png'}" in result.output and f"wrote {out / 'report.md'}" in result.output
    assert "| bsp | 2/2 |" in result.output  # bsp-r0 given twice counts once
    assert "55.0 (2/2 reached)" in result.output
    assert "target accuracy: 0.8500" in result.output
    assert "Target accuracy 0.8500: given explicitly" in (out / "report.md").read_text()


def test_cli_default_out_dir(experiment, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["report", str(experiment)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "report" / "report.png").is_file()
    assert "minus 0.01" in (tmp_path / "report" / "report.md").read_text()
    assert "target accuracy: 0.9000 (the runs share no target_accuracy" in result.output


def run_cli_error(args, out):
    result = CliRunner().invoke(cli, ["report", *args, "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1
    assert not out.exists()
    return lines[0]


def test_cli_errors(tmp_path, experiment):
    out = tmp_path / "out"
    missing = tmp_path / "missing"
    assert run_cli_error([str(missing)], out) == f"error: {missing}: no such folder"

    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    assert str(empty) in run_cli_error([str(empty)], out)

    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "metrics.jsonl").write_text("")
    line = run_cli_error([str(experiment), str(partial)], out)
    assert f"{partial}: no summary.json" in line

    corrupt = experiment / "bsp-r1" / "summary.json"
    corrupt.write_text('{"status": "compl')
    assert f"error: {corrupt}: corrupt JSON" in run_cli_error([str(experiment)], out)


def test_metrics_lines(tmp_path):
    run = write_run(tmp_path, "r", switch_at=1.0, total=10.0, accuracy=0.7, evals=[(10, 0.7)])
    with open(run / "metrics.jsonl", "a") as fh:
        fh.write('{"kind": "metr')  # torn last line of a killed run: ignored
    assert len(reports.load_run(str(run)).losses) == 20
    with open(run / "metrics.jsonl", "a") as fh:
        fh.write('\n{"kind": "metrics"}\n')
    with pytest.raises(SpecError, match="metrics.jsonl:23: not a JSON record"):
        reports.load_run(str(run))


def test_failed_plot_leaves_no_file(experiment, tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    def broken_savefig(self, path, **kwargs):
        with open(path, "wb") as fh:
            fh.write(b"\x89PNG half")
        raise RuntimeError("disk full")

    monkeypatch.setattr(Figure, "savefig", broken_savefig)
    out = tmp_path / "out"
    with pytest.raises(RuntimeError):
        reports.write_report(reports.load_runs([str(experiment)]), str(out))
    assert os.listdir(out) == []
