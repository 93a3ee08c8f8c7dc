"""The learning rate and momentum a node's steps take: the workload's decay and the phase's ramps, as graph ops
computed from settings kept beside the sample counter."""

from __future__ import annotations

import dataclasses
import math

import tensorflow as tf

v1 = tf.compat.v1


@dataclasses.dataclass(kw_only=True)
class Schedule:
    """The learning rate and momentum as functions of the sample count, from settings kept beside the counter.

    `variables` (base rate, target momentum, ramp start, momentum ramp length, rate warm-up length) live on the
    parameter servers; an engine that steps on the worker reads them once into copies and calls `rates` with
    its own count, so its steps read nothing remote.
    """

    variables: list
    total: int
    boundaries: list
    factors: list
    warmup: float = 0.0             # the workload's warm-up (a fraction), not a phase's ramp (`warmup_len`)
    cosine: float | None = None     # the factor a cosine decay ends at; None: none

    def rates(self, samples, values=None):
        """(learning rate, momentum) at `samples`, from `values` (the settings, or copies of them)."""
        lr_base, momentum, ramp_start, ramp_len, warmup_len = values if values is not None else self.variables
        momentum_now = ramped(momentum, samples, ramp_start, ramp_len)
        progress = tf.cast(samples, tf.float32) / float(self.total)
        decayed = decayed_rate(lr_base, progress, self.boundaries, self.factors, self.warmup, self.cosine)
        rate = ramped(decayed, samples, ramp_start, warmup_len)
        return rate, momentum_now


@dataclasses.dataclass(kw_only=True)
class Settings:
    """The phase's configuration as variables beside the counter, and the ops the chief sets them with."""

    lr_base: tf.Variable
    momentum: tf.Variable       # the phase's target momentum
    learning_rate: tf.Tensor
    momentum_now: tf.Tensor     # what the optimizer uses this step: the target, or on its ramp
    set_lr: tf.Operation
    set_momentum: tf.Operation
    set_ramp: tf.Operation      # starts ramps of `ramp_in` (momentum) and `warmup_in` (rate) samples from now
    lr_in: tf.Tensor
    momentum_in: tf.Tensor
    ramp_in: tf.Tensor
    warmup_in: tf.Tensor
    schedule: Schedule


def decayed_rate(lr_base, progress, boundaries, factors, warmup: float = 0.0, cosine: float | None = None):
    """`lr_base` times the workload's factor at `progress` (spec.model.LrDecay.factor_at). Step factors: the one
    of the interval `progress` lies in, 1 up to the first boundary (included), as `piecewise_constant` gives it,
    picked by counting the boundaries passed: a handful of ops where piecewise_constant's case builds a cond per
    interval (21 ops for two boundaries, built 17x slower, and its switch and merge ops run at every step). A
    cosine from 1 to `cosine` after the warm-up; the warm-up from 0 over its first `warmup`."""
    rate = lr_base
    if cosine is not None:
        done = tf.clip_by_value((progress - warmup) / (1.0 - warmup), 0.0, 1.0)
        rate = rate * (cosine + (1.0 - cosine) * 0.5 * (1.0 + tf.cos(math.pi * done)))
    if boundaries:
        values = tf.constant([1.0] + [float(f) for f in factors], tf.float32)
        passed = tf.reduce_sum(tf.cast(progress > tf.constant([float(b) for b in boundaries], tf.float32), tf.int32))
        rate = rate * tf.gather(values, passed)
    if warmup > 0.0:
        rate = rate * tf.minimum(progress / warmup, 1.0)
    return rate


def ramped(target, samples, start, length):
    """`target` scaled by the share of a ramp of `length` samples done since `start`; no ramp when length is 0."""
    done = tf.cast(samples - start, tf.float32) / tf.maximum(length, 1.0)
    share = tf.where(length > 0.0, tf.clip_by_value(done, 0.0, 1.0), 1.0)
    return target * share


def build_settings(launch, total: int, samples) -> Settings:
    """The phase's configuration as variables beside the sample counter (built under the device setter, with
    the counter's colocation), and the rate and momentum they give."""
    first = launch.phases[launch.start_phase].config

    def variable(name, dtype, init=0.0):
        return v1.get_variable(name, [], dtype, v1.constant_initializer(init), trainable=False)

    lr_base = variable("lr_base", tf.float32, first.learning_rate)
    momentum = variable("momentum", tf.float32, first.momentum)
    # A phase may ramp its momentum up from 0 (paper Fig. 8): its start and length in samples live beside
    # the counter, so the ramp costs no extra hop and survives a relaunch.
    ramp_start = variable("momentum_ramp_start", tf.int64, 0)
    ramp_len = variable("momentum_ramp_samples", tf.float32)
    warmup_len = variable("lr_warmup_samples", tf.float32)
    schedule = Schedule(variables=[lr_base, momentum, ramp_start, ramp_len, warmup_len], total=total,
                        boundaries=[float(b) for b in launch.lr_decay.boundaries],
                        factors=[float(f) for f in launch.lr_decay.factors], warmup=float(launch.lr_decay.warmup),
                        cosine=float(launch.lr_decay.cosine_to) if launch.lr_decay.cosine else None)
    # The rate and momentum are computed where their inputs live and where the updates apply them: on the
    # worker, each step cost a read of every input from the parameter server and a send of the result back
    # (6 extra transfers, ~25% of a small model's ASP step).
    learning_rate, momentum_now = schedule.rates(samples)
    inputs = {name: v1.placeholder(tf.float32, [], name=name)
              for name in ("lr_in", "momentum_in", "momentum_ramp_in", "lr_warmup_in")}
    return Settings(
        lr_base=lr_base, momentum=momentum, learning_rate=learning_rate, momentum_now=momentum_now,
        set_lr=lr_base.assign(inputs["lr_in"]), set_momentum=momentum.assign(inputs["momentum_in"]),
        set_ramp=tf.group(ramp_len.assign(inputs["momentum_ramp_in"]), warmup_len.assign(inputs["lr_warmup_in"]),
                          ramp_start.assign(samples.read_value())),
        lr_in=inputs["lr_in"], momentum_in=inputs["momentum_in"], ramp_in=inputs["momentum_ramp_in"],
        warmup_in=inputs["lr_warmup_in"], schedule=schedule)
