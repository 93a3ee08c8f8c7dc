"""Built-in configuration policies: the paper's linear scaling rule, and a fixed one for ablations."""

from __future__ import annotations

import dataclasses

from syncswitch.policies.base import ConfigurationPolicy, PhaseConfig
from syncswitch.registry import PROTOCOLS


def _group(protocol: str, workers: int) -> int:
    """Workers whose examples one update holds: n for a protocol that averages the group's work (BSP, local
    SGD's averaged copies, catalog trait `scales_batch`), else 1."""
    return workers if PROTOCOLS.get(protocol).scales_batch else 1


def _stale(protocol: str, workers: int) -> bool:
    """Whether a phase of `protocol` on `workers` applies stale gradients: any asynchronous protocol (ASP, the
    look-ahead, SSP, ...) on more than one worker. The rules below are written for ASP and hold for all of them.
    Local SGD averages its workers' copies and applies nothing stale: it is configured as BSP."""
    protocol = PROTOCOLS.get(protocol)
    return workers > 1 and not protocol.synchronous and not protocol.scales_batch


class PaperConfiguration(ConfigurationPolicy):
    """Paper IV-C: BSP uses global batch n*B and rate n*eta; ASP per-worker batch B and rate eta.

    Every worker computes on B examples in both protocols: under BSP the n gradients are
    aggregated into one update of n*B examples, so the linear scaling rule gives it n*eta.
    Momentum is unchanged across protocols (the paper's best variant, Fig. 8b).
    """

    def configure(self, protocol, hp, workers):
        n = _group(protocol, workers)
        return PhaseConfig(protocol, hp.batch_size, hp.batch_size * n, hp.learning_rate * n, hp.momentum)


class FixedConfiguration(ConfigurationPolicy):
    """No rescaling: the user's batch size and rate under every protocol (baseline for ablations)."""

    def configure(self, protocol, hp, workers):
        n = _group(protocol, workers)
        return PhaseConfig(protocol, hp.batch_size, hp.batch_size * n, hp.learning_rate, hp.momentum)


class AsyncMomentumConfiguration(PaperConfiguration):
    """The paper's rule, with ASP's explicit momentum lowered by the momentum asynchrony adds.

    With n asynchronous workers, stale updates act like extra momentum of about 1 - 1/n
    (Mitliagkas et al., "Asynchrony begets momentum", 2016); on top of the user's 0.9 the sum can
    overshoot. ASP gets max(0, m - (1 - 1/n)) so the total stays near the user's m.
    """

    def configure(self, protocol, hp, workers):
        config = super().configure(protocol, hp, workers)
        if not _stale(protocol, workers):
            return config
        implicit = 1.0 - 1.0 / workers
        return dataclasses.replace(config, momentum=max(0.0, hp.momentum - implicit))


class MomentumRampConfiguration(PaperConfiguration):
    """The paper's rule, with ASP's momentum ramped up from 0 by 1/n per epoch (paper Fig. 8, iv).

    Stale gradients on n workers already carry momentum of their own; starting ASP at the user's
    full momentum can make the model diverge right after a BSP->ASP switch. The ramp reaches the
    user's m after m*n epochs, by when the learning rate has usually decayed.
    """

    def configure(self, protocol, hp, workers):
        config = super().configure(protocol, hp, workers)
        if not _stale(protocol, workers) or hp.momentum == 0:
            return config
        return dataclasses.replace(config, momentum_ramp_epochs=hp.momentum * workers)


class LrWarmupConfiguration(PaperConfiguration):
    """The paper's rule, with ASP's learning rate warmed up from 0 over one epoch after the switch.

    Right after a BSP->ASP switch the momentum buffer holds BSP's large aggregated steps and every
    worker starts pushing stale gradients at once; a short warm-up of the rate (Goyal et al. 2017
    warm up large-batch training the same way) lets the asynchronous dynamics settle first.
    """

    def configure(self, protocol, hp, workers):
        config = super().configure(protocol, hp, workers)
        if not _stale(protocol, workers):
            return config
        return dataclasses.replace(config, lr_warmup_epochs=1.0)


class CompensatedConfiguration(PaperConfiguration):
    """Momentum compensation with the effective step kept: ASP's momentum lowered by the implicit
    momentum of n stale workers (about 1 - 1/n), its rate raised so lr / (1 - momentum) stays the
    user's. The rate rises a lot (8.5x for m = 0.9 on 4 workers), so it warms up over one epoch."""

    def configure(self, protocol, hp, workers):
        config = super().configure(protocol, hp, workers)
        if not _stale(protocol, workers):
            return config
        momentum = max(0.0, hp.momentum - (1.0 - 1.0 / workers))
        rate = config.learning_rate * (1.0 - momentum) / (1.0 - hp.momentum)
        return dataclasses.replace(config, momentum=momentum, learning_rate=rate, lr_warmup_epochs=1.0)


def backed_off(config: PhaseConfig, user_rate: float, workers: int) -> PhaseConfig | None:
    """What a synchronous phase that diverged (a NaN or infinite loss) continues with after its rollback: its rate
    divided by sqrt(n), the square-root scaling rule (Krizhevsky 2014; Hoffer et al. 2017) where the linear rule
    gave n*eta, and never below the user's own rate eta; None where it already ran at eta (nothing of syncswitch's
    to take back). The linear rule needs a warm-up on some models (Goyal et al. 2017): a pre-norm Transformer
    trained at eta = 0.05 on one worker diverged at 2*eta on 2 and at 4*eta on 4, where a warm-up over an epoch did
    not save it and sqrt(n)*eta trained."""
    if config.learning_rate <= user_rate or workers <= 1:
        return None
    rate = max(user_rate, config.learning_rate / workers ** 0.5)
    return dataclasses.replace(config, learning_rate=rate)
