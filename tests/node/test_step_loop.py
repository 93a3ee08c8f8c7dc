"""The step runner's handling of a request gRPC delivered twice: retry where harmless, fall back otherwise."""

import pytest
import tensorflow as tf

from syncswitch.node.hooks.hook_list import HookList
from syncswitch.node.state import TrainState
from syncswitch.node.step_loop import StepRunner, _retry_duplicate
from syncswitch.protocols.engines.base import ProtocolEngine, StopFlag

v1 = tf.compat.v1


def _flaky(failures, message="The same RunGraph (Worker) request was received twice."):
    calls = []

    def fn():
        calls.append(1)
        if len(calls) <= failures:
            raise tf.errors.AbortedError(None, None, message)
        return "ran"

    return fn, calls


def test_a_duplicated_request_is_retried():
    fn, calls = _flaky(1)
    assert _retry_duplicate(fn) == "ran" and len(calls) == 2


def test_the_wait_falls_back_instead_of_taking_a_second_token():
    fn, calls = _flaky(1)
    assert _retry_duplicate(fn, fallback=lambda: "read") == "read" and len(calls) == 1


def test_other_aborts_and_repeated_duplicates_still_fail():
    fn, _ = _flaky(1, message="worker restarted")
    with pytest.raises(tf.errors.AbortedError):
        _retry_duplicate(fn)
    fn, calls = _flaky(5)
    with pytest.raises(tf.errors.AbortedError):
        _retry_duplicate(fn, attempts=3)
    assert len(calls) == 3


def test_asp_reads_the_global_count_periodically_and_always_near_a_boundary():
    from syncswitch.node.state import TrainState

    state = TrainState(total_samples=100_000, worker=0)
    state.boundary, state.stride = 0.5, 128
    assert not state.needs_exact_samples()  # far from the boundary, just read
    state.unread_steps = TrainState.READ_EVERY - 1
    assert state.needs_exact_samples()  # periodic read
    state.unread_steps = 0
    state.samples = 50_000 - 2 * TrainState.READ_EVERY * 128  # within reach of the boundary
    assert state.needs_exact_samples()
    state.samples, state.marks = 10_000, [0.11]  # an evaluation point within reach
    assert state.needs_exact_samples()
    state.stride = 0  # BSP, or not configured: every step
    state.marks = []
    assert state.needs_exact_samples()


def test_a_moved_boundary_waits_for_the_next_step_in_a_collective_phase():
    from syncswitch.node.state import TrainState

    state = TrainState(total_samples=1000, worker=1)
    state.boundary, state.samples = 1.0, 400
    state.move_boundary(0.3)  # no collective: at once, as the reader thread always did
    assert state.at_boundary()
    state.boundary, state.hold_boundary = 1.0, True
    state.move_boundary(0.3)  # between a collective step and the boundary check: not yet
    assert not state.at_boundary()
    state.take_moved_boundary()  # the loop, before its next step (where the group agrees on it)
    assert state.at_boundary() and state.boundary == 0.3
    state.boundary = 1.0
    state.take_moved_boundary()  # taken once
    assert state.boundary == 1.0


def test_a_steps_deadline_is_the_floor_or_twenty_times_the_protocols_slowest_recent_step():
    from syncswitch.node.step_loop import RECENT_STEPS, StepDeadline

    bsp, asp = object(), object()
    deadline = StepDeadline(30.0)
    assert deadline.seconds(bsp) == 30.0  # nothing measured yet: the floor
    for _ in range(10):
        deadline.took(0.05)
    deadline.took(2.5)  # a straggler's step
    assert deadline.seconds(bsp) == pytest.approx(50.0)
    assert deadline.options(bsp).timeout_in_ms == 50_000
    given = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    merged = deadline.options(bsp, given)
    assert merged.timeout_in_ms == 50_000 and merged.trace_level == given.trace_level and given.timeout_in_ms == 0
    for _ in range(RECENT_STEPS):
        deadline.took(0.05)
    assert deadline.seconds(bsp) == 30.0  # the slow step has left the recent ones
    deadline.took(5.0)
    assert deadline.seconds(asp) == 30.0  # another protocol: its own steps
    assert StepDeadline(0.0).options(bsp) is None and StepDeadline(0.0).options(bsp, given) is given


def _lockstep(states, moved_at, until, steps=20):
    """Workers stepping one collective together; worker i takes the moved boundary before its step moved_at[i].
    Returns the step after which each paused (None: it never did)."""
    paused = [None] * len(states)
    for step in range(steps):
        live = [i for i, p in enumerate(paused) if p is None]
        if not live:
            break
        for i in live:
            if step == moved_at[i]:
                states[i].move_boundary(until)
            states[i].take_moved_boundary()
        flags = [states[i].stop_flag() for i in live]
        if len(live) < len(states):  # a peer paused alone: this collective would never complete
            return paused
        for i in live:
            states[i].after_collective_step(states[i].samples + 128, agreed=any(flags))
            if states[i].at_boundary():
                paused[i] = step
    return paused


def test_a_collective_group_pauses_after_the_same_step_whoever_took_the_moved_boundary_first():
    """The manager's set_boundary reaches one worker a step before the other: both still pause together."""
    from syncswitch.node.state import TrainState

    for until_samples in (1000, 1024, 1100, 1152):  # inside the step that takes the first worker past it, or at it
        states = [TrainState(total_samples=10_000, worker=w) for w in range(2)]
        for state in states:
            state.boundary, state.hold_boundary, state.samples, state.step_samples = 1.0, True, 896, 128
        paused = _lockstep(states, moved_at=[0, 1], until=until_samples / 10_000)
        assert paused[0] is not None and paused[0] == paused[1], (until_samples, paused)
        assert states[0].samples == states[1].samples >= until_samples


def test_a_collective_step_past_the_boundary_unflagged_waits_one_step_for_the_group():
    """A wrong prediction (the step's samples differ from the last) never pauses one worker alone."""
    from syncswitch.node.state import TrainState

    states = [TrainState(total_samples=10_000, worker=w) for w in range(2)]
    for state in states:
        state.boundary, state.hold_boundary, state.samples, state.step_samples = 1.0, True, 896, 0  # no prediction
    paused = _lockstep(states, moved_at=[0, 1], until=0.1)
    assert paused == [1, 1]  # the step that crossed 1000 unflagged, then the next, agreed


class _RecordingSession(v1.Session):
    """A real session that records the signature (fed tensors) of each `run` call; a callable's calls do not go
    through `run`. TF registers a signature's graph partitions on every task at its first run."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.signatures = []

    def run(self, fetches, feed_dict=None, **kwargs):
        self.signatures.append(tuple(sorted(t.name for t in (feed_dict or {}))))
        return super().run(fetches, feed_dict=feed_dict, **kwargs)


class _FlaggedStep(ProtocolEngine):
    """A collective step's interface (stop flag in, agreed stop out) on a real graph, without the all-reduce: what
    the runner does with the flag does not depend on the collective (tests/protocols run the real ones)."""

    name = "flagged"

    def __init__(self, batch: int):
        samples = v1.get_variable("samples", [], tf.int64, v1.zeros_initializer(), trainable=False)
        self.stop = StopFlag("flagged")
        flag, lowered = self.stop.read()
        self._finish(tf.group(samples.assign_add(batch), lowered), samples.read_value())
        with tf.control_dependencies([self.train_op]):
            self.samples_after = samples.read_value()
            self.agreed_stop = flag > 0.5
        self.collective_wait_s = tf.constant(0.0)


def _flagged_session(total_samples: int, boundary: float):
    """(engine, session, state) on a fresh graph, left as its default graph: a flagged step of 128 samples."""
    engine = _FlaggedStep(batch=128)
    session = _RecordingSession(graph=tf.compat.v1.get_default_graph())
    session.run([v1.global_variables_initializer(), v1.local_variables_initializer()])
    state = TrainState(total_samples=total_samples, worker=0)
    state.boundary = boundary
    return engine, session, state


def test_the_step_that_reaches_the_boundary_runs_the_calls_the_warm_up_made():
    with tf.Graph().as_default():
        engine, session, state = _flagged_session(1024, 0.5)
        runner = StepRunner(session, HookList([]), state)
        runner.warm_up(engine)
        made = dict(runner._callables)
        session.run(v1.global_variables_initializer())  # as the chief's reset after the warm-up
        state.samples, session.signatures = 0, []
        agreed = []
        for _ in range(4):
            runner.step(engine)
            agreed.append(state.at_boundary())
        # The step that reaches the boundary raises the flag in a call of its own, then runs the step's own callable:
        # no signature the warm-up did not make (a fed flag made the whole step a second one, registered on every
        # task at its first run: about a second of start-up a collective engine on the synthetic ResNet).
        assert session.signatures == [] and runner._callables == made
        assert state.samples == 512 and agreed == [False, False, False, True]
        # The step lowered the flag after reading it: the next phase's steps are not agreed stops.
        state.boundary = 1.0
        runner.step(engine)
        assert not state.at_boundary() and session.run(engine.stop.read()[0]) == 0.0


def test_a_flag_raised_for_a_step_that_never_ran_is_lowered_by_the_warm_up():
    with tf.Graph().as_default():
        engine, session, state = _flagged_session(1024, 0.5)
        session.run(engine.stop.raise_op)
        StepRunner(session, HookList([]), state).warm_up(engine)
        flag = engine.stop.read()[0]
        assert session.run(flag) == 0.0


def test_a_step_that_runs_a_signature_for_the_first_time_is_left_out_of_the_step_times():
    """A protocol on standby (not warmed up) registers its signatures' graph partitions inside its first phase: the
    first call of each (a callable, and the flagged step's session.run) is not the protocol's speed, and a trial
    judged on it sent local SGD back at 0.54x BSP's throughput. Only repeated signatures are timed."""
    from syncswitch.node.hooks.metrics import MetricsHook

    with tf.Graph().as_default():
        engine, session, state = _flagged_session(2048, 0.25)
        state.phase, state.phase_steps, state.protocol = 1, 1, "flagged"
        hook = MetricsHook(state, loss=engine.samples_after, emit=lambda event: None, window=8, interval_s=1e9,
                           batch_by_protocol={"flagged": 128})
        runner = StepRunner(session, HookList([hook]), state)
        firsts = []
        for _ in range(4):
            runner.step(engine)
            firsts.append(state.first_call)
        # Step 1 makes the callable; steps 2-3 repeat it; step 4 reaches the boundary, raising the flag first: the
        # flag's call is new (one assign, but a first call all the same).
        assert firsts == [True, False, False, True]
        timed = [t for t, _ in hook.window]
        assert [t is None for t in timed] == [True, False, False, True]
        state.boundary = 0.5
        runner.step(engine)
        runner.step(engine)
        runner.step(engine)
        runner.step(engine)  # the flag raised again: a call already made
        assert not state.first_call and hook.window[-1][0] is not None
