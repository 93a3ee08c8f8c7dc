"""Policy registries: configuration and straggler policies by name (timing policies as they land)."""

from syncswitch.policies.base import Action, ConfigurationPolicy, PhaseConfig, PolicyContext, StragglerPolicy
from syncswitch.policies.configuration import (AsyncMomentumConfiguration, FixedConfiguration,
                                                MomentumRampConfiguration, PaperConfiguration)
from syncswitch.policies.stragglers import ElasticPolicy, GreedyPolicy, NoStragglerPolicy
from syncswitch.registry import Registry

CONFIGURATION_POLICIES: Registry[type[ConfigurationPolicy]] = Registry("configuration policy")
CONFIGURATION_POLICIES.register("paper")(PaperConfiguration)
CONFIGURATION_POLICIES.register("fixed")(FixedConfiguration)
CONFIGURATION_POLICIES.register("async-momentum")(AsyncMomentumConfiguration)
CONFIGURATION_POLICIES.register("momentum-ramp")(MomentumRampConfiguration)

STRAGGLER_POLICIES: Registry[type[StragglerPolicy]] = Registry("straggler policy")
STRAGGLER_POLICIES.register("none")(NoStragglerPolicy)
STRAGGLER_POLICIES.register("greedy")(GreedyPolicy)
STRAGGLER_POLICIES.register("elastic")(ElasticPolicy)

__all__ = ["CONFIGURATION_POLICIES", "STRAGGLER_POLICIES", "Action", "ConfigurationPolicy", "PhaseConfig",
           "PolicyContext", "StragglerPolicy"]
