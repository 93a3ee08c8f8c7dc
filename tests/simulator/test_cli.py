"""`syncswitch simulate` and `syncswitch search --simulate`: run folders, arrivals replayed, errors in one line."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("tensorflow")

from click.testing import CliRunner

from syncswitch.cli import cli

# The conformance suite's digits job, shorter and at batch 8.
SHORT = ["--set", "workload={samples: 1280}", "--set", "hyperparameters.batch_size=8"]


def invoke(command, job, *args):
    return CliRunner().invoke(cli, [command, job, *SHORT, *(str(a) for a in args)])


def test_simulate_writes_a_run_folder_and_replays_its_step_times(digits_job, tmp_path):
    first = invoke("simulate", digits_job, "--workers", 3, "--arrivals", "speeds:0.8", "--out", tmp_path / "a",
                   "--quiet")
    assert first.exit_code == 0, first.output
    assert "completed: 3 simulated workers" in first.output
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["backend"] == "simulator" and summary["simulation"]["arrivals"]["model"] == "speeds"
    # The folder's measured step times, replayed: each worker steps as fast as it did there, so the order of
    # updates, and with it every bit, is the same.
    second = invoke("simulate", digits_job, "--workers", 3, "--arrivals", f"replay:{tmp_path / 'a'}",
                    "--out", tmp_path / "b", "--quiet")
    assert second.exit_code == 0, second.output
    again = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert again["simulation"]["arrivals"]["workers_replayed"] == 3
    assert [e["accuracy"] for e in again["evaluations"]] == [e["accuracy"] for e in summary["evaluations"]]


@pytest.mark.parametrize("args,message", [
    (["--arrivals", "zipf"],
     "unknown arrival model; valid: round-robin, speeds[:SIGMA][:jitter=J][:block=K], replay:RUN_DIR"),
    (["--arrivals", "replay:/nonexistent"], "metrics.jsonl not found"),
    (["--protocol", "nope"], "nope"),
])
def test_bad_input_is_one_line_and_a_nonzero_exit(digits_job, tmp_path, args, message):
    result = invoke("simulate", digits_job, *args, "--out", tmp_path / "x")
    assert result.exit_code != 0
    assert message in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_a_simulated_search_whose_bsp_does_not_train_stops_with_one_line_and_stores_nothing(digits_job, tmp_path,
                                                                                            monkeypatch):
    # A rate too small to move the loss: the BSP reference completes at an untrained model's accuracy (as the
    # quickstart's does at 32 workers as shipped), and a search against it would accept any switch point.
    monkeypatch.setenv("SYNCSWITCH_HOME", str(tmp_path / "home"))
    result = invoke("search", digits_job, "--simulate", "--workers", 4, "--runs", 1, "--bsp-runs", 1,
                    "--max-settings", 2, "--step-time", 0.05, "--output-dir", tmp_path / "pilots",
                    "--set", "hyperparameters.learning_rate=0.0000001")
    assert result.exit_code == 2, result.output
    assert "1 of 1 BSP reference run(s) did not train" in result.output and "Traceback" not in result.output
    assert [p.name for p in (tmp_path / "pilots").iterdir()] == ["switch1.0000-r0"]  # no candidate ran
    assert not (tmp_path / "home" / "policies.json").exists()


def test_a_simulated_search_with_a_measured_step_cost_resumes_from_its_cache(digits_job, tmp_path, monkeypatch):
    # The per-step cost is measured anew by every call: it must not make the next call a fresh search.
    monkeypatch.setenv("SYNCSWITCH_HOME", str(tmp_path / "home"))
    args = ("--simulate", "--workers", 4, "--runs", 1, "--bsp-runs", 1, "--max-settings", 1,
            "--output-dir", tmp_path / "pilots", "--format", "json")
    docs = []
    for _ in range(2):
        result = invoke("search", digits_job, *args)
        assert result.exit_code == 0, result.output
        docs.append(json.loads(result.output[result.output.index("{"):]))
    assert [d["search"]["new_runs"] for d in docs] == [2, 0]
    assert all(d["policy"]["settings"]["simulated"]["step_time_calibrated"] for d in docs)
    assert "step_time_s" in docs[1]["policy"]["settings"]["simulated"]  # the stored policy still says what it was


def test_search_runs_its_pilots_in_the_simulator_and_says_so_in_the_stored_policy(digits_job, tmp_path, monkeypatch):
    monkeypatch.setenv("SYNCSWITCH_HOME", str(tmp_path / "home"))
    result = invoke("search", digits_job, "--simulate", "--workers", 16, "--runs", 1, "--bsp-runs", 1,
                    "--max-settings", 2, "--step-time", 0.05, "--output-dir", tmp_path / "pilots", "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output[result.output.index("{"):])
    simulated = doc["policy"]["settings"]["simulated"]
    assert simulated == {"workers": 16, "arrivals": "speeds:0.2", "step_time_s": 0.05, "step_time_calibrated": False}
    assert doc["stored"] and 0.0 <= doc["policy"]["switch_at"] <= 1.0
    pilots = list((tmp_path / "pilots").iterdir())
    assert pilots and all(json.loads((p / "summary.json").read_text())["workers"] == 16 for p in pilots)


def test_a_simulated_search_tries_a_longer_local_sgd_period_at_the_point_it_found(digits_job, tmp_path, monkeypatch):
    monkeypatch.setenv("SYNCSWITCH_HOME", str(tmp_path / "home"))
    result = invoke("search", digits_job, "--simulate", "--workers", 4, "--runs", 1, "--bsp-runs", 1,
                    "--max-settings", 1, "--step-time", 0.05, "--periods", 4, "--output-dir", tmp_path / "pilots",
                    "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output[result.output.index("{"):])
    assert doc["policy"]["switch_at"] == 0.5, result.output  # the one setting tried kept the accuracy
    (trial,) = [line for line in result.output.splitlines() if "=> period 4:" in line]
    kept = trial.endswith(": kept")
    assert doc["policy"]["target_params"] == ({"period": 4} if kept else {})
    assert [(t["period"], t["accepted"]) for t in doc["periods"]["trials"]] == [(4, kept)]
    (pilot,) = (tmp_path / "pilots" / "period4").iterdir()  # the period's pilot, at the switch point found
    summary = json.loads((pilot / "summary.json").read_text())
    assert [(p["protocol"], p.get("params", {}).get("period")) for p in summary["schedule"]] == [
        ("bsp", None), ("local-sgd", 4)], summary["schedule"]
