"""bench guard-corpus: recorded runs replayed through the guard, false alarms on BSP and verdicts on bad switches."""

from __future__ import annotations

import json

from bench import guard_corpus
from bench.guard_corpus_docs import guard_corpus_render
from syncswitch.policies.guard import GuardSettings


def _run(tmp_path, name, accuracy, seed, schedule=("bsp",), final=0.7):
    """A run folder as a local run leaves it with its guard off: every score recorded after training, newest first."""
    folder = tmp_path / name
    folder.mkdir()
    records = [{"kind": "entered", "source": 0, "phase": 0, "fraction": 0.0}]
    scores = []
    for i in range(1, 101):
        f = round(i / 100, 4)
        if len(schedule) > 1 and f > 0.25 and not any(r.get("phase") == 1 for r in records):
            records.append({"kind": "entered", "source": 0, "phase": 1, "fraction": 0.25})
        records += [{"kind": "metrics", "worker": w, "fraction": f, "loss": 1.0} for w in (0, 1)]
        if i % 5 == 0:
            scores.append({"kind": "evaluation", "abandoned": False, "fraction": f, "accuracy": accuracy(f)})
    guard = {**vars(GuardSettings()), "reference": [], "enabled": False, "fallback": ["bsp"]}
    summary = {"job": "toy", "workers": 2, "status": "completed", "final_accuracy": final,
               "schedule": [{"protocol": p} for p in schedule], "guard": guard}
    (folder / "summary.json").write_text(json.dumps(summary))
    (folder / "job.json").write_text(json.dumps({"raw": {"name": "toy", "seed": seed}}))
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records + scores[::-1]))
    return str(folder)


def _corpus(tmp_path):
    return [_run(tmp_path, "bsp-1", lambda f: 0.6 if 0.38 < f < 0.52 else 0.7, 1),      # BSP's own dip
            _run(tmp_path, "bsp-2", lambda f: min(0.7, 0.3 + f), 2),                      # steady
            _run(tmp_path, "asp-2", lambda f: min(0.5, 0.3 + f) if f <= 0.25 else 0.3, 2, ("bsp", "asp"), final=0.3)]


def test_false_alarms_and_verdicts_are_counted_per_job_with_the_switch_against_its_seeds_bsp(tmp_path):
    rows = guard_corpus.replay_corpus(_corpus(tmp_path), [0.25, 0.32], {})
    cell = guard_corpus.summarize(rows)["toy-2"]
    assert cell["pretended"] == 4
    assert [(a["seed"], a["switch_at"], a["reason"]) for a in cell["false_alarms"]] == [(1, 0.25, "accuracy"),
                                                                                        (1, 0.32, "accuracy")]
    (switched,) = cell["switched"]
    assert (switched["seed"], switched["target"], switched["points_below_bsp"]) == (2, "asp", 40.0)
    assert (switched["verdict"]["reason"], switched["verdict"]["fraction"]) == ("accuracy", 0.35)


def test_other_settings_are_tried_on_the_same_runs_and_the_figure_renders(tmp_path, capsys):
    out = tmp_path / "corpus.json"
    assert guard_corpus.main([*_corpus(tmp_path), "--set", "accuracy_drop=0.15", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["overrides"] == {"accuracy_drop": 0.15}
    assert doc["table"]["toy-2"]["false_alarms"] == []            # the 10-point dip is within 15
    assert doc["table"]["toy-2"]["switched"][0]["verdict"]         # the 20-point collapse is not
    text = "\n".join(guard_corpus_render([doc]))
    assert "| `toy-2` | 4 | 0 | – |" in text and "| `toy-2` | `asp` | 2 | 40 | accuracy at 0.35 |" in text


def test_a_folder_that_is_no_finished_run_is_one_line_and_exit_2(tmp_path, capsys):
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    assert guard_corpus.main([*_corpus(tmp_path), str(unfinished)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "unfinished: no summary.json" in err
    other = tmp_path / "other"
    other.mkdir()
    assert guard_corpus.main([*_corpus(other), "--set", "accuracy_drop=7"]) == 2
    assert "policy.guard.accuracy_drop=7" in capsys.readouterr().err


def test_bad_options_are_one_line_and_exit_2(tmp_path, capsys):
    runs = _corpus(tmp_path)
    assert guard_corpus.main([*runs, "--set", "accuracy_drop"]) == 2
    assert "--set 'accuracy_drop': expected KEY=VALUE" in capsys.readouterr().err
    assert guard_corpus.main([*runs, "--switch-at", "soon"]) == 2
    assert "--switch-at 'soon': expected fractions" in capsys.readouterr().err
