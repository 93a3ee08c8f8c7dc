"""Policy registries: configuration (and, as they land, timing and straggler) policies by name."""

from syncswitch.policies.base import ConfigurationPolicy, PhaseConfig
from syncswitch.policies.configuration import FixedConfiguration, PaperConfiguration
from syncswitch.registry import Registry

CONFIGURATION_POLICIES: Registry[type[ConfigurationPolicy]] = Registry("configuration policy")
CONFIGURATION_POLICIES.register("paper")(PaperConfiguration)
CONFIGURATION_POLICIES.register("fixed")(FixedConfiguration)

__all__ = ["CONFIGURATION_POLICIES", "ConfigurationPolicy", "PhaseConfig"]
