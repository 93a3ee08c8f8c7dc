"""`search` and `policy` click groups through CliRunner, with fake pilots standing in for the cluster."""

from __future__ import annotations

import json
import sys
import types

import pytest
from click.testing import CliRunner

from syncswitch.search import simulate as sim
from syncswitch.search.binary_search import PilotResult
from syncswitch.cli.search import policy, search

EXPERIMENTS = "syncswitch.cli.pilots"  # the pilot runner the search command imports


@pytest.fixture
def runner():
    return CliRunner()


@pytest.fixture
def fake_cluster(monkeypatch):
    """A run_pilot_factory(job_spec, output_root) whose pilots follow a knee at 12.5% BSP."""
    calls: list = []

    def run_pilot_factory(job_spec, output_root):
        calls.append(("factory", job_spec.name, job_spec.cluster.workers, output_root))

        def run_pilot(switch_at, repeat):
            calls.append((switch_at, repeat))
            acc = 0.92 if switch_at >= 0.125 else 0.88
            return PilotResult(acc + 0.001 * repeat, 100 + 900 * switch_at, f"{output_root}/{switch_at}-{repeat}")

        return run_pilot

    module = types.ModuleType(EXPERIMENTS)
    module.run_pilot_factory = run_pilot_factory
    monkeypatch.setitem(sys.modules, EXPERIMENTS, module)
    return calls


def assert_one_line_error(result, code):
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output


def test_simulate_json_rows_have_exactly_the_documented_keys(runner, setup1_manifest):
    result = runner.invoke(search, ["simulate", str(setup1_manifest), "--setting", "no,3,3", "--setting", "yes,0,2",
                                    "--trials", "100", "--seed", "7", "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [tuple(sorted(r)) for r in rows] == [tuple(sorted(sim.ROW_KEYS))] * 2
    assert (rows[0]["recurring"], rows[0]["bsp_runs"], rows[0]["candidate_runs"]) == (False, 3, 3)
    assert rows[1]["recurring"] is True and 0 <= rows[1]["success_probability"] <= 1
    again = runner.invoke(search, ["simulate", str(setup1_manifest), "--setting", "no,3,3", "--setting", "yes,0,2",
                                   "--trials", "100", "--seed", "7", "--format", "json"])
    assert json.loads(again.output) == rows  # seeded


def test_simulate_table_accepts_the_manifest_folder(runner, setup1_manifest):
    result = runner.invoke(search, ["simulate", str(setup1_manifest.parent), "--setting", "yes,0,3",
                                    "--trials", "50", "--threshold", "0.01"])
    assert result.exit_code == 0, result.output
    assert "baseline (every run) switches at 0.05" in result.output and "(yes,0,3)" in result.output


@pytest.mark.parametrize("args, code, text", [
    (["simulate", "/no/such/manifest.yaml", "--setting", "no,1,1"], 2, "no such manifest"),
    (["simulate", "{manifest}", "--setting", "sometimes,1,1"], 2, "--setting"),
    (["simulate", "{manifest}", "--trials", "0"], 2, "--trials"),
    (["simulate", "{manifest}", "--threshold", "1.5", "--setting", "no,1,1"], 2, "--threshold"),
])
def test_simulate_bad_input_is_one_clear_line(runner, setup1_manifest, args, code, text):
    args = [a.format(manifest=setup1_manifest) for a in args]
    result = runner.invoke(search, args)
    assert_one_line_error(result, code)
    assert text in result.output


def test_search_job_runs_pilots_stores_policy_and_reuses_them(runner, job_file, fake_cluster, syncswitch_home,
                                                              tmp_path):
    args = [str(job_file), "--runs", "2", "--bsp-runs", "2", "--max-settings", "4", "--threshold", "0.01",
            "--workers", "3", "--output-dir", str(tmp_path / "pilots")]
    result = runner.invoke(search, args)
    assert result.exit_code == 0, result.output
    assert fake_cluster[0] == ("factory", "tiny", 3, str(tmp_path / "pilots"))
    pilots = [c for c in fake_cluster if c[0] != "factory"]
    assert len(pilots) == 2 + 4 * 2
    assert "switch at 12.5%" in result.output
    assert "setting 1: BSP for 50% of the workload" in result.output  # progress (stderr is mixed in)
    assert "pilot 1 at 12.5%: accuracy" in result.output

    listed = runner.invoke(policy, ["list", "--format", "json"])
    records = json.loads(listed.output)
    assert len(records) == 1 and records[0]["switch_at"] == 0.125 and records[0]["job_name"] == "tiny"
    assert records[0]["inputs"]["workers"] == 3 and records[0]["runs"] == 10
    # The two BSP pilots: the guard's reference for the job's later submits (syncswitch/cli/submit.py).
    assert records[0]["reference_runs"] == [str(tmp_path / "pilots" / f"1.0-{r}") for r in (0, 1)]

    fake_cluster.clear()
    again = runner.invoke(search, args)
    assert again.exit_code == 0, again.output
    assert [c for c in fake_cluster if c[0] != "factory"] == []  # every pilot came from the cache
    assert "reused" in again.output


def test_search_json_output_and_no_store(runner, job_file, fake_cluster):
    result = runner.invoke(search, ["run", str(job_file), "--runs", "1", "--bsp-runs", "1", "--max-settings", "2",
                                    "--no-store", "--format", "json"], catch_exceptions=False)
    assert result.exit_code == 0
    doc = json.loads(result.output[result.output.index("{"):])
    assert doc["stored"] is False and doc["policy"]["switch_at"] == 0.25
    assert len(doc["search"]["points"]) == 2
    assert json.loads(runner.invoke(policy, ["list", "--format", "json"]).output) == []


def test_search_bad_job_is_a_clear_error(runner, tmp_path, fake_cluster):
    result = runner.invoke(search, [str(tmp_path / "missing.yaml")])
    assert_one_line_error(result, 2)
    assert "missing.yaml" in result.output
    result = runner.invoke(search, ["--runs", "0", str(tmp_path / "missing.yaml")])
    assert result.exit_code == 2 and "Traceback" not in result.output and "--runs" in result.output


def test_policy_show_and_delete(runner, job_file, fake_cluster):
    runner.invoke(search, [str(job_file), "--runs", "1", "--bsp-runs", "1", "--max-settings", "3"])
    record = json.loads(runner.invoke(policy, ["list", "--format", "json"]).output)[0]
    table = runner.invoke(policy, ["list"])
    assert record["signature"][:12] in table.output and "12.5%" in table.output
    shown = runner.invoke(policy, ["show", "tiny"])
    assert shown.exit_code == 0 and "switch at" in shown.output and record["signature"] in shown.output
    as_json = json.loads(runner.invoke(policy, ["show", record["signature"][:8], "--format", "json"]).output)
    assert as_json == record
    deleted = runner.invoke(policy, ["delete", "tiny"])
    assert deleted.exit_code == 0 and "deleted" in deleted.output
    assert_one_line_error(runner.invoke(policy, ["show", "tiny"]), 1)


def test_policy_commands_on_a_corrupt_store(runner, syncswitch_home):
    syncswitch_home.mkdir(parents=True)
    (syncswitch_home / "policies.json").write_text("{oops")
    for args in (["list"], ["show", "x"], ["delete", "x"]):
        result = runner.invoke(policy, args)
        assert_one_line_error(result, 1)
        assert "policies.json" in result.output and "corrupt" in result.output
    assert (syncswitch_home / "policies.json").read_text() == "{oops"


def test_search_help_lists_the_simulate_subcommand(runner):
    result = runner.invoke(search, ["--help"])
    assert result.exit_code == 0 and "simulate" in result.output


def test_simulate_accepts_several_settings_in_one_value(runner, setup1_manifest):
    result = runner.invoke(search, ["simulate", str(setup1_manifest), "--setting", "no,1,1 yes,0,1",
                                    "--trials", "20", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert [(r["recurring"], r["bsp_runs"]) for r in json.loads(result.output)] == [(False, 1), (True, 0)]


def test_a_simulated_search_says_what_its_seconds_are():
    from syncswitch.cli.search import _simulated_line
    from syncswitch.cli.search_periods import secs as _secs

    line = _simulated_line({"workers": 64, "arrivals": "speeds:0.2", "step_time_s": 0.00187,
                            "step_time_calibrated": True})
    assert "64 workers (speeds:0.2)" in line and "1.87 ms (measured here" in line and "no communication" in line
    assert "(given)" in _simulated_line({"workers": 8, "arrivals": "round-robin", "step_time_s": 0.05,
                                         "step_time_calibrated": False})
    assert [_secs(t) for t in (0.142, 2.3, 9.96, 10.4, 349.0)] == ["0.14 s", "2.3 s", "10 s", "10 s", "349 s"]


def test_the_search_says_what_its_pilots_measured_of_speed_and_pause():
    from syncswitch.cli.search import _speed_line
    from syncswitch.spec.model import SwitchSpeedSpec

    spec = SwitchSpeedSpec()  # margin derived at each decision: the noise floor (1.1x) is the least a switch needs
    slow = _speed_line({"target": "asp", "ratio": 0.6, "runs": 2, "pause_s": 0.84, "pauses": 3}, spec)
    assert slow == ("asp measured 0.60x BSP's throughput by 2 pilot(s) (median; a pilot that kept it to the end, over "
                    "its whole phase): later runs stay synchronous (a switch needs 1.1x); switches out of BSP paused "
                    "0.84 s (median of 3): later runs weigh a switch by it")
    assert _speed_line({"target": "asp", "ratio": 1.3, "runs": 1}, spec).endswith("later runs switch without a trial")
    assert _speed_line({"pause_s": 0.3, "pauses": 2}, spec).startswith("switches out of BSP paused 0.30 s")


def test_real_pilots_try_their_target_and_the_stored_policy_says_so(runner, job_file, monkeypatch, tmp_path,
                                                                     syncswitch_home):
    """On a short job the job's own runs never try the switch target (a trial that goes back would cost more than
    it could win), so the search's pilots do: the store then holds a measured speed for later runs to weigh."""
    margins = []

    def run_pilot_factory(job_spec, output_root):
        margins.append(job_spec.policy.switch_speed.margin)
        return lambda switch_at, repeat: PilotResult(0.92, 100.0, f"{output_root}/{switch_at}-{repeat}")

    module = types.ModuleType(EXPERIMENTS)
    module.run_pilot_factory = run_pilot_factory
    monkeypatch.setitem(sys.modules, EXPERIMENTS, module)
    result = runner.invoke(search, [str(job_file), "--runs", "1", "--bsp-runs", "1", "--max-settings", "1",
                                    "--output-dir", str(tmp_path / "pilots"), "--format", "json"])
    assert result.exit_code == 0, result.output
    from syncswitch.policies.speed_settings import SpeedSettings

    assert margins == [SpeedSettings().noise]
    doc = json.loads(result.output[result.output.index("{"):])
    assert doc["policy"]["settings"]["switching"]["switch_speed"]["margin"] == SpeedSettings().noise


def test_the_search_says_which_pilot_went_back_and_why_its_point_is_not_accepted(runner, job_file, monkeypatch,
                                                                                  tmp_path, syncswitch_home):
    def run_pilot_factory(job_spec, output_root):
        def run_pilot(switch_at, repeat):
            slower = (switch_at, repeat) == (0.5, 0)
            return PilotResult(0.92, 100.0, f"{output_root}/{switch_at}-{repeat}", slower=slower,
                               switched=switch_at < 1.0)
        return run_pilot

    module = types.ModuleType(EXPERIMENTS)
    module.run_pilot_factory = run_pilot_factory
    monkeypatch.setitem(sys.modules, EXPERIMENTS, module)
    result = runner.invoke(search, [str(job_file), "--runs", "3", "--bsp-runs", "1", "--max-settings", "1",
                                    "--output-dir", str(tmp_path / "pilots")])
    assert result.exit_code == 0, result.output
    assert "its speed trial found the target slower and went back to BSP" in result.output
    assert "=> mean 0.9200: within the margin, but 1 pilot(s) went back to BSP: not accepted" in result.output


def test_submit_says_when_the_specs_own_switch_point_wins_over_the_searched_one(job_file, syncswitch_home):
    from syncswitch import spec as specmod
    from syncswitch.cli import cli
    from syncswitch.search.store import PolicyRecord, PolicyStore, signature_for_spec

    job = specmod.load(str(job_file))
    PolicyStore().put(PolicyRecord(signature=signature_for_spec(job)[0], job_name="tiny", switch_at=0.59375,
                                   target_accuracy=0.92, achieved_mean=0.92, achieved_std=0.0, threshold=0.01,
                                   search_cost_s=1.0, search_cost_bsp=1.0, runs=1, created="now", inputs={}))
    runner = CliRunner()
    own = runner.invoke(cli, ["submit", str(job_file), "--dry-run", "--switch-at", "0.25"])
    assert own.exit_code == 0, own.output
    assert "the searched switch point of this job (0.594, `syncswitch search`) is not used" in own.output
    default = runner.invoke(cli, ["submit", str(job_file), "--dry-run"])
    assert default.exit_code == 0 and "is not used" not in default.output
