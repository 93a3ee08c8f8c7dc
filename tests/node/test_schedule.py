"""The rate and momentum schedule (node/schedule.py): the phase's ramps and the workload's decay, against the spec's
own arithmetic (spec.model.LrDecay, which the simulator uses)."""

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from syncswitch.node.schedule import decayed_rate, ramped  # noqa: E402
from syncswitch.spec.model import LrDecay  # noqa: E402


@pytest.mark.parametrize("samples, length, expected", [
    (100, 400.0, 0.0),     # the ramp starts at 0
    (300, 400.0, 0.45),    # half-way: half the target
    (500, 400.0, 0.9),     # done: the target
    (9000, 400.0, 0.9),    # and no further
    (300, 0.0, 0.9),       # no ramp: the target from the start
])
def test_ramped_momentum(samples, length, expected):
    value = ramped(tf.constant(0.9), tf.constant(samples, tf.int64), tf.constant(100, tf.int64),
                            tf.constant(length))
    assert float(value) == pytest.approx(expected)


@pytest.mark.parametrize("boundaries, factors", [([0.5, 0.75], [0.1, 0.01]), ([0.3], [0.5]),
                                                 ([0.2, 0.4, 0.9], [0.3, 0.07, 0.001])])
def test_decayed_rate_is_piecewise_constant(boundaries, factors):
    """The decay by counting the boundaries passed gives piecewise_constant's factor bit for bit, the boundary itself
    in the interval before it, at float32 progress values on and beside each boundary."""
    points = [0.0, 1.0, 1.5] + [p for b in boundaries
                                for p in (b, float(tf.experimental.numpy.nextafter(tf.constant(b, tf.float32), 2.0)),
                                          float(tf.experimental.numpy.nextafter(tf.constant(b, tf.float32), -1.0)))]
    values = [1.0] + factors
    for point in points:
        progress = tf.constant(point, tf.float32)
        factor = tf.compat.v1.train.piecewise_constant(progress, boundaries, values)  # eager: a callable
        expected = tf.constant(0.05) * factor()
        assert decayed_rate(tf.constant(0.05), progress, boundaries, factors).numpy() == expected.numpy(), point
    assert decayed_rate(tf.constant(0.05), tf.constant(0.9), [], []).numpy() == pytest.approx(0.05)


@pytest.mark.parametrize("decay", [LrDecay(warmup=0.1, cosine=0.0), LrDecay(warmup=0.0, cosine=0.05),
                                   LrDecay((0.5, 0.75), (0.1, 0.01), warmup=0.2), LrDecay(warmup=0.05)])
def test_the_warm_up_and_the_cosine_are_the_specs_factor(decay):
    """What a node's steps take (float32 graph ops) is the spec's factor, which the simulator and the reports use."""
    for point in np.linspace(0.0, 1.0, 41):
        if any(abs(point - b) < 1e-6 for b in decay.boundaries):
            continue  # the graph counts a boundary in the interval before it, the spec after
        rate = decayed_rate(tf.constant(0.2), tf.constant(point, tf.float32), list(decay.boundaries),
                            list(decay.factors), decay.warmup, decay.cosine)
        assert float(rate) == pytest.approx(0.2 * decay.factor_at(float(point)), rel=1e-5, abs=1e-7), point


def test_a_warm_up_starts_at_zero_and_a_cosine_ends_at_its_factor():
    decay = LrDecay(warmup=0.1, cosine=0.1)
    assert decay.factor_at(0.0) == 0.0
    assert decay.factor_at(0.05) == pytest.approx(0.5)
    assert decay.factor_at(0.1) == pytest.approx(1.0)
    assert decay.factor_at(0.55) == pytest.approx(0.55)  # half-way through the cosine: half-way down
    assert decay.factor_at(1.0) == pytest.approx(0.1)
