"""Arrival models: deterministic step times per (worker, step), stragglers, and a real run's reports replayed."""

from __future__ import annotations

import json

import numpy as np
import pytest

from syncswitch.errors import SpecError
from syncswitch.simulator.arrivals import arrival_model, replayed_step_times


def test_round_robin_is_one_unit_for_everyone():
    model = arrival_model("round-robin", 4, 0, unit=0.25)
    assert {model.step_time(w, k) for w in range(4) for k in range(10)} == {0.25}


def test_speeds_are_per_worker_and_the_same_for_a_seed():
    a, b, c = (arrival_model("speeds:0.5", 8, seed, unit=1.0) for seed in (1, 1, 2))
    times = [[a.step_time(w, k) for k in range(200)] for w in range(8)]
    assert times == [[b.step_time(w, k) for k in range(200)] for w in range(8)]
    assert times != [[c.step_time(w, k) for k in range(200)] for w in range(8)]
    means = np.mean(times, axis=1)
    assert means.max() / means.min() > 1.3  # sigma 0.5 over 8 workers: some are stragglers
    assert np.allclose(means, a.slowness, rtol=0.1)


def test_jitter_and_its_block_are_set_apart_from_the_workers_speeds():
    plain, named = arrival_model("speeds:0.2", 4, 3), arrival_model("speeds:0.2:jitter=0.1:block=1", 4, 3)
    assert [plain.step_time(1, k) for k in range(50)] == [named.step_time(1, k) for k in range(50)]  # the default
    drift = arrival_model("speeds:0.05:jitter=0.3:block=20", 4, 3)
    times = np.array([[drift.step_time(w, k) for k in range(4000)] for w in range(4)])
    blocks = times.reshape(4, 200, 20)
    assert np.all(blocks == blocks[:, :, :1])  # 20 steps in a row share one draw
    assert np.std(np.log(blocks[:, :, 0] / drift.slowness[:, None])) == pytest.approx(0.3, rel=0.1)
    assert np.allclose(times.mean(axis=1), drift.slowness * np.exp(0.3 ** 2 / 2), rtol=0.06)


def _report(worker, phase, steps, busy):
    return {"kind": "metrics", "worker": worker, "phase": phase, "local_steps": steps, "busy_s": busy,
            "step_time_s": 9.0}


def test_replay_reads_each_workers_busy_time_per_step(tmp_path):
    # The counters are the worker process's: they run on across a phase boundary and start anew in a relaunched
    # process (worker 0's last two reports).
    records = [_report(0, 0, 1, 0.1), _report(1, 0, 1, 0.3), _report(0, 0, 3, 0.5), _report(1, 0, 2, 0.6),
               _report(1, 1, 3, 0.7), _report(0, 1, 1, 5.0), _report(0, 1, 2, 5.2),
               {"kind": "evaluation", "fraction": 0.5}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    times = replayed_step_times(str(tmp_path))
    np.testing.assert_allclose(times[0], [0.1, 0.2, 0.2, 5.0, 0.2])
    np.testing.assert_allclose(times[1], [0.3, 0.3, 0.1])
    model = arrival_model(f"replay:{tmp_path}", 4, 0)
    assert model.step_time(2, 1) == pytest.approx(0.2) and model.step_time(3, 4) == pytest.approx(0.3)


@pytest.mark.parametrize("text,message", [("speeds:x", "SIGMA must be a number"), ("speeds:9", "between 0 and 3"),
                                          ("poisson", "unknown arrival model"), ("replay:", "unknown arrival model"),
                                          ("speeds:0.1:jitter=x", "jitter must be between"),
                                          ("speeds:0.1:block=0", "block a whole number"),
                                          ("speeds:0.1:q=2", "speeds takes SIGMA, jitter=J and block=K")])
def test_bad_models_are_named(text, message):
    with pytest.raises(SpecError, match=message):
        arrival_model(text, 2, 0)


def test_a_folder_without_reports_is_refused(tmp_path):
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"kind": "evaluation"}) + "\n")
    with pytest.raises(SpecError, match="holds no worker step times"):
        arrival_model(f"replay:{tmp_path}", 2, 0)
