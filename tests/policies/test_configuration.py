"""Configuration policies: shared conformance for every registered one, and the paper's scaling rule."""

import dataclasses

import pytest

from syncswitch.policies import CONFIGURATION_POLICIES, PhaseConfig
from syncswitch.spec import Hyperparameters

HP = Hyperparameters(batch_size=32, learning_rate=0.05, momentum=0.9)


@pytest.mark.parametrize("name", CONFIGURATION_POLICIES.names())
@pytest.mark.parametrize("protocol", ["bsp", "asp", "lookahead", "ssp", "local-sgd"])
@pytest.mark.parametrize("workers", [1, 4, 16])
def test_conformance(name, protocol, workers):
    policy = CONFIGURATION_POLICIES.get(name)()
    config = policy.configure(protocol, HP, workers)
    assert isinstance(config, PhaseConfig) and config.protocol == protocol
    assert config.per_worker_batch >= 1 and config.learning_rate > 0 and 0 <= config.momentum < 1
    assert config.momentum_ramp_epochs >= 0 and config.lr_warmup_epochs >= 0
    assert config.global_batch == config.per_worker_batch * (workers if protocol in ("bsp", "local-sgd") else 1)
    assert policy.on_switch(config, config) == config  # the default hook keeps the configuration


def test_paper_rule():
    policy = CONFIGURATION_POLICIES.get("paper")()
    bsp = policy.configure("bsp", HP, 8)
    asp = policy.configure("asp", HP, 8)
    assert (bsp.global_batch, bsp.learning_rate, bsp.momentum) == (256, pytest.approx(0.4), 0.9)
    assert (asp.global_batch, asp.learning_rate, asp.momentum) == (32, 0.05, 0.9)
    assert bsp.per_worker_batch == asp.per_worker_batch == 32


@pytest.mark.parametrize("name", CONFIGURATION_POLICIES.names())
def test_local_sgd_is_configured_as_bsp(name):
    """Local SGD's copies are averaged, so an update holds the group's examples and nothing stale is applied:
    BSP's batch, rate and momentum under every policy (no asynchronous momentum rule touches it)."""
    policy = CONFIGURATION_POLICIES.get(name)()
    bsp, local = policy.configure("bsp", HP, 4), policy.configure("local-sgd", HP, 4)
    assert dataclasses.replace(local, protocol="bsp") == bsp


def test_unknown_policy_lists_valid_names():
    from syncswitch.errors import SpecError

    with pytest.raises(SpecError, match="valid: async-momentum, compensated, fixed, lr-warmup, momentum-ramp, paper"):
        CONFIGURATION_POLICIES.get("elastik")


def test_async_momentum_lowers_only_asp_momentum_by_the_implicit_part():
    from syncswitch.policies import CONFIGURATION_POLICIES
    from syncswitch.spec import Hyperparameters

    policy = CONFIGURATION_POLICIES.get("async-momentum")()
    hp = Hyperparameters(batch_size=32, learning_rate=0.02, momentum=0.9)
    bsp, asp = policy.configure("bsp", hp, 4), policy.configure("asp", hp, 4)
    assert (bsp.momentum, bsp.learning_rate, bsp.global_batch) == (0.9, 0.08, 128)
    assert asp.momentum == pytest.approx(0.9 - 0.75) and asp.learning_rate == 0.02
    assert policy.configure("asp", hp, 1).momentum == 0.9  # one worker: no staleness
    assert policy.configure("asp", Hyperparameters(32, 0.02, 0.5), 8).momentum == 0.0  # never negative


def test_momentum_ramp_ramps_only_asp_on_more_than_one_worker():
    policy = CONFIGURATION_POLICIES.get("momentum-ramp")()
    hp = Hyperparameters(batch_size=32, learning_rate=0.02, momentum=0.9)
    bsp, asp = policy.configure("bsp", hp, 4), policy.configure("asp", hp, 4)
    assert (bsp.momentum, bsp.momentum_ramp_epochs, bsp.learning_rate) == (0.9, 0.0, 0.08)
    # 1/n per epoch (paper Fig. 8 iv): 0.9 is reached after 0.9 * 4 epochs
    assert (asp.momentum, asp.momentum_ramp_epochs, asp.learning_rate) == (0.9, pytest.approx(3.6), 0.02)
    assert policy.configure("asp", hp, 1).momentum_ramp_epochs == 0.0
    assert policy.configure("asp", Hyperparameters(32, 0.02, 0.0), 4).momentum_ramp_epochs == 0.0


def test_lr_warmup_and_compensation_touch_asp_only():
    warm = CONFIGURATION_POLICIES.get("lr-warmup")()
    assert warm.configure("bsp", HP, 4).lr_warmup_epochs == 0.0
    assert warm.configure("asp", HP, 4).lr_warmup_epochs == 1.0
    comp = CONFIGURATION_POLICIES.get("compensated")()
    asp = comp.configure("asp", HP, 4)
    # momentum 0.9 less the implicit 0.75 of 4 stale workers; the step lr / (1 - momentum) kept
    assert asp.momentum == pytest.approx(0.15)
    assert asp.learning_rate / (1 - asp.momentum) == pytest.approx(HP.learning_rate / (1 - HP.momentum))
    assert comp.configure("bsp", HP, 4) == CONFIGURATION_POLICIES.get("paper")().configure("bsp", HP, 4)


@pytest.mark.parametrize("name", CONFIGURATION_POLICIES.names())
@pytest.mark.parametrize("protocol", ["lookahead", "ssp", "dc-asgd", "fasgd", "specsync"])
def test_every_asynchronous_protocol_is_configured_as_asp(name, protocol):
    # The rules are about stale gradients, which every asynchronous protocol applies: a policy chosen for a
    # job that switches into one (`lookahead`, `--switch-to asp`) must not silently do nothing. Local SGD applies
    # nothing stale and is configured as BSP (test_local_sgd_is_configured_as_bsp).
    policy = CONFIGURATION_POLICIES.get(name)()
    for workers in (1, 4):
        expected = policy.configure("asp", HP, workers)
        assert policy.configure(protocol, HP, workers) == dataclasses.replace(expected, protocol=protocol)
