"""Workers sharing cores: when a step reads and pushes, ASP's staleness from the cores and the slice, calibration."""

from __future__ import annotations

import json

import numpy as np
import pytest

from syncswitch.errors import SpecError
from syncswitch.simulator.arrivals import arrival_model
from syncswitch.simulator.cores import Cores, calibrate_quantum, simulated_staleness


def test_a_core_each_leaves_every_step_the_others_pushes():
    model = arrival_model("round-robin", 4, 0)
    assert simulated_staleness(model, 4, None, 1.0) == pytest.approx(3.0, abs=0.01)


@pytest.mark.parametrize("cores,staleness", [(1, 0.0), (2, 1.0), (3, 2.0)])
def test_steps_that_run_to_their_end_overlap_only_the_other_cores(cores, staleness):
    model = arrival_model("speeds:0.3", 4, 1)
    assert simulated_staleness(model, 4, cores, quantum=8.0) == pytest.approx(staleness, abs=0.01)


def test_a_short_slice_shares_the_cores_evenly_and_staleness_falls_as_it_grows():
    model = arrival_model("speeds:0.2", 4, 0)
    values = [simulated_staleness(model, 4, 2, q) for q in (0.01, 0.3, 1.0, 8.0)]
    assert values[0] == pytest.approx(3.0, abs=0.05)
    assert values == sorted(values, reverse=True) and values[-1] == pytest.approx(1.0, abs=0.01)


def test_a_round_on_one_core_is_time_sliced():
    assert Cores(1, 0.5).finish_times([1.0, 1.0, 1.0]) == {0: 2.0, 1: 2.5, 2: 3.0}
    assert Cores(None, 0.5).finish_times([1.0, 2.0]) == {0: 1.0, 1: 2.0}


def test_a_worker_reads_when_its_step_first_gets_a_core():
    cpu = Cores(1, 8.0)
    cpu.start(0.0, 0, 1.0)
    cpu.start(0.0, 1, 1.0)
    assert [cpu.next() for _ in range(4)] == [("read", 0.0, 0), ("push", 1.0, 0), ("read", 1.0, 1), ("push", 2.0, 1)]
    assert cpu.next() is None


def test_the_quantum_is_calibrated_to_a_measured_staleness():
    model = arrival_model("speeds:0.2", 4, 0)
    quantum = calibrate_quantum(model, 4, 2, 1.6)
    assert simulated_staleness(model, 4, 2, quantum) == pytest.approx(1.6, abs=0.05)
    shared = arrival_model("speeds:0.2+cores:2:staleness=1.6", 4, 0)
    assert (shared.cores, shared.quantum) == (2, quantum)
    assert arrival_model("round-robin+cores:1:q=0.5", 2, 0).describe()["quantum"] == 0.5


def test_a_replayed_run_is_calibrated_to_the_staleness_it_measured(tmp_path):
    rng = np.random.RandomState(0)
    busy = np.cumsum(rng.uniform(0.05, 0.15, (200, 4)), axis=0)  # each worker's counter after each step
    reports = [{"kind": "metrics", "worker": w, "local_steps": k + 1, "busy_s": float(busy[k, w])}
               for k in range(200) for w in range(4)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reports))
    phases = [{"protocol": "bsp", "measured": {}}, {"protocol": "asp", "measured": {"staleness_mean": 0.8}}]
    (tmp_path / "summary.json").write_text(json.dumps({"schedule": phases}))
    model = arrival_model(f"replay:{tmp_path}+cores:1", 4, 0)
    assert model.describe()["calibrated_to_staleness"] == 0.8
    assert simulated_staleness(model, 4, 1, model.quantum) == pytest.approx(0.8, abs=0.05)


@pytest.mark.parametrize("text", ["speeds+cores:x", "speeds+cores:0", "speeds+cores:2:z=1", "speeds+cores:2:q=-1"])
def test_bad_cores_are_named(text):
    with pytest.raises(SpecError, match=r"\+cores:C"):
        arrival_model(text, 4, 0)


def test_a_worker_in_a_call_is_off_the_cores_and_reads_when_it_gets_one_after_it():
    cpu = Cores(1, 8.0)
    cpu.start(0.0, 0, 1.0, call=0.5)
    cpu.start(0.0, 1, 1.0)
    assert [cpu.next() for _ in range(4)] == [("read", 0.0, 1), ("push", 1.0, 1), ("read", 1.0, 0), ("push", 2.0, 0)]
    cpu = Cores(None, 8.0)
    cpu.start(0.0, 0, 1.0, call=0.5)
    assert [cpu.next() for _ in range(2)] == [("read", 0.5, 0), ("push", 1.5, 0)]


def test_a_call_is_priced_as_a_fraction_of_the_step():
    model = arrival_model("speeds:0.2+cores:1:q=0.5+call:0.2", 2, 0)
    assert (model.cores, model.quantum, model.call) == (1, 0.5, 0.2)
    assert model.describe()["call"] == 0.2
    assert arrival_model("round-robin+call:0.1", 2, 0).call == 0.1
    assert arrival_model("round-robin", 2, 0).call == 0.0


@pytest.mark.parametrize("text", ["speeds+call:x", "speeds+call:1", "speeds+call:-0.1", "speeds+call:"])
def test_a_bad_call_price_is_named(text):
    with pytest.raises(SpecError, match=r"\+call:F"):
        arrival_model(text, 2, 0)


def test_a_held_worker_reads_then_lends_its_core_and_its_update_counts_the_pushes_meanwhile():
    cpu = Cores(1, 8.0, stall=lambda worker, k: 2.5 if (worker, k) == (0, 0) else 0.0)
    cpu.start(0.0, 0, 1.0)
    cpu.start(0.0, 1, 1.0)
    events = [cpu.next() for _ in range(3)]
    assert events == [("read", 0.0, 0), ("read", 0.0, 1), ("push", 1.0, 1)]
    cpu.start(1.0, 1, 1.0)
    assert [cpu.next() for _ in range(3)] == [("read", 1.0, 1), ("push", 2.0, 1), ("push", 3.5, 0)]


def test_stalls_give_a_shared_machine_its_staleness_tail_at_the_same_mean():
    """A real 4-worker ASP run on this machine: 3.5% of its updates at staleness 6 or more, up to 45 (notebook
    2026-11-27-simulator-6); round-robin slices keep every update near N - 1."""
    plain = arrival_model("speeds:0.2+cores:1:staleness=1.6", 4, 0)
    held = arrival_model("speeds:0.2+cores:1:staleness=1.6:stall=0.05/5", 4, 0)
    assert [plain.step_time(w, k) for w in range(4) for k in range(50)] == \
        [held.step_time(w, k) for w in range(4) for k in range(50)]  # the holds are drawn apart from the times
    tails = {}
    for name, model in (("plain", plain), ("held", held)):
        assert simulated_staleness(model, 4, 1, model.quantum) == pytest.approx(1.6, abs=0.05)
        tails[name] = _share_at_least(model, 6)
    assert tails["plain"] < 0.005 < 0.02 < tails["held"] < 0.06
    assert held.describe()["stall_p"] == 0.05 and held.describe()["stall_mean"] == 5.0


def _share_at_least(model, k: int, pushes: int = 4000) -> float:
    cpu = Cores(model.cores, model.quantum, model.unit, model.stall)
    step, read_at, stale, steps = 0, {}, [], [0] * model.workers
    for w in range(model.workers):
        cpu.start(0.0, w, model.step_time(w, 0))
    while len(stale) < pushes:
        kind, t, w = cpu.next()
        if kind == "read":
            read_at[w] = step
            continue
        stale.append(step - read_at[w])
        step, steps[w] = step + 1, steps[w] + 1
        cpu.start(t, w, model.step_time(w, steps[w]))
    return float(np.mean(np.asarray(stale) >= k))


@pytest.mark.parametrize("text", ["speeds+cores:1:stall=x", "speeds+cores:1:stall=0.5", "speeds+cores:1:stall=1.5/2",
                                  "speeds+cores:1:q=0.5:stall=0.1/-1"])
def test_bad_stalls_are_named(text):
    with pytest.raises(SpecError, match="stall=P/M"):
        arrival_model(text, 4, 0)
