"""A lean hooked training step: SessionRunHooks around cached session callables, built ahead of any switch."""

from __future__ import annotations

import tensorflow as tf

v1 = tf.compat.v1


def _name(x) -> str:
    return getattr(x, "name", None) or repr(x)


class StepRunner:
    """Runs `train_op` plus the hooks' fetches through one session callable per fetch signature.

    MonitoredSession.run rebuilds the fetch structure in Python on every step, and the first
    `session.run` of a new signature registers fresh graph partitions on every task. Callables
    made once per protocol remove both costs: the per-step Python work shrinks, and `prepare()`
    does the registration for every protocol before training starts, so a switch does not pay it.
    """

    def __init__(self, session, hook):
        self.session = session
        self.hook = hook
        self._callables: dict[tuple, object] = {}

    def _key(self, train_op, fetches) -> tuple:
        names = tf.nest.map_structure(_name, fetches) if fetches is not None else None
        return train_op.name, repr(names)

    def _callable(self, train_op, fetches):
        key = self._key(train_op, fetches)
        fn = self._callables.get(key)
        if fn is None:
            if fetches is None:
                run = self.session.make_callable(train_op)
                fn = lambda: (run(), None)  # noqa: E731
            else:
                fn = self.session.make_callable([train_op, fetches])
            self._callables[key] = fn
        return fn

    def prepare(self, train_op) -> None:
        """Build the callable `train_op` will use, as the hooks ask for it now, without running it."""
        args = self.hook.before_run(v1.train.SessionRunContext(None, self.session))
        if args is not None and not args.feed_dict:
            self._callable(train_op, args.fetches)

    def step(self, train_op) -> bool:
        """One hooked step; False once a hook asked to stop."""
        context = v1.train.SessionRunContext(None, self.session)
        args = self.hook.before_run(context)
        fetches = args.fetches if args is not None else None
        if args is not None and args.feed_dict:
            # Feeds change per step, so they go through the general path.
            _, results = self.session.run([train_op, fetches], feed_dict=args.feed_dict, options=args.options)
        else:
            _, results = self._callable(train_op, fetches)()
        self.hook.after_run(context, v1.train.SessionRunValues(results, None, None))
        return not context.stop_requested
