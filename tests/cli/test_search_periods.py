"""`syncswitch search run --periods`: longer local-SGD periods tried at the found switch point, on fake pilots
standing in for the cluster (their accuracy and time follow the period the pilot's spec runs)."""

from __future__ import annotations

import json
import re
import sys
import types

import pytest
from click.testing import CliRunner

from syncswitch.cli.search import policy, search
from syncswitch.search.binary_search import PilotResult
from syncswitch.spec import switch_target

EXPERIMENTS = "syncswitch.cli.pilots"
SHAPE = {2: (0.920, 100.0), 4: (0.921, 80.0), 8: (0.880, 70.0)}  # period: (accuracy, seconds at the knee)


@pytest.fixture
def fake_cluster(monkeypatch):
    calls: list = []

    def run_pilot_factory(job_spec, output_root):
        period = switch_target(job_spec.policy).param_dict["period"]

        def run_pilot(switch_at, repeat):
            calls.append((period, switch_at, repeat))
            accuracy, seconds = SHAPE[period] if switch_at >= 0.125 else (0.85, 50.0)
            return PilotResult(accuracy + 0.001 * repeat, seconds + 100 * switch_at, f"{output_root}/{repeat}",
                               switched=job_spec.name != "stays")

        return run_pilot

    module = types.ModuleType(EXPERIMENTS)
    module.run_pilot_factory = run_pilot_factory
    monkeypatch.setitem(sys.modules, EXPERIMENTS, module)
    return calls


def test_the_longest_period_that_keeps_the_accuracy_is_stored_and_its_pilots_reused(job_file, fake_cluster,
                                                                                   syncswitch_home, tmp_path):
    args = [str(job_file), "--workers", "4", "--runs", "2", "--bsp-runs", "0", "--target-accuracy", "0.92",
            "--max-settings", "3", "--periods", "8,4", "--output-dir", str(tmp_path / "pilots")]
    result = CliRunner().invoke(search, args)
    assert result.exit_code == 0, result.output
    assert "switch at 12.5%" in result.output
    assert "local-sgd period 4 stored (period 4: kept" in result.output and "period 8: accuracy" in result.output
    assert {(p, s) for p, s, _ in fake_cluster if p != 2} == {(4, 0.125), (8, 0.125)}  # at the found point only
    (stored,) = json.loads(CliRunner().invoke(policy, ["list", "--format", "json"]).output)
    assert stored["target_params"] == {"period": 4} and stored["runs"] == 3 * 2 + 2 * 2
    assert re.search(r"switch target period +4\n", CliRunner().invoke(policy, ["show", "tiny"]).output)

    fake_cluster.clear()
    again = CliRunner().invoke(search, args)
    assert again.exit_code == 0 and fake_cluster == []  # every pilot, the periods' too, came from the cache


@pytest.mark.parametrize("args, text", [
    (["--workers", "2", "--periods", "4"], "--periods: the switch target, lookahead, has no period"),
    (["--workers", "4", "--periods", "4,x"], "--periods"),
    (["--workers", "4", "--periods", "0"], "--periods: 0 is not a local-SGD period"),
])
def test_bad_periods_are_one_clear_line(job_file, fake_cluster, syncswitch_home, args, text):
    result = CliRunner().invoke(search, [str(job_file), "--bsp-runs", "0", "--target-accuracy", "0.9", *args])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert text in result.output


def test_no_period_is_tried_where_the_switch_points_pilots_never_left_bsp(job_file, fake_cluster, syncswitch_home):
    job_file.write_text(job_file.read_text().replace("name: tiny", "name: stays"))
    result = CliRunner().invoke(search, [str(job_file), "--workers", "4", "--runs", "2", "--bsp-runs", "0",
                                         "--target-accuracy", "0.92", "--max-settings", "3", "--periods", "4,8"])
    assert result.exit_code == 0, result.output
    assert "periods: not tried: every pilot at 12.5% stayed on BSP" in result.output
    assert {p for p, _, _ in fake_cluster} == {2}
    (stored,) = json.loads(CliRunner().invoke(policy, ["list", "--format", "json"]).output)
    assert stored["target_params"] == {}
