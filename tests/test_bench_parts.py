"""The benchmark tool: every part registered, declaring its options and result schema; one help listing them all."""

import os
import subprocess
import sys

import pytest

from bench import common, parts
from tests.conftest import ROOT


def test_help_lists_every_part_and_tool():
    out = subprocess.run([sys.executable, "-m", "bench", "--help"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, check=True).stdout
    for name in list(parts.PARTS) + list(parts.TOOLS):
        assert f"  {name} " in out


def test_an_unknown_part_is_a_one_line_error():
    proc = subprocess.run([sys.executable, "-m", "bench", "protocol"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and "did you mean 'protocols'" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("name", sorted(parts.PARTS))
def test_every_part_declares_options_and_a_schema(name):
    module = parts.load(name)
    assert module.RESULT_SCHEMA and all(isinstance(v, str) for v in module.RESULT_SCHEMA.values())
    parser = common.part_parser(module, name)
    assert parser.parse_args(["--quick"] + (["--job", "jobs/quickstart.yaml"] if name.endswith("-sim") else [])).quick


def test_every_part_module_is_registered():
    """A module with the part interface that is not in the registry would be invisible to `--help`."""
    registered = {module for module, _ in parts.PARTS.values()}
    for file in sorted(os.listdir(os.path.join(ROOT, "bench"))):
        if not file.endswith(".py"):
            continue
        with open(os.path.join(ROOT, "bench", file), encoding="utf-8") as fh:
            text = fh.read()
        if "def run_part(" in text:
            assert f"bench.{file[:-3]}" in registered, file


def test_no_path_edits_in_bench():
    needle = "sys." + "path"
    for folder, _, files in os.walk(os.path.join(ROOT, "bench")):
        for file in files:
            if file.endswith(".py"):
                with open(os.path.join(folder, file), encoding="utf-8") as fh:
                    assert needle not in fh.read(), os.path.join(folder, file)


def test_a_result_missing_a_schema_key_is_named():
    assert common.missing_keys({"a": 1}, {"a": "x", "b": "y"}) == ["b"]
    assert common.missing_keys({"error": "boom"}, {"a": "x"}) == []


def test_the_run_loop_takes_turns_and_seeds_each_repeat(monkeypatch, tmp_path):
    from syncswitch import spec as specmod

    spec = specmod.load(os.path.join(ROOT, "jobs", "quickstart.yaml"), ["seed=3"])
    calls = []

    def fake_summary(seeded, variant, run_dir):  # the loop's order and seeds, without a cluster
        calls.append((variant, seeded.seed, seeded.raw["seed"], os.path.basename(run_dir)))
        return {"status": "completed"}

    monkeypatch.setattr(common, "run_summary", fake_summary)
    runs = common.interleaved({"a": (spec, "bsp"), "b": (spec, "switch@0.5")}, 2, str(tmp_path), first_seed=10)
    assert calls == [("bsp", 13, 13, "a-s13"), ("switch@0.5", 13, 13, "b-s13"),
                     ("bsp", 14, 14, "a-s14"), ("switch@0.5", 14, 14, "b-s14")]
    assert [len(v) for v in runs.values()] == [2, 2]


def test_the_switch_overhead_job_switches_whatever_the_rules_would_judge(tmp_path):
    # With the speed rule on, its 4-worker runs stayed on BSP ("not trying ..."): no switch, no overhead to
    # measure, and the part failed with "no switch-overhead run completed".
    from bench import switch_overhead

    spec = common.load_spec(switch_overhead.job_file(str(tmp_path)))
    assert spec.policy.switch_speed.rule == "off"
    # Nor what the loss rule reads: a 1.5 s run's first loss report came past its latest point (no switch).
    assert spec.policy.switch_rule.rule == "fixed"
