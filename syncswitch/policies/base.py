"""Abstract bases for the policy kinds; optional hooks are no-ops so policies override only what they need."""

from __future__ import annotations

import abc
import dataclasses


def settings_from_spec(cls, spec):
    """A policy's settings dataclass `cls` from its spec section: the section's value for each field it gives
    (not None), the dataclass's default for the rest."""
    given = {f.name: getattr(spec, f.name) for f in dataclasses.fields(cls) if getattr(spec, f.name, None) is not None}
    return cls(**given)


@dataclasses.dataclass(frozen=True)
class PhaseConfig:
    """Hyperparameters one protocol phase runs with."""

    protocol: str
    per_worker_batch: int
    global_batch: int          # samples consumed by one model update
    learning_rate: float       # base rate before the workload-fraction decay
    momentum: float
    # Epochs over which momentum ramps linearly from 0 up to `momentum` after the phase starts
    # (paper Fig. 8 iii/iv); 0 starts the phase at `momentum`.
    momentum_ramp_epochs: float = 0.0
    # Epochs over which the learning rate ramps linearly from 0 up to its scheduled value after the
    # phase starts (a warm-up after a switch); 0 starts the phase at the full rate.
    lr_warmup_epochs: float = 0.0


class ConfigurationPolicy(abc.ABC):
    """Maps the user's hyperparameters to the configuration of a protocol phase (paper IV-C)."""

    @abc.abstractmethod
    def configure(self, protocol: str, hp, workers: int) -> PhaseConfig:
        """The configuration for `protocol` on `workers` workers given user hyperparameters `hp`."""

    def on_switch(self, previous: PhaseConfig, upcoming: PhaseConfig) -> PhaseConfig:
        """Adjust the upcoming phase's configuration at a switch; default keeps it."""
        return upcoming


@dataclasses.dataclass(frozen=True)
class PolicyContext:
    """What a straggler policy sees when the detector reports; it reflects the state after the event."""

    now_s: float
    protocol: str               # protocol now running: "bsp" or an asynchronous one (see `synchronous`)
    stragglers: frozenset       # workers currently detected (a cleared worker is no longer in it)
    idle: frozenset             # workers this policy removed from the sync group
    num_workers: int
    bsp_share_done: bool        # the schedule's BSP share is complete: ASP from here on is immune
    scheduled: str = "bsp"      # protocol the schedule calls for now; greedy returns to it
    switch_to: str = "asp"      # the asynchronous protocol a switch goes to (policy.switch_to): greedy's interlude
    # Each tracked worker's speed over the detector's last window (local steps per busy second); empty
    # before the first window. Under BSP a step waits for the slowest, so these predict the group's speed.
    rates: dict = dataclasses.field(default_factory=dict)
    # Whether `protocol` makes every update wait for the group (the catalog's trait, as the manager reads it): only
    # such a phase suffers from a straggler.
    synchronous: bool = False


ACTION_KINDS = ("switch", "shrink")


@dataclasses.dataclass(frozen=True)
class Action:
    """One thing a straggler policy asks the manager to do."""

    kind: str                       # "switch" | "shrink"
    protocol: str | None = None     # for switch: the protocol to switch to
    workers: tuple[int, ...] = ()   # for shrink
    reason: str = ""

    def __post_init__(self):
        if self.kind not in ACTION_KINDS:
            raise ValueError(f"Action.kind={self.kind!r}: must be one of {', '.join(ACTION_KINDS)}")
        if (self.kind == "switch") != (self.protocol is not None):
            raise ValueError(f"Action.protocol={self.protocol!r}: required for switch and only for switch")
        if (self.kind == "switch") == bool(self.workers):
            raise ValueError(f"Action.workers={self.workers!r}: required for shrink and only for it")


class StragglerPolicy(abc.ABC):
    """Reacts to straggler detections during the BSP share (paper IV-B2); hooks default to doing nothing.

    Policies are pure decisions: the manager applies the returned actions and passes the resulting
    state back in the next context, so a hook called again with the same context must not ask twice.
    """

    name: str = ""
    # What a run needs for this policy, checked when the spec is loaded: the detector's mean − std
    # test singles out a straggler only among 3 or more workers; switching protocols mid-phase needs
    # both update paths in one graph (an in-place switch mode).
    min_workers: int = 1
    switches_in_place: bool = False
    # Leaves workers out of the synchronous group mid-phase: BSP then aggregates on the parameter servers, since
    # an all-reduce waits for every worker.
    shrinks_group: bool = False

    def on_detected(self, worker: int, ctx: PolicyContext) -> list[Action]:
        """`worker` was just detected as a straggler."""
        return []

    def on_cleared(self, worker: int, ctx: PolicyContext) -> list[Action]:
        """`worker` is no longer a straggler."""
        return []


@dataclasses.dataclass(frozen=True)
class Verdict:
    """A guard's finding that the running phase degraded: roll back to a checkpoint at or before `onset`."""

    reason: str        # "loss" | "accuracy" | "diverged"
    fraction: float    # progress when the guard decided
    onset: float       # progress where the degradation began
    values: dict       # the metric values that triggered it


class GuardPolicy(abc.ABC):
    """Watches a run's phases for degradation (accuracy-safe switching); hooks default to finding nothing.

    The manager feeds it every phase start, training loss report and evaluation, each with its
    fraction of the workload, and rolls back when a hook returns a Verdict.
    """

    name: str = ""

    def on_phase(self, protocol: str, synchronous: bool, fraction: float) -> None:
        """A phase of `protocol` starts at `fraction` (after a switch, or after a rollback to there)."""

    def on_loss(self, fraction: float, loss: float) -> "Verdict | None":
        """A worker reported its recent training loss at `fraction`."""
        return None

    def on_evaluation(self, fraction: float, accuracy: float) -> "Verdict | None":
        """The evaluator scored the checkpoint written at `fraction`."""
        return None

    def on_divergence(self, fraction: float, loss: float) -> "Verdict | None":
        """A worker saw a non-finite loss."""
        return None
