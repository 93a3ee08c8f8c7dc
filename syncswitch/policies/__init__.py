"""Policies by name: configuration and straggler policies, switch rules and speed rules register here into the
ground floor's registries when this package is imported (the spec looks them up there by name)."""

import syncswitch.protocols  # noqa: F401 - registers the protocols the configuration policies look up

from syncswitch.policies.base import Action, ConfigurationPolicy, PhaseConfig, PolicyContext, StragglerPolicy
from syncswitch.policies.configuration import (AsyncMomentumConfiguration, CompensatedConfiguration,
                                                FixedConfiguration, LrWarmupConfiguration,
                                                MomentumRampConfiguration, PaperConfiguration)
from syncswitch.policies.speed import IgnoreSpeed, MeasuredSpeed, SwitchSpeedPolicy
from syncswitch.policies.stragglers import ElasticPolicy, GreedyPolicy, NoStragglerPolicy
from syncswitch.policies.timing import FixedTiming, LossRegimeTiming, SwitchTimingPolicy, TimingDecision, TimingSettings
from syncswitch.registry import CONFIGURATION_POLICIES, STRAGGLER_POLICIES, SWITCH_RULES, SWITCH_SPEEDS

CONFIGURATION_POLICIES.register("paper")(PaperConfiguration)
CONFIGURATION_POLICIES.register("fixed")(FixedConfiguration)
CONFIGURATION_POLICIES.register("async-momentum")(AsyncMomentumConfiguration)
CONFIGURATION_POLICIES.register("momentum-ramp")(MomentumRampConfiguration)
CONFIGURATION_POLICIES.register("lr-warmup")(LrWarmupConfiguration)
CONFIGURATION_POLICIES.register("compensated")(CompensatedConfiguration)

STRAGGLER_POLICIES.register("none")(NoStragglerPolicy)
STRAGGLER_POLICIES.register("greedy")(GreedyPolicy)
STRAGGLER_POLICIES.register("elastic")(ElasticPolicy)

SWITCH_RULES.register("loss")(LossRegimeTiming)
SWITCH_RULES.register("fixed")(FixedTiming)

SWITCH_SPEEDS.register("measured")(MeasuredSpeed)
SWITCH_SPEEDS.register("off")(IgnoreSpeed)

__all__ = ["CONFIGURATION_POLICIES", "STRAGGLER_POLICIES", "SWITCH_RULES", "SWITCH_SPEEDS", "Action",
           "ConfigurationPolicy", "PhaseConfig", "PolicyContext", "StragglerPolicy", "SwitchSpeedPolicy",
           "SwitchTimingPolicy", "TimingDecision", "TimingSettings"]
