"""Pauses training on a NaN or infinite loss; the task reports the divergence and waits for the manager."""

from __future__ import annotations

import math

import tensorflow as tf

from syncswitch.node.state import PauseRequest

v1 = tf.compat.v1


class DivergenceHook(v1.train.SessionRunHook):
    """Records a non-finite loss and asks the loop to pause; the later hooks skip the step."""

    def __init__(self, state, loss, losses=None):
        self.state = state
        self.loss = loss
        self.losses = losses or {}  # protocol -> its own loss (a local replica's), where not `loss`

    def before_run(self, run_context):
        return v1.train.SessionRunArgs(self.losses.get(self.state.protocol, self.loss))

    def after_run(self, run_context, run_values):
        loss = float(run_values.results)
        if not math.isfinite(loss):
            self.state.diverged_loss = loss
            self.state.pause_request = PauseRequest.DIVERGED
            run_context.request_stop()  # ends the HookList's walk, not training: the loop pauses
