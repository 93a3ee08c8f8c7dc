"""The metrics hook reports each phase's own losses and step times, so a restore never carries a NaN over."""

import math
import types

from syncswitch.node.hooks.metrics import MetricsHook
from syncswitch.node.state import TrainState
from syncswitch.wire import codec


def _step(hook, loss):
    hook.before_run(None)
    hook.after_run(None, types.SimpleNamespace(results=loss))


def test_a_new_phase_starts_a_new_window():
    state = TrainState(total_samples=1000, worker=1)
    events = []
    hook = MetricsHook(state, loss=None, emit=events.append, interval_s=1e9)
    state.phase, state.phase_steps = 1, 0
    for loss in (1.0, float("nan"), float("nan")):  # the asynchronous phase a rollback condemns
        _step(hook, loss)
    assert math.isnan(hook.snapshot().loss)
    state.phase, state.phase_steps = 2, 0  # the fallback phase after the restore
    _step(hook, 0.5)
    _step(hook, 0.7)
    assert hook.snapshot().loss == 0.6
    first = [codec.to_dict(e)["first_step"]["phase"] for e in events if e.WhichOneof("kind") == "first_step"]
    assert first == [1, 2]


def test_a_pause_reports_the_phases_recent_loss_at_once():
    # The guard picks its repair from each worker's loss at the pause; the periodic reports may be a phase old.
    state = TrainState(total_samples=1000, worker=0)
    events = []
    hook = MetricsHook(state, loss=None, emit=events.append, interval_s=1e9)
    state.phase, state.phase_steps = 1, 0
    hook.at_pause()
    assert events == []  # no step in this phase yet: nothing of its own to report
    _step(hook, 2.0)
    _step(hook, 1.0)
    hook.at_pause()
    reports = [codec.to_dict(e)["metrics"] for e in events if e.WhichOneof("kind") == "metrics"]
    assert [(r["phase"], r["loss"]) for r in reports] == [(1, 1.5)]


def test_a_phases_first_step_is_out_of_its_times_and_its_first_windows_are_reported_as_they_fill():
    # A trial of a switch target is judged on a phase's first reports: they must hold steps, not the graph's entry,
    # and come as each window of steps fills rather than every half second.
    state = TrainState(total_samples=10**6, worker=0)
    events = []
    hook = MetricsHook(state, loss=None, emit=events.append, window=4, interval_s=1e9, batch_by_protocol={"asp": 8})
    state.phase, state.phase_steps, state.protocol = 1, 0, "asp"
    _step(hook, 1.0)
    assert hook.snapshot().step_time_s == 0.0 and hook.snapshot().examples_per_s == 0.0  # nothing timed yet
    assert hook.snapshot().loss == 1.0  # its loss counts
    for _ in range(15):
        _step(hook, 1.0)
    reports = [codec.to_dict(e)["metrics"] for e in events if e.WhichOneof("kind") == "metrics"]
    assert [r["local_steps"] for r in reports] == [5, 9, 13]  # each of the first three windows of 4, step 1 out
    assert all(r["examples_per_s"] > 0 for r in reports)
