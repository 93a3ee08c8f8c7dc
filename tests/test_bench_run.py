"""`python -m bench PART` end to end on a real part: its JSON on stdout and in --out, checked against the part's
schema, with the machine facts that date it."""

import json
import os
import subprocess
import sys

from bench import delay_sim
from tests.conftest import ROOT


def test_a_part_runs_and_writes_its_result(tmp_path):
    out = tmp_path / "delay.json"
    env = dict(os.environ, PYTHONPATH=ROOT)
    # staleness alone, in one process: a real (short) training of the quickstart's model, no cluster
    proc = subprocess.run([sys.executable, "-m", "bench", "delay-sim", "--job", "jobs/quickstart.yaml", "--seeds", "1",
                           "--delays", "fixed:1", "--rules", "none", "--set", "workload={samples: 640}",
                           "--out", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(out.read_text())
    assert set(delay_sim.RESULT_SCHEMA) <= set(result) and "error" not in result
    (row,) = result["runs"]
    assert row["delay"] == "fixed:1" and 0.0 <= row["accuracy"] <= 1.0 and row["mean_delay"] > 0
    assert result["machine"]["command"].startswith("python -m bench delay-sim --job jobs/quickstart.yaml")
    assert result["machine"]["git_commit"] and result["machine"]["date"]
    assert json.loads(proc.stdout) == result
    # its runs went beside --out, never into the repository root
    assert (tmp_path / "runs").is_dir()


def test_a_bad_option_is_a_usage_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "bench", "tta", "--repeat", "x"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
