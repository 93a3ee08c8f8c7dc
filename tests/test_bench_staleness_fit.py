"""The staleness-fit tool: the real side read from a protocols result's per-update records, every model fitted,
bad input a one-line error."""

from __future__ import annotations

import json
import subprocess
import sys

from bench import staleness_fit
from tests.conftest import ROOT


def _result(tmp_path, logged: bool = True, workers: int = 4, name: str = "real.json"):
    runs = []
    for seed in range(2):
        read = list(range(0, 400))
        landed = [r + (r * 7 + seed) % 4 for r in read]  # staleness 0-3
        measured = {"staleness_mean": 1.5, "updates": 400}
        if logged:
            measured["update_log"] = {"read": read, "arrival": read, "landed": landed, "worker": [r % 4 for r in read]}
        runs.append({"seed": seed, "measured": measured})
    doc = {"workers": workers, "jobs": {"quickstart": {"variants": {"asp": {"runs": runs}}}}}
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def test_every_model_is_fitted_against_the_pooled_real_updates(tmp_path):
    out = tmp_path / "fit.json"
    assert staleness_fit.main(["--real", _result(tmp_path), "--stalls", "0.16/1.5", "--seeds", "2",
                               "--out", str(out)]) == 0
    fit = json.loads(out.read_text())["jobs"]["quickstart"]
    assert fit["real"]["updates"] == 800 and fit["updates_per_run"] == 400 and fit["real"]["max"] == 3
    assert [m["stall"] for m in fit["models"]] == [None, "0.16/1.5"]
    assert all(m["updates"] == 800 and m["chi_square"] >= 0 for m in fit["models"])
    assert fit["best"] == min(fit["models"], key=lambda m: m["chi_square"])["stall"]


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "bench", "staleness-fit", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def test_runs_without_the_record_are_a_one_line_error(tmp_path):
    proc = _cli("--real", _result(tmp_path, logged=False))
    assert proc.returncode == 2 and "SYNCSWITCH_UPDATE_LOG=1" in proc.stderr and "Traceback" not in proc.stderr


def test_a_missing_file_and_a_bad_stall_are_one_line_errors(tmp_path):
    proc = _cli("--real", str(tmp_path / "nope.json"))
    assert proc.returncode == 2 and "--real" in proc.stderr and "Traceback" not in proc.stderr
    proc = _cli("--real", _result(tmp_path), "--stalls", "2/1")
    assert proc.returncode == 2 and "stall=P/M" in proc.stderr and "Traceback" not in proc.stderr


def test_one_jobs_results_pool_at_one_worker_count(tmp_path):
    out = tmp_path / "fit.json"
    first, second = _result(tmp_path), _result(tmp_path, name="again.json")
    assert staleness_fit.main(["--real", first, "--real", second, "--stalls", "", "--seeds", "1",
                               "--out", str(out)]) == 0
    assert json.loads(out.read_text())["jobs"]["quickstart"]["real"]["updates"] == 1600
    proc = _cli("--real", first, "--real", _result(tmp_path, workers=2, name="two.json"), "--stalls", "")
    assert proc.returncode == 2 and "one worker count" in proc.stderr and "Traceback" not in proc.stderr
