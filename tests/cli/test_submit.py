"""CLI: one-line errors with a non-zero exit and no traceback; dry runs; option shortcuts."""

import re

from click.testing import CliRunner

from syncswitch.cli import cli
from tests.conftest import MINIMAL


def test_unknown_key_is_one_line_exit_2(write_spec):
    path = write_spec(MINIMAL + "evaluaton: {every: 0.1}\n")
    result = CliRunner().invoke(cli, ["submit", path])
    assert result.exit_code == 2
    assert result.output.strip() == ("error: unknown key evaluaton (did you mean 'evaluation'?); valid: name, "
                                     "script, workdir, params, hyperparameters, workload, cluster, policy, evaluation, "
                                     "seed, stragglers, checkpoint, recovery")
    assert "Traceback" not in result.output


def test_missing_spec_file(tmp_path):
    result = CliRunner().invoke(cli, ["submit", str(tmp_path / "none.yaml")])
    assert result.exit_code == 2 and "no such job spec file" in result.output


def test_dry_run_shows_the_plan(write_spec):
    result = CliRunner().invoke(cli, ["submit", write_spec(MINIMAL), "--dry-run", "--workers", "3",
                                      "--switch-at", "0.4", "--switch-mode", "relaunch"])
    assert result.exit_code == 0, result.output
    assert "3 agent process(es) on 127.0.0.1" in result.output
    assert "schedule: bsp until 0.4, local-sgd until 1 (relaunch)" in result.output
    assert re.search(r"script: digits_mlp.py in .*examples, shipped with it: \d+ file\(s\)", result.output)


def test_a_named_workdir_over_the_limit_fails_the_dry_run(write_spec, tmp_path, monkeypatch):
    from syncswitch.wire import bundle

    monkeypatch.setattr(bundle, "LIMIT_BYTES", 100)
    from tests.conftest import EXAMPLES

    result = CliRunner().invoke(cli, ["submit", write_spec(MINIMAL), "--dry-run", "--set", f"workdir={EXAMPLES}"])
    assert result.exit_code == 2
    assert re.fullmatch(r"error: workdir='.*examples': .*examples holds more than 0 MiB of files; name a smaller "
                        r"folder, or null to ship the script alone", result.output.strip())


def test_switch_to_names_the_protocol_the_switch_goes_to(write_spec):
    path = write_spec(MINIMAL)
    result = CliRunner().invoke(cli, ["submit", path, "--dry-run", "--switch-at", "0.4", "--switch-to", "asp"])
    assert result.exit_code == 0, result.output
    assert "schedule: bsp until 0.4, asp until 1" in result.output
    result = CliRunner().invoke(cli, ["submit", path, "--dry-run", "--switch-to", "bsp"])
    assert result.exit_code == 2 and "--switch-to" in result.output


def test_protocol_and_switch_at_are_exclusive(write_spec):
    result = CliRunner().invoke(cli, ["submit", write_spec(MINIMAL), "--protocol", "bsp", "--switch-at", "0.3"])
    assert result.exit_code == 2 and "exclusive" in result.output


def test_bad_override_value(write_spec):
    result = CliRunner().invoke(cli, ["submit", write_spec(MINIMAL), "--workers", "0", "--dry-run"])
    assert result.exit_code == 2
    assert result.output.strip() == "error: cluster.workers=0: must be >= 1"


def test_straggler_policy_option(write_spec):
    from syncswitch.cli.options import spec_overrides

    assert spec_overrides(None, None, None, None, None, (), "elastic") == ["stragglers.policy=elastic"]
    result = CliRunner().invoke(cli, ["submit", write_spec(MINIMAL), "--straggler-policy", "elastik", "--dry-run"])
    assert result.exit_code == 2 and "'elastic', 'greedy', 'none'" in result.output
    result = CliRunner().invoke(cli, ["submit", write_spec(MINIMAL), "--straggler-policy", "greedy", "--dry-run"])
    assert result.exit_code == 2
    assert result.output.strip() == ("error: stragglers.policy='greedy': needs cluster.workers >= 3 (got 2): "
                                     "mean - std cannot single out a straggler among fewer workers")


def test_an_output_dir_tensorflow_would_read_as_a_glob_is_refused_before_anything_starts(write_spec, tmp_path):
    folder = tmp_path / "runs[1]"
    result = CliRunner().invoke(cli, ["submit", write_spec(MINIMAL), "--output-dir", str(folder)])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert result.output.strip() == (f"error: --output-dir {folder}: [ ] in the run folder's path; TensorFlow reads "
                                     "checkpoint paths as glob patterns, choose a folder without * ? [ ]")
    assert not folder.exists()


def test_an_output_folder_that_cannot_be_made_is_one_line_exit_2(write_spec, tmp_path):
    (tmp_path / "taken").write_text("a file where a folder should go")
    result = CliRunner().invoke(cli, ["submit", write_spec(MINIMAL), "--output-dir", str(tmp_path / "taken" / "run"),
                                      "--quiet"])
    assert result.exit_code == 2
    folder = tmp_path / "taken" / "run"
    assert result.output.strip() == f"error: output folder {folder}: cannot create it: Not a directory"


def test_a_run_too_short_to_try_its_target_points_to_the_search():
    from syncswitch.cli.submit import search_hint

    def summary(action, **values):
        return {"switch_speed": {"decisions": [{"action": action, "values": {"target": "lookahead", **values}}]}}

    hint = search_hint(summary("stay", failed_trial_s=1.0, hoped_gain_s=0.3), "jobs/q.yaml")
    assert hint.startswith("syncswitch: lookahead was not tried") and "`syncswitch search jobs/q.yaml`" in hint
    assert search_hint(summary("stay", failed_trial_steps=40), "q.yaml") is not None  # BSP's speed not measured yet
    # Stayed for a measured reason (a stored speed under the margin, a pause longer than what is left), switched, or
    # no speed rule at all: nothing a search would change.
    assert search_hint(summary("stay", ratio=0.6, source="earlier runs (3)"), "q.yaml") is None
    assert search_hint(summary("keep", ratio=1.3, source="trial"), "q.yaml") is None
    assert search_hint({"status": "completed"}, "q.yaml") is None
