"""Built-in configuration policies: the paper's linear scaling rule, and a fixed one for ablations."""

from __future__ import annotations

from syncswitch.policies.base import ConfigurationPolicy, PhaseConfig


class PaperConfiguration(ConfigurationPolicy):
    """Paper IV-C: BSP uses global batch n*B and rate n*eta; ASP per-worker batch B and rate eta.

    Every worker computes on B examples in both protocols: under BSP the n gradients are
    aggregated into one update of n*B examples, so the linear scaling rule gives it n*eta.
    Momentum is unchanged across protocols (the paper's best variant, Fig. 8b).
    """

    def configure(self, protocol, hp, workers):
        n = workers if protocol == "bsp" else 1
        return PhaseConfig(protocol, hp.batch_size, hp.batch_size * n, hp.learning_rate * n, hp.momentum)


class FixedConfiguration(ConfigurationPolicy):
    """No rescaling: the user's batch size and rate under every protocol (baseline for ablations)."""

    def configure(self, protocol, hp, workers):
        n = workers if protocol == "bsp" else 1
        return PhaseConfig(protocol, hp.batch_size, hp.batch_size * n, hp.learning_rate, hp.momentum)
