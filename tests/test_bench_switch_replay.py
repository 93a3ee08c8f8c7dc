"""bench/switch_replay.py: the switch rule replayed over a run folder's stored loss reports."""

import json
import math

from bench.switch_replay import losses, main, observe, replay
from syncswitch.policies.timing import TimingSettings


def _write_run(path, curve, step=0.01):
    path.mkdir()
    with open(path / "metrics.jsonl", "w", encoding="utf-8") as fh:
        fh.write(json.dumps({"kind": "entered", "fraction": 0.0}) + "\n")
        for i in range(int(1 / step) + 1):
            report = {"kind": "metrics", "worker": i % 2, "fraction": i * step, "loss": curve(i * step)}
            fh.write(json.dumps(report) + "\n")
    return path


def test_a_plateau_is_deferred_and_a_settled_run_switches_at_the_earliest(tmp_path, capsys):
    plateau = _write_run(tmp_path / "plateau", lambda f: 2.3 if f < 0.4 else 0.1 + 2.2 * math.exp(-(f - 0.4) / 0.03))
    settled = _write_run(tmp_path / "settled", lambda f: 0.1 + 2.2 * math.exp(-f / 0.03))
    assert len(losses(str(plateau))) == 101
    late = replay(losses(str(plateau)), TimingSettings(), 0.25)
    assert late["action"] == "switch" and 0.4 < late["fraction"] < 0.6
    assert replay(losses(str(settled)), TimingSettings(), 0.25) == {
        "action": "switch", "fraction": 0.25, "reason": "loss left its early regime"}
    assert replay(losses(str(plateau)), TimingSettings(latest=0.35), 0.25)["action"] == "stay"
    assert main([str(plateau), str(settled), "--set", "latest=0.35"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [d["action"] for d in out["replays"][0]["decisions"].values()] == ["stay", "switch"]


def test_observe_reads_the_plateau_where_asked(tmp_path, capsys):
    plateau = _write_run(tmp_path / "plateau", lambda f: 2.3 if f < 0.4 else 0.1 + 2.2 * math.exp(-(f - 0.4) / 0.03))
    seen = observe(losses(str(plateau)), TimingSettings(), 0.25)
    assert seen["initial_loss"] == 2.3 and seen["loss"] == 2.3 and seen["drop"] == 0.0
    assert observe(losses(str(plateau)), TimingSettings(), 0.6)["drop"] > 0.9
    assert main([str(plateau), "--observe", "0.25"]) == 0
    assert json.loads(capsys.readouterr().out)["runs"][str(plateau)]["drop"] == 0.0
