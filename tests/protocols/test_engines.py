"""Each protocol engine's arithmetic against a numpy reference, in one local TF session.

Another worker's interference is made deterministic: an op that moves the weights by `delta` and the
global step by `k` runs after this step's reads and before its gradient is ready, exactly as an
asynchronous peer's update lands between a worker's pull and its push.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
tf = pytest.importorskip("tensorflow")
v1 = tf.compat.v1

from syncswitch.protocols.engines import ENGINES, CountingOptimizer, StalenessMeter, build_engines  # noqa: E402
from syncswitch.protocols.engines.dcasgd import compensate  # noqa: E402
from syncswitch.protocols.engines.fasgd import staleness_scale  # noqa: E402
from syncswitch.protocols.engines.lookahead import ADAPT_EVERY, lookahead_factor, lookahead_update  # noqa: E402
from syncswitch.protocols.engines.specsync import LOG_SIZE, pushes_in_window, should_abort  # noqa: E402
from syncswitch.protocols.engines.ssp import must_wait  # noqa: E402
from syncswitch.protocols.speculation import tune  # noqa: E402

W0 = np.array([1.0, -2.0, 0.5], np.float32)
G = np.array([0.3, -0.2, 0.1], np.float32)
DELTA = np.array([0.05, 0.1, -0.2], np.float32)
LR = 0.1
BATCH = 8


class Rig:
    """One weight vector, a fed gradient, and one protocol's engine; `interfere(k)` arms a peer's update."""

    def __init__(self, protocol: str, workers: int = 4, task_index: int = 0, momentum: float = 0.0,
                 resource: bool = True, dtype=tf.float32, clip_norm=None):
        self.graph = tf.Graph()
        with self.graph.as_default():
            self.global_step = v1.train.get_or_create_global_step()
            self.samples = v1.get_variable("samples", [], tf.int64, v1.zeros_initializer(), trainable=False)
            self.w = v1.get_variable("w", initializer=W0.astype(dtype.as_numpy_dtype), use_resource=resource)
            self.g_in = v1.placeholder(dtype, [3])
            self.k_in = v1.placeholder(tf.int64, [])
            grad = tf.identity(self.g_in)
            optimizer = self.optimizer = v1.train.MomentumOptimizer(LR, tf.constant(momentum))
            engines = build_engines([protocol], optimizer, [(grad, self.w)], self.global_step, self.samples,
                                    {protocol: BATCH}, workers, task_index == 0, task_index=task_index,
                                    clip_norm=clip_norm)
            self.engine = engines[protocol]
            # The peer's update lands after this step's reads and before its gradient exists.
            reads = [self.engine.meter.step_at_read] if self.engine.meter is not None else []
            reads += getattr(self.engine, "reads", [])
            with tf.control_dependencies(reads):
                self.peer = tf.group(self.w.assign_add(DELTA.astype(dtype.as_numpy_dtype)
                                                       * tf.cast(tf.minimum(self.k_in, 1), dtype)),
                                     self.global_step.assign_add(self.k_in))
            grad.op._add_control_input(self.peer)
            self.init = v1.global_variables_initializer()
        self.session = v1.Session(graph=self.graph)
        self.session.run(self.init)

    def enter(self, **params):
        self.engine.enter_chief(self.session, params)
        self.engine.enter_worker(self.session, params)

    def step(self, k: int = 0, g=G):
        """One step with `k` peer updates in between; the weights and sample count after it."""
        self.session.run([self.engine.train_op, self.engine.samples_after], {self.g_in: g, self.k_in: k})
        return self.session.run([self.w, self.samples, self.global_step])


def test_every_catalog_protocol_has_an_engine():
    from syncswitch.registry import PROTOCOLS
    from syncswitch.spec import model

    assert sorted(ENGINES) == PROTOCOLS.names() == sorted(model.PROTOCOLS)


@pytest.mark.parametrize("adaptive", [False, True])
def test_dc_asgd_compensates_the_delay(adaptive):
    rig = Rig("dc-asgd")
    rig.enter(**{"lambda": 2.0, "adaptive": adaptive, "decay": 0.9})
    w, samples, step = rig.step(k=3)
    w_read, w_now = W0, W0 + DELTA
    ms = 0.1 * G * G if adaptive else None
    expected = w_now - LR * compensate(G, w_now, w_read, 2.0, ms)
    np.testing.assert_allclose(w, expected, rtol=1e-5)
    assert samples == BATCH and step == 4
    assert not np.allclose(expected, w_now - LR * G)  # the compensation term is really there
    assert rig.engine.stats(rig.session)["staleness_mean"] == 3.0


def test_dc_asgd_without_delay_is_plain_sgd():
    rig = Rig("dc-asgd")
    rig.enter(**{"lambda": 2.0, "adaptive": False, "decay": 0.95})
    w, _, _ = rig.step(k=0)
    np.testing.assert_allclose(w, W0 - LR * G, rtol=1e-6)


@pytest.mark.parametrize("k,power", [(0, 1.0), (1, 1.0), (4, 1.0), (4, 0.5), (3, 2.0)])
def test_fasgd_divides_the_rate_by_the_staleness(k, power):
    rig = Rig("fasgd")
    rig.enter(power=power)
    w, samples, _ = rig.step(k=k)
    w_now = W0 + (DELTA if k else 0)
    np.testing.assert_allclose(w, w_now - LR * G / max(1, k) ** power, rtol=1e-5)
    assert staleness_scale(k, power) == pytest.approx(1 / max(1, k) ** power)
    assert samples == BATCH
    assert rig.engine.stats(rig.session) == {"staleness_mean": float(k), "updates": 1}


@pytest.mark.parametrize("k,applied", [(1, True), (2, True), (3, False)])
def test_specsync_drops_a_gradient_that_missed_too_many_updates(k, applied):
    rig = Rig("specsync", workers=4)
    rig.enter(abort_rate=0.5)  # more than 0.5 * 4 = 2 fresh updates: abort
    w, samples, step = rig.step(k=k)
    w_now = W0 + DELTA
    assert should_abort(k, 0.5, 4) is not applied
    if applied:
        np.testing.assert_allclose(w, w_now - LR * G, rtol=1e-6)
        assert samples == BATCH and step == k + 1
    else:
        np.testing.assert_allclose(w, w_now, rtol=1e-6)
        assert samples == 0 and step == k
    assert rig.engine.stats(rig.session)["aborted_steps"] == (0 if applied else 1)


def _fill_log(rig, rows):
    """Write (read, push, worker) rows into the parameter servers' push log, the rest zero."""
    log = np.zeros((LOG_SIZE, 3))
    log[:len(rows)] = rows
    with rig.graph.as_default():
        rig.session.run(rig.engine.log.assign(log))
    return log


@pytest.mark.parametrize("others,applied", [(2, True), (3, False)])
def test_specsync_counts_only_other_workers_pushes_in_the_speculation_period(others, applied):
    import time

    rig = Rig("specsync", workers=4)
    rig.enter(abort_rate=0.5, abort_time=5.0)  # more than 2 pushes by others in the first 5 s after the read
    now = time.time()
    rows = [(now - 1, now + 2.0, w) for w in (1, 2, 3)[:others]]
    rows += [(now - 1, now + 2.0, 0),  # this worker's own push does not count
             (now - 9, now - 8.0, 1),  # landed before the read
             (now + 50, now + 60.0, 2)]  # beyond the period
    log = _fill_log(rig, rows)
    w, samples, _ = rig.step(k=0)  # the global-step count (0 fresh) is not what decides here
    assert pushes_in_window(log, now, 5.0, worker=0) == others
    if applied:
        np.testing.assert_allclose(w, W0 - LR * G, rtol=1e-6)
        assert samples == BATCH
        entry = rig.session.run(rig.engine.log)[1 % LOG_SIZE]  # the slot of global step 1
        assert entry[2] == 0 and now - 5 < entry[0] <= entry[1] < now + 5
    else:
        np.testing.assert_allclose(w, W0, rtol=1e-6)
        assert samples == 0
    assert rig.engine.stats(rig.session)["aborted_steps"] == (0 if applied else 1)


def test_specsync_adaptive_sets_the_papers_parameters_from_the_log():
    import time

    rig = Rig("specsync", workers=3)
    rig.enter(abort_rate=0.5, adaptive=True)
    t0 = time.time() - 20  # a past epoch: worker 0 reads every second, workers 1 and 2 push right after
    rows = [(t0 + k - 1.0, t0 + k, 0) for k in range(1, 7)]
    rows += [(t0 + k - 0.9, t0 + k + 0.10, 1) for k in range(7)]
    rows += [(t0 + k - 0.85, t0 + k + 0.15, 2) for k in range(-1, 7)]
    log = _fill_log(rig, rows)
    expected = tune(log[:len(rows), 2], log[:len(rows), 0], log[:len(rows), 1], 3)
    result = rig.engine.retune(rig.session)
    assert result == expected and result.abort_time_s == pytest.approx(0.15, abs=1e-6)
    threshold, period = rig.session.run([rig.engine.threshold, rig.engine.abort_time])
    assert period == pytest.approx(0.15, abs=1e-6) and threshold == pytest.approx(result.abort_rate * 3, rel=1e-5)
    stats = rig.engine.stats(rig.session)
    assert stats["tunes"] == 1 and stats["abort_time_s"] == pytest.approx(0.15, abs=1e-5)
    assert stats["abort_rate"] == pytest.approx(0.1, rel=1e-4)
    assert rig.engine.retune(rig.session) is None  # nothing logged since: the epoch stays open


def test_specsync_adaptive_that_finds_no_gain_never_aborts():
    import time

    rig = Rig("specsync", workers=3)
    rig.enter(abort_rate=0.5, adaptive=True)
    t0 = time.time() - 20
    _fill_log(rig, [(t0 + k, t0 + k + 1.0, i) for i in range(3) for k in range(6)])  # lockstep: no gain
    assert rig.engine.retune(rig.session).abort_time_s == 0.0
    w, _, _ = rig.step(k=3)  # 3 fresh updates would abort at the fixed rate (> 1.5)
    np.testing.assert_allclose(w, W0 + DELTA - LR * G, rtol=1e-6)
    stats = rig.engine.stats(rig.session)
    assert stats["aborted_steps"] == 0 and stats["abort_rate"] is None and stats["tunes"] == 1


def test_asp_measures_staleness_and_applies_plainly():
    rig = Rig("asp")
    rig.enter()
    w, samples, _ = rig.step(k=2)
    np.testing.assert_allclose(w, W0 + DELTA - LR * G, rtol=1e-6)
    assert samples == BATCH
    assert rig.engine.stats(rig.session)["staleness_mean"] == 2.0


@pytest.mark.parametrize("protocol", ["asp", "ssp", "dc-asgd", "lookahead"])
def test_staleness_never_counts_the_steps_own_update(protocol):
    # The global step's increment waits for the staleness read: unordered, a read after it saw its own step.
    rig = Rig(protocol, momentum=0.9)
    rig.enter()
    for _ in range(300):
        rig.session.run([rig.engine.train_op, rig.engine.samples_after], {rig.g_in: G, rig.k_in: 2})
    stats = rig.engine.stats(rig.session)
    assert (stats["staleness_mean"], stats["updates"]) == (2.0, 300)


# b-fasgd steps on a replica (no rig here); it, BSP and local SGD ran a float64 job end to end (notebook).
@pytest.mark.parametrize("protocol", ["asp", "ssp", "dc-asgd", "fasgd", "specsync", "lookahead"])
def test_a_float64_model_steps_as_a_float32_one(protocol):
    """A script may keep its data's float64: the rates, momentum and each protocol's own terms (DC-ASGD's mean
    squares, FASGD's scale, the look-ahead's rates) are float32 and were fed to float64 kernels unconverted, which
    failed the graph stage. Each step now lands where the float32 model's does."""
    steps = {}
    for dtype in (tf.float32, tf.float64):
        rig = Rig(protocol, momentum=0.9, dtype=dtype)
        rig.enter()
        steps[dtype] = [rig.step(k=k)[0] for k in (1, 0, 2)]
        assert rig.session.run(rig.w).dtype == dtype.as_numpy_dtype
    np.testing.assert_allclose(steps[tf.float64], steps[tf.float32], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("protocol", ["asp", "ssp", "dc-asgd", "fasgd", "specsync", "lookahead"])
def test_each_update_clips_the_workers_own_gradient_before_the_protocols_rule(protocol):
    """hyperparameters.clip_norm: an asynchronous update is one worker's gradient, clipped to the global norm before
    the protocol's own rule scales or compensates it (a clip after FASGD's scale would undo it). With peers landing
    in between, each step equals the unclipped engine's fed the clipped gradient; a gradient under the norm passes
    as it is."""
    clip = 0.1
    norm = float(np.linalg.norm(G))
    clipped_rig, fed_rig = Rig(protocol, momentum=0.9, clip_norm=clip), Rig(protocol, momentum=0.9)
    for rig in (clipped_rig, fed_rig):
        rig.enter()
    for k, scale in ((1, 1.0), (0, 3.0), (2, 0.1)):
        g = G * scale
        wanted = g * min(1.0, clip / (norm * scale))
        np.testing.assert_allclose(clipped_rig.step(k=k, g=g)[0], fed_rig.step(k=k, g=wanted)[0], rtol=1e-5,
                                   atol=1e-7)


V0 = np.array([0.4, 0.1, -0.3], np.float32)


@pytest.mark.parametrize("momentum,delay,resource", [(0.9, 1.0, True), (0.9, 1.7, True), (0.9, 3.0, True),
                                                     (0.5, 2.0, True), (0.0, 2.0, True), (0.9, 0.0, True),
                                                     (0.9, 1.7, False), (0.5, 2.0, False)])
def test_lookahead_applies_the_look_ahead_rule(momentum, delay, resource):
    # resource=False: a script's reference variables (use_resource=False) take the same rule.
    rig = Rig("lookahead", momentum=momentum, resource=resource)
    velocity = rig.optimizer.get_slot(rig.w, "momentum")
    with rig.graph.as_default():
        rig.session.run(velocity.assign(V0))
    rig.enter(delay=delay, adaptive=False)
    w, samples, step = rig.step(k=2)
    f = lookahead_factor(momentum, delay)
    expected_w, expected_v = lookahead_update(W0 + DELTA, V0, G, LR, momentum, f)
    np.testing.assert_allclose(w, expected_w, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(rig.session.run(velocity), expected_v, rtol=1e-5, atol=1e-7)
    assert samples == BATCH and step == 3
    assert rig.engine.stats(rig.session)["staleness_mean"] == 2.0


def test_lookahead_factor_is_the_momentum_carried_over_the_delay():
    assert lookahead_factor(0.9, 1) == pytest.approx(0.9)
    assert lookahead_factor(0.9, 3) == pytest.approx(0.9 + 0.81 + 0.729)
    assert lookahead_factor(0.0, 5) == 0.0 and lookahead_factor(0.9, 0) == 0.0
    assert lookahead_factor(1.0, 2.5) == 2.5


def test_lookahead_with_delay_one_is_nesterov_momentum():
    """f = m: the stored point is Nesterov's one-step look-ahead; TensorFlow's own Nesterov update agrees."""
    w, v = W0.copy(), V0.copy()
    nesterov_v = 0.9 * V0 + G
    nesterov_w = W0 - LR * (G + 0.9 * nesterov_v)
    w, v = lookahead_update(w, v, G, LR, 0.9, lookahead_factor(0.9, 1.0))
    np.testing.assert_allclose(w, nesterov_w, rtol=1e-6)
    np.testing.assert_allclose(v, nesterov_v, rtol=1e-6)


def test_lookahead_adapts_the_delay_to_the_measured_staleness():
    rig = Rig("lookahead", momentum=0.9, task_index=0)
    rig.enter(delay=1.0, adaptive=True)
    for _ in range(ADAPT_EVERY):
        rig.step(k=3)
        rig.engine.after_step(rig.session, _State())
    assert rig.engine.stats(rig.session)["lookahead_delay"] == 3.0
    other = Rig("lookahead", momentum=0.9, task_index=1)  # only the chief adapts
    other.enter(delay=1.0, adaptive=True)
    for _ in range(ADAPT_EVERY):
        other.step(k=3)
        other.engine.after_step(other.session, _State())
    assert other.engine.stats(other.session)["lookahead_delay"] == 1.0


@pytest.mark.parametrize("clocks,worker,s,wait", [
    ([3, 3, 3], 0, 0, False), ([4, 3, 3], 0, 0, True), ([4, 3, 3], 0, 1, False), ([6, 3, 5], 0, 2, True),
    ([6, 3, 5], 2, 2, False), ([2, 9, 2], 1, 6, True), ([2, 9, 2], 1, 7, False)])
def test_ssp_wait_rule(clocks, worker, s, wait):
    np_rule = clocks[worker] - np.min(clocks) > s
    assert must_wait(np.array(clocks), worker, s) is bool(np_rule) is wait


class _State:
    boundary = 1.0
    total = 10 ** 9


def test_ssp_ticks_this_workers_clock_and_holds_it_back():
    rig = Rig("ssp", workers=3, task_index=1)
    rig.enter(staleness=1)
    rig.step()
    assert list(rig.session.run(rig.engine.clocks)) == [0, 1, 0]
    assert rig.engine.after_step(rig.session, _State()) == 0.0  # 1 ahead, bound 1: goes on
    rig.step()
    assert list(rig.session.run(rig.engine.clocks)) == [0, 2, 0]
    state = _State()
    state.boundary = 0.0  # the phase already ended: a waiting worker returns for its boundary pause
    assert rig.engine.after_step(rig.session, state) >= 0.0
    rig.engine.release(rig.session)  # the chief's release frees waiters too
    assert rig.engine.after_step(rig.session, _State()) == 0.0


def test_bsp_backup_workers_set_the_aggregate():
    rig = Rig("bsp", workers=4)
    rig.engine.enter_chief(rig.session, {"aggregate": 3})
    assert rig.session.run(rig.engine.ps.aggregate) == 3
    rig.engine.enter_chief(rig.session, {"aggregate": 0})
    assert rig.session.run(rig.engine.ps.aggregate) == 0


def _train_state():
    from syncswitch.node.state import TrainState

    state = TrainState(10 ** 9, 0)
    state.boundary = 1.0
    return state


class _LocalRig:
    """The shared weights and `workers` local-sgd engines in one session, each worker with its replica of `w`
    (loss = g_i . copy, so worker i's gradient is always G_i)."""

    def __init__(self, workers: int = 2, momentum: float = 0.9, counter: bool = False, clip_norm=None):
        from syncswitch.node.replica import Replica
        from syncswitch.protocols.engines.base import localize

        self.graph = tf.Graph()
        self.grads = [G * (i + 1) for i in range(workers)]
        with self.graph.as_default():
            global_step = self.global_step = v1.train.get_or_create_global_step()
            self.samples = v1.get_variable("samples", [], tf.int64, v1.zeros_initializer(), trainable=False)
            self.w = v1.get_variable("w", initializer=W0)
            # A model's own integer counter, advanced by every step (`counter`).
            self.count = v1.get_variable("count", [], tf.int64, v1.zeros_initializer(), trainable=False)
            optimizer = self.optimizer = v1.train.MomentumOptimizer(LR, momentum)
            self.engines = []
            for i in range(workers):
                with v1.variable_scope(f"worker{i}"):
                    copy = v1.get_variable("copy", initializer=np.zeros(3, np.float32))
                    counted = v1.get_variable("count", [], tf.int64, v1.zeros_initializer(), trainable=False)
                    localize(self.graph, [copy, counted])
                    loss = tf.reduce_sum(copy * self.grads[i])
                    pairs = [(self.w, copy)]
                    if counter:
                        with tf.control_dependencies([counted.assign_add(1)]):
                            loss = tf.identity(loss)
                        pairs.append((self.count, counted))
                    replica = Replica(loss, pairs, [copy], device="")
                    engines = build_engines(["local-sgd"], optimizer, [(tf.zeros([3]), self.w)], global_step,
                                            self.samples, {"local-sgd": BATCH}, workers, i == 0, task_index=i,
                                            replica=replica, rates=(tf.constant(LR), tf.constant(momentum)),
                                            clip_norm=clip_norm)
                    self.engines.append(engines["local-sgd"])
            self.slot = optimizer.get_slot(self.w, "momentum")
            init = [v1.global_variables_initializer(), v1.local_variables_initializer()]
        self.session = v1.Session(graph=self.graph)
        self.session.run(init)

    def enter(self, **params):
        self.engines[0].enter_chief(self.session, params)
        for engine in self.engines:
            engine.enter_worker(self.session, params)

    def round(self, steps: int):
        """`steps` local steps on every worker, each worker in its own thread (the average is a barrier)."""
        import threading

        waits = {}

        def work(i, engine):
            state = _train_state()
            for _ in range(steps):
                # The loss too, as the task fetches it: the model's own update ops run before it.
                _, state.samples, _ = self.session.run([engine.train_op, engine.samples_after, engine.loss])
                waits[i] = engine.after_step(self.session, state)

        threads = [threading.Thread(target=work, args=(i, e)) for i, e in enumerate(self.engines)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in threads), "a worker stayed blocked in the average"
        return self.session.run([self.w, self.slot, self.samples])


def _assert_averaged(w, slot, grads, period: int) -> None:
    """numpy: each copy takes `period` momentum steps (0.9) from W0 with its own gradient; the shared weights and
    momentum are the copies' means."""
    copies, velocities = [], []
    for g in grads:
        x, v = W0.copy(), np.zeros(3, np.float32)
        for _ in range(period):
            v = 0.9 * v + g
            x = x - LR * v
        copies.append(x)
        velocities.append(v)
    np.testing.assert_allclose(w, np.mean(copies, 0), rtol=1e-5)
    np.testing.assert_allclose(slot, np.mean(velocities, 0), rtol=1e-5)


@pytest.mark.parametrize("period", [1, 2, 3])
def test_local_sgd_averages_the_copies_and_their_momentum(period):
    rig = _LocalRig(workers=2, momentum=0.9)
    rig.enter(period=period)
    w, slot, samples = rig.round(period)
    _assert_averaged(w, slot, rig.grads, period)
    assert samples == 2 * period * BATCH
    assert rig.session.run(rig.global_step) == period  # the chief counts the group's steps, as BSP does


def test_local_sgd_clips_each_local_steps_gradient():
    """A local step is one worker's update: its own gradient is clipped (worker 1's, 0.75 in norm, to 0.5; worker
    0's, 0.37, passes), then the copies are averaged as ever."""
    rig = _LocalRig(workers=2, momentum=0.9, clip_norm=0.5)
    rig.enter(period=2)
    w, slot, _ = rig.round(2)
    _assert_averaged(w, slot, [g * min(1.0, 0.5 / float(np.linalg.norm(g))) for g in rig.grads], 2)


def test_local_sgd_adds_up_an_integer_variables_changes():
    """A model's integer variable (a counter its own update op advances) gains every worker's steps, as on the
    parameter servers under any other protocol: its change divided by n was a float, and the graph failed."""
    plain, counting = _LocalRig(workers=2), _LocalRig(workers=2, counter=True)
    for rig in (plain, counting):
        rig.enter(period=2)
    for _ in range(2):
        w, _, _ = plain.round(2)
        w_counted, _, _ = counting.round(2)
    np.testing.assert_allclose(w_counted, w, rtol=1e-6)
    assert counting.session.run(counting.count) == 2 * 2 * 2  # 2 workers, 2 rounds of 2 steps


def test_local_sgd_averaged_every_step_is_bsp():
    """The momentum update is linear: averaging after every step is momentum SGD on the mean gradient."""
    rig = _LocalRig(workers=2, momentum=0.9)
    rig.enter(period=1)
    for _ in range(3):
        w, slot, _ = rig.round(1)
    x, v = W0.copy(), np.zeros(3, np.float32)
    for _ in range(3):
        v = 0.9 * v + np.mean(rig.grads, 0)
        x = x - LR * v
    np.testing.assert_allclose(w, x, rtol=1e-5)
    np.testing.assert_allclose(slot, v, rtol=1e-5)


def test_local_sgd_continues_the_shared_momentum_and_a_released_worker_goes_on_alone():
    rig = _LocalRig(workers=2, momentum=0.5)
    with rig.graph.as_default():
        rig.session.run(rig.slot.assign(DELTA))  # momentum left by the phase before
    rig.enter(period=1)
    lone = rig.engines[0]
    lone.release(rig.session)  # its peer stopped at a boundary: the average must not wait for it
    state = _train_state()
    rig.session.run(lone.train_op)
    assert lone.after_step(rig.session, state) < 30.0
    # The peer never pushed: the shared weights moved by this worker's half of the average.
    v = 0.5 * DELTA + rig.grads[0]
    np.testing.assert_allclose(rig.session.run(rig.w), W0 + (-LR * v) / 2, rtol=1e-5)
    assert state.samples == BATCH
    rig.engines[0].enter_chief(rig.session, {})  # the next entry drains what the release left
    assert sum(rig.session.run(lone._sizes)) == 0


def test_the_staleness_record_counts_peers_that_land_while_the_update_waits():
    # A peer's update counted after this step's gradient reached the servers, before this update: a quarter of a
    # real 4-worker ASP run's updates arrived while another was applied. Counted at arrival, the record missed them
    # (mean 1.50-1.64 where 1.70-1.82 updates landed between read and update: notebook 2026-11-27-simulator-6).
    graph = tf.Graph()
    with graph.as_default():
        global_step = v1.train.get_or_create_global_step()
        samples = v1.get_variable("samples", [], tf.int64, v1.zeros_initializer(), trainable=False)
        w = v1.get_variable("w", initializer=W0, use_resource=True)
        g_in, k_in = v1.placeholder(tf.float32, [3]), v1.placeholder(tf.int64, [])
        grad = tf.identity(g_in)
        meters = {kind: StalenessMeter(global_step, kind) for kind in ("arrival", "counted")}
        at_arrival = [m.at_apply([grad]) for m in meters.values()]
        with tf.control_dependencies(at_arrival):
            peer = global_step.assign_add(k_in)
        with tf.control_dependencies([peer]):
            late = tf.identity(grad)
        counting = CountingOptimizer(v1.train.GradientDescentOptimizer(LR), samples, BATCH, "t")
        update = counting.apply_gradients([(late, w)], global_step, after=at_arrival)
        train = tf.group(update, meters["arrival"].record(at_arrival[0]),
                         meters["counted"].record(at_arrival[1], counting.step_after))
        init = v1.global_variables_initializer()
    with v1.Session(graph=graph) as session:
        session.run(init)
        for m in meters.values():
            session.run(m.reset_op)
        for k in (2, 0, 1):
            session.run(train, {g_in: G, k_in: k})
        counts = {kind: session.run([m.total, m.count]) for kind, m in meters.items()}
    assert counts == {"arrival": [0, 3], "counted": [3, 3]}
