"""The run-folder reader: what the analysis asks of a summary, and the files it reads."""

import json

import pytest

from syncswitch.runfolder import (RunFolderError, RunSummary, metrics_reached, read_records, read_summary,
                                  training_loss_ends)

ROLLBACK = {"action": "rollback to 20.0%, continue with bsp"}
FALL_BACK = {"action": "fall back at 42.0%, continue with bsp"}
NOT_ACTED = {"action": "none: no rollback left (policy.guard.max_rollbacks=1, policy.fallback=['bsp'])"}
FINISHED = {"action": "rollback to 30.0%, continue with bsp (finished by the recovery)"}


@pytest.mark.parametrize("events, acted, kinds", [
    ([], False, set()),
    ([NOT_ACTED], False, set()),  # a verdict nothing was done about: the guard did not act
    ([ROLLBACK], True, {"rollback"}),
    ([NOT_ACTED, FALL_BACK], True, {"fall back"}),
    ([FINISHED, FALL_BACK], True, {"rollback", "fall back"}),
])
def test_the_guard_acted_is_one_question(events, acted, kinds):
    summary = RunSummary({"status": "completed", "guard_events": events})
    assert summary.guard_acted is acted
    assert {k for k in ("rollback", "fall back") if summary.repaired_by(k)} == kinds


def test_the_reader_names_the_file_it_cannot_read(tmp_path):
    with pytest.raises(RunFolderError, match="no summary.json"):
        read_summary(str(tmp_path))
    (tmp_path / "summary.json").write_text('{"status": "compl')
    with pytest.raises(RunFolderError, match="summary.json: corrupt JSON"):
        read_summary(str(tmp_path))
    (tmp_path / "summary.json").write_text("[1]")
    with pytest.raises(RunFolderError, match="expected a JSON object"):
        read_summary(str(tmp_path))
    assert read_records(str(tmp_path)) == []
    with pytest.raises(RunFolderError, match="metrics.jsonl: missing"):
        read_records(str(tmp_path), required=True)


def test_metrics_keep_their_order_and_lose_only_a_torn_last_line(tmp_path):
    lines = [json.dumps({"kind": "metrics", "fraction": f}) for f in (0.1, 0.3, 0.2)]
    (tmp_path / "metrics.jsonl").write_text("\n".join(lines) + '\n{"kind": "metr')
    assert [r["fraction"] for r in read_records(str(tmp_path))] == [0.1, 0.3, 0.2]
    assert metrics_reached(str(tmp_path)) == 0.3
    (tmp_path / "metrics.jsonl").write_text(lines[0] + "\n{oops\n" + lines[1] + "\n")
    with pytest.raises(RunFolderError, match="metrics.jsonl:2: not a JSON record"):
        read_records(str(tmp_path))


def test_the_training_loss_ends_are_the_medians_of_the_first_and_last_reports(tmp_path):
    reports = [(0.0, 2.3), (0.01, 2.4), (0.015, 2.2), (0.5, 1.0), (0.97, 0.5), (0.99, float("nan")), (0.99, 0.3),
               (1.0, 0.4)]
    lines = [json.dumps({"kind": "metrics", "fraction": f, "loss": loss}) for f, loss in reports]
    lines.append(json.dumps({"kind": "evaluation", "fraction": 1.0, "loss": 9.0}))  # the test loss is not training's
    (tmp_path / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    assert training_loss_ends(str(tmp_path)) == pytest.approx((2.3, 0.35))  # 0.97 lies before the last 0.02
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"kind": "metrics", "fraction": 0.1}) + "\n")
    assert training_loss_ends(str(tmp_path)) is None
