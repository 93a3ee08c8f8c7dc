"""A lean hooked training step: SessionRunHooks around cached session callables, built ahead of any switch."""

from __future__ import annotations

import collections
import sys
import time

import tensorflow as tf

from syncswitch.errors import ClusterError
from syncswitch.node.updates import ancestors

v1 = tf.compat.v1
SLOWEST_TIMES = 20   # a step may take this many times the slowest of its phase's recent steps (or the floor)
RECENT_STEPS = 50    # how many of the phase's last steps that slowest one is taken from


def _leaves(structure) -> tuple:
    """Identity of a fetch structure, cheaply: tf.nest on every step costs more than the hooks."""
    if isinstance(structure, dict):
        return tuple((k, _leaves(v)) for k, v in sorted(structure.items(), key=lambda kv: str(kv[0])))
    if isinstance(structure, (list, tuple)):
        return tuple(_leaves(v) for v in structure)
    return id(structure)


def check_collective_call(fetches) -> None:
    """Refuse a call that holds a collective and runs ops on another task too.

    A call holding a collective takes its step id from the group's shared sequence (the same on every worker),
    so two workers' calls that also ran on a parameter server would share that id there: the first to finish
    cleans it up and aborts the other's step ("Cleanup <step id>"). Engines keep their collectives worker-local.
    """
    leaves = [leaf for leaf in tf.nest.flatten(fetches) if leaf is not None]
    ops = ancestors([leaf for leaf in leaves if hasattr(leaf, "op") or isinstance(leaf, tf.Operation)])
    collectives = [op for op in ops if op.type.startswith("Collective")]
    if not collectives:
        return
    here = tf.DeviceSpec.from_string(collectives[0].device)
    for op in ops:
        there = tf.DeviceSpec.from_string(op.device)
        if op.device and (there.job, there.task) != (here.job, here.task):
            raise ValueError(f"a call holding collective {collectives[0].name} also runs {op.name} on {op.device}: "
                             "a collective's call must run on its worker alone")


def _retry_duplicate(fn, attempts: int = 3, fallback=None):
    """Call `fn`, again if TF's transport delivered a request twice and the task refused the copy.

    Under heavy CPU contention the gRPC layer can resend a RunGraph request whose first copy is
    already running; the task then aborts the step ("received twice"). The first copy did its
    work, so running the step again is the same as a slightly longer step, not a failure.
    `fallback` replaces the retry where running twice would not be harmless (taking a second
    token from the BSP queue would starve another worker).
    """
    for attempt in range(attempts):
        try:
            return fn()
        except tf.errors.AbortedError as exc:
            if "received twice" not in str(exc) or attempt == attempts - 1:
                raise
            if fallback is not None:
                print("syncswitch: duplicated wait request; reading progress instead", file=sys.stderr)
                return fallback()
            print(f"syncswitch: step retried after a duplicated request ({attempt + 1})", file=sys.stderr)
    raise AssertionError("unreachable")


class StepDeadline:
    """How long one training step may take before it is given up: the floor (recovery.step_timeout_s), or 20 times
    the slowest of the protocol's last 50 steps where that is more.

    A step whose RunGraph request to a parameter server was lost never returns: TF refuses a request delivered
    twice (a gRPC retry under load) and the partition waiting for its tensors waits forever. The deadline turns
    that into a task error, which the manager's recovery handles. Generous, so a slow but healthy step never
    meets it: a protocol's first steps (nothing measured yet) and a step that waits for the chief's evaluation
    save get the floor, tens of seconds; a slowed phase (an injected straggler, BSP waiting for it) raises it.
    """

    def __init__(self, floor_s: float):
        self.floor_s = floor_s
        self._engine = None
        self._times: collections.deque[float] = collections.deque(maxlen=RECENT_STEPS)

    def seconds(self, engine) -> float | None:
        if self.floor_s <= 0:
            return None
        if engine is not self._engine:  # another protocol: its own step time
            self._engine = engine
            self._times.clear()
        return max(self.floor_s, SLOWEST_TIMES * max(self._times, default=0.0))

    def options(self, engine, given=None):
        """RunOptions with the step's deadline (a copy of the hooks' `given`, if any); None without a floor."""
        seconds = self.seconds(engine)
        if seconds is None:
            return given
        options = v1.RunOptions()
        if given is not None:
            options.CopyFrom(given)
        options.timeout_in_ms = int(seconds * 1000)
        return options

    def took(self, seconds: float) -> None:
        self._times.append(seconds)


class StepRunner:
    """Runs a protocol engine's step plus the hooks' fetches through session callables.

    MonitoredSession.run rebuilds the fetch structure in Python on every step, and the first run
    of a new signature registers fresh graph partitions on every task. Callables made once per
    protocol shrink the per-step Python work, and `warm_up()` pays the registration before training
    for every protocol the run starts in or surely enters, so such a switch does not (a target on
    standby pays it in its first steps, which `state.first_call` leaves out of the step times).

    The runner also reads the global sample counter with the step and, for a synchronous step, the wait
    for the group timed inside the graph (one call, see ProtocolEngine.step_op); both go to `state`
    before the hooks' `after_run`.
    """

    def __init__(self, session, hook, state, step_timeout_s: float = 0.0):
        self.session = session
        self.hook = hook
        self.state = state
        self.deadline = StepDeadline(step_timeout_s)
        self._callables: dict[tuple, object] = {}
        self._runs: set[tuple] = set()  # the signatures of session.run calls made (a feed makes one)

    def _callable(self, *fetches):
        key = _leaves(fetches)
        fn = self._callables.get(key)
        if fn is None:
            check_collective_call(fetches)
            fn = self.session.make_callable(list(fetches), accept_options=True)
            self._callables[key] = fn
            self.state.first_call = True
        return fn

    def _run(self, fetches, feed):
        """session.run, noting a signature's first call as `_callable` does."""
        key = (_leaves(fetches), _leaves(sorted(feed, key=id)))
        if key not in self._runs:
            self._runs.add(key)
            self.state.first_call = True
        return lambda options=None: self.session.run(fetches, feed_dict=feed, options=options)

    def _fn(self, engine, hook_fetches, exact: bool = True):
        if not exact:
            return self._callable(engine.train_op, hook_fetches)
        return self._callable(engine.train_op, engine.samples_after, hook_fetches)

    def warm_up(self, engine) -> None:
        """Run one step of `engine` through the callables training will use, hooks left out.

        Making a callable is lazy: the graph partitions are registered on every task at its first
        call, which costs up to a second on a busy machine. Paying that before training, for every
        protocol warmed up (control.warm_protocols), keeps it out of the switch. ASP's warm-up step does
        update the model: the chief resets the variables before training starts
        (`Task.reset_after_warm_up`); and every warm-up step draws a batch: each worker restarts its input
        after them (`PhaseControl.at_start`).
        """
        if hasattr(engine, "modes"):  # an engine with several paths: each one is warmed up
            for mode in engine.modes():
                # As the path's phase would run it: the hooks fetch the loss of the path that is active. The other
                # path's loss would put BSP's all-reduce into the parameter-server step's call, and a call holding
                # a collective takes its step id from the group's shared sequence (the same on every worker), so
                # two workers' steps would share an id on the parameter servers, where the first to finish cleans
                # the id up and aborts the other's step ("Cleanup <step id>").
                engine.active = mode
                self.warm_up(mode)
            engine.choose_path(None)
            return
        engine.before_warm_up(self.session)
        args = self.hook.before_run(v1.train.SessionRunContext(None, self.session))
        fetches = (args.fetches if args is not None else None) or {}
        if engine.step_op is not None:
            self._one_call(engine, fetches)()
            return
        if engine.agreed_stop is not None:
            self._agreed(engine, fetches)()
            self._warm_stop(engine.stop)
            return
        self._fn(engine, fetches)()
        if engine.averaging is not None:  # the step that ends in the group's average: every worker warms it up
            self._agreed(engine.averaging, fetches)()
            self._warm_stop(engine.averaging.stop)
        if engine.counts_every_step:  # only such an engine's steps may skip the counter read (see step())
            self._fn(engine, fetches, exact=False)()

    def _agreed(self, engine, hook_fetches):
        return self._callable(engine.train_op, engine.samples_after, engine.agreed_stop, engine.collective_wait_s,
                              hook_fetches)

    def _warm_stop(self, stop) -> None:
        """The first calls of raising and lowering a collective engine's stop flag (each one assign), paid before
        training as the step's is; lowered again, so the warm-up leaves it as the phase finds it."""
        self._callable(stop.raise_op)()
        self._callable(stop.lower_op)()

    def _collective_step(self, engine, args, fetches, options=None):
        """A step every worker takes together: (samples, seconds waited for the group, results). A worker past its
        boundary says so in the step, and the step the group agrees to stop after ends the phase on every worker."""
        if self.state.stop_flag():
            self._callable(engine.stop.raise_op)()  # read into the step's collective, lowered by the step
        if args is not None and args.feed_dict:  # feeds change per step, so they go through session.run
            fetched = [engine.train_op, engine.samples_after, engine.agreed_stop, engine.collective_wait_s, fetches]
            _, samples, stop, wait_s, results = self._run(fetched, args.feed_dict)(options=options)
        else:
            _, samples, stop, wait_s, results = self._agreed(engine, fetches)(options=options)
        self.state.after_collective_step(int(samples), bool(stop))
        return samples, float(wait_s or 0.0), results

    def _one_call(self, engine, hook_fetches):
        return self._callable(engine.step_op, engine.step_samples, engine.step_wait_s, hook_fetches)

    def _run_step(self, engine, args, fetches, options):
        """The step's call(s) under `options` (its deadline): (samples, seconds waited, results, exact count?)."""
        wait_s = 0.0
        exact = True
        feed = args.feed_dict if args is not None else None
        averaging = engine.averaging_step(self.state)
        if averaging is not None:
            samples, wait_s, results = self._collective_step(averaging, args, fetches, options)
        elif engine.step_op is not None:
            # Feeds go through the general path; a duplicated request must not take a second token.
            if feed:
                call = self._run([engine.step_op, engine.step_samples, engine.step_wait_s, fetches], feed)
                run = lambda: call(options=options)  # noqa: E731
            else:
                one = self._one_call(engine, fetches)
                run = lambda: one(options=options)  # noqa: E731
            _, samples, wait_s, results = _retry_duplicate(
                run, fallback=lambda: (None, self.session.run(engine.samples_now, options=options), 0.0, None))
            wait_s = float(wait_s)
        elif engine.agreed_stop is not None:
            samples, wait_s, results = self._collective_step(engine, args, fetches, options)
        elif feed:
            # Feeds change per step, so they go through the general path.
            _, samples, results = self._run([engine.train_op, engine.samples_after, fetches], feed)(options=options)
        else:
            exact = self.state.needs_exact_samples()
            first = self._fn(engine, fetches, exact)
            if not exact:
                # The counter lives on a parameter server: skip the read, estimate the count.
                _, results = _retry_duplicate(lambda: first(options=options))
                samples = self.state.samples + self.state.stride
            else:
                _, samples, results = _retry_duplicate(lambda: first(options=options))
        return samples, wait_s, results, exact

    def push_only(self, engine) -> None:
        """Hand this worker's gradient for the token it holds to the group, without waiting.

        A worker leaving the synchronous group mid-phase (elastic) owes the step it holds a token
        for: the chief may already be waiting for that gradient with the old group size.
        """
        if engine.push_op is None:
            return
        args = self.hook.before_run(v1.train.SessionRunContext(None, self.session))
        self._callable(engine.push_op, (args.fetches if args is not None else None) or {})()

    def step(self, engine) -> bool:
        """One hooked step; False once a hook asked to stop."""
        self.state.take_moved_boundary()
        context = v1.train.SessionRunContext(None, self.session)
        args = self.hook.before_run(context)
        fetches = (args.fetches if args is not None else None) or {}
        options = self.deadline.options(engine, args.options if args is not None else None)
        started = time.monotonic()
        self.state.first_call = False
        try:
            samples, wait_s, results, exact = self._run_step(engine, args, fetches, options)
        except tf.errors.DeadlineExceededError as exc:
            limit = options.timeout_in_ms / 1000 if options is not None else 0.0
            raise ClusterError(f"a {self.state.protocol} training step took over {limit:.0f} s "
                               "(recovery.step_timeout_s) and was given up: "
                               "a request to a parameter server or a peer never came back") from exc
        self.deadline.took(time.monotonic() - started)
        self.state.unread_steps = 0 if exact else self.state.unread_steps + 1
        self.state.samples = int(samples)
        self.state.last_wait_s = wait_s
        # A bounded-staleness protocol holds a worker that ran ahead here (SSP); that is waiting too.
        self.state.last_wait_s += engine.after_step(self.session, self.state)
        self.hook.after_run(context, v1.train.SessionRunValues(results, None, None))
        return not context.stop_requested
