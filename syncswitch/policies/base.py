"""Abstract bases for the policy kinds; optional hooks are no-ops so policies override only what they need."""

from __future__ import annotations

import abc
import dataclasses


@dataclasses.dataclass(frozen=True)
class PhaseConfig:
    """Hyperparameters one protocol phase runs with."""

    protocol: str
    per_worker_batch: int
    global_batch: int          # samples consumed by one model update
    learning_rate: float       # base rate before the workload-fraction decay
    momentum: float


class ConfigurationPolicy(abc.ABC):
    """Maps the user's hyperparameters to the configuration of a protocol phase (paper IV-C)."""

    @abc.abstractmethod
    def configure(self, protocol: str, hp, workers: int) -> PhaseConfig:
        """The configuration for `protocol` on `workers` workers given user hyperparameters `hp`."""

    def on_switch(self, previous: PhaseConfig, upcoming: PhaseConfig) -> PhaseConfig:
        """Adjust the upcoming phase's configuration at a switch; default keeps it."""
        return upcoming
