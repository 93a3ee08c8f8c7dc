"""The job spec as frozen dataclasses: what a job is, after validation."""

from __future__ import annotations

import dataclasses
import math

# The catalog's names (syncswitch/protocols/catalog.py; tests check they agree), for CLI choices.
PROTOCOLS = ("bsp", "asp", "ssp", "dc-asgd", "fasgd", "specsync", "lookahead", "local-sgd", "b-fasgd")
PHASE_HYPERPARAMETERS = ("learning_rate", "momentum")  # settable per phase, in place or by relaunch
SWITCH_MODES = ("in-place", "relaunch")
DEFAULT_SWITCH_AT = 0.25
# The protocol a switch point's schedule switches to (`policy.switch_to`) by default; not the paper's ASP, which
# lost the most accuracy at BSP-tuned hyperparameters. On up to LOOKAHEAD_MAX_WORKERS workers an asynchronous
# update lands about one update late, which the look-ahead cancels (bench/delay_sim.py): `lookahead` kept BSP's
# accuracy there. With more workers staleness grows past what it cancels (the 4-worker quickstart rolled back
# every run), and local SGD, which applies nothing stale, kept BSP's accuracy faster (bench/notebook/).
DEFAULT_SWITCH_TO = "local-sgd"
LOOKAHEAD_MAX_WORKERS = 2
# The default on small clusters, and greedy's interlude when the switch target blocks (a straggler would hold it
# as it holds BSP): the best protocol measured under which no worker waits for another.
NONBLOCKING_SWITCH_TO = "lookahead"


@dataclasses.dataclass(frozen=True)
class LrDecay:
    """The rate's multiplier over the workload (fractions): a linear warm-up from 0 over its first `warmup`, then
    step factors from each boundary on, or a cosine from 1 down to `cosine` over the rest (Loshchilov and Hutter's
    SGDR without restarts; Keras' CosineDecay with its warm-up). Every protocol's rate follows it, so it holds
    across a switch; the node's graph computes the same (node/schedule.py)."""

    boundaries: tuple[float, ...] = ()
    factors: tuple[float, ...] = ()
    warmup: float = 0.0
    cosine: float | None = None  # the factor the cosine ends at; None: no cosine

    def factor_at(self, fraction: float) -> float:
        out = 1.0
        if self.cosine is not None:
            done = min(max((fraction - self.warmup) / (1.0 - self.warmup), 0.0), 1.0)
            out = self.cosine + (1.0 - self.cosine) * 0.5 * (1.0 + math.cos(math.pi * done))
        for b, f in zip(self.boundaries, self.factors):
            if fraction >= b:
                out = f
        if self.warmup > 0.0 and fraction < self.warmup:
            out *= fraction / self.warmup
        return out


# hyperparameters.compression: the 16-bit types the all-reduce can send in (engines/compression.py), and `none`.
COMPRESSIONS = ("none", "fp16", "bf16")


@dataclasses.dataclass(frozen=True)
class Hyperparameters:
    batch_size: int
    learning_rate: float
    momentum: float = 0.9
    lr_decay: LrDecay = LrDecay()
    clip_norm: float | None = None  # every update's gradients clipped to this global L2 norm (engines/clipping.py)
    compression: str | None = None  # the all-reduce's wire type: fp16 | bf16 (engines/compression.py); None: float32


@dataclasses.dataclass(frozen=True)
class Phase:
    protocol: str
    until: float  # end of the phase as a fraction of the workload; 1.0 for the last
    params: tuple[tuple[str, object], ...] = ()  # the protocol's parameters, defaults filled in, sorted by name
    # (name, value) pairs that override what the configuration policy gives this phase
    hyperparameters: tuple[tuple[str, float], ...] = ()

    @property
    def param_dict(self) -> dict:
        return dict(self.params)


GUARD_ACTIONS = ("auto", "rollback", "fall-back")  # what a degradation verdict does (GuardSettings.action says why)


# `policy.switch_at: auto`: the switch rule alone decides, from this earliest point on (the loss needs some history).
AUTO_SWITCH_EARLIEST = 0.1
DEFAULT_SWITCH_RULE = "loss"


@dataclasses.dataclass(frozen=True)
class SwitchRuleSpec:
    """`policy.switch_rule`: which rule times a scheduled switch out of BSP, and its thresholds (None: the rule's
    default). The schedule's boundary is the earliest point; `auto` records a `switch_at: auto`."""

    rule: str = DEFAULT_SWITCH_RULE
    min_drop: float | None = None
    max_rate: float | None = None
    window: float | None = None
    latest: float | None = None
    auto: bool = False


DEFAULT_SWITCH_SPEED = "measured"


@dataclasses.dataclass(frozen=True)
class SwitchSpeedSpec:
    """`policy.switch_speed`: which rule judges whether a switch out of BSP buys time, and its thresholds (None: the
    rule's default). `known` holds the switch targets' speeds from earlier runs of the job (the policy store):
    (target, throughput as a share of BSP's, runs) each; `known_pause_s` the median pause out of BSP they measured."""

    rule: str = DEFAULT_SWITCH_SPEED
    margin: float | None = None
    trial_reports: int | None = None
    known: tuple[tuple[str, float, int], ...] = ()
    known_pause_s: float | None = None


@dataclasses.dataclass(frozen=True)
class GuardSpec:
    """`policy.guard`: the accuracy guard's switch and thresholds; None leaves a threshold at the guard's default."""

    enabled: bool = True
    loss_rule: bool | None = None
    loss_rise: float | None = None
    loss_margin: float | None = None
    accuracy_drop: float | None = None
    accuracy_noise: float | None = None
    window: float | None = None
    long_window: float | None = None
    smoothing: float | None = None
    max_rollbacks: int | None = None
    action: str | None = None
    forecast: bool | None = None
    accuracy_forecast: bool | None = None
    # (fraction, accuracy) of earlier runs' evaluations (policy.guard.reference): the accuracy to keep up with
    reference: tuple[tuple[float, float], ...] = ()


@dataclasses.dataclass(frozen=True)
class PolicySpec:
    schedule: tuple[Phase, ...]
    switch_mode: str = "in-place"
    configuration: str = "paper"
    source: str = "spec"  # where the schedule came from: spec | default | store | cli
    guard: GuardSpec = GuardSpec()
    fallback: tuple[str, ...] = ("bsp",)  # protocols a rollback continues with, one rung per rollback
    # What `policy.switch_at`, the default schedule and a moved switch point (search, experiments) switch to;
    # the policy section fills in the protocol's parameters.
    switch_to: Phase = Phase(DEFAULT_SWITCH_TO, 1.0)
    switch_rule: SwitchRuleSpec = SwitchRuleSpec()
    switch_speed: SwitchSpeedSpec = SwitchSpeedSpec()


PER_NODE = "per-node"


@dataclasses.dataclass(frozen=True)
class ClusterSpec:
    backend: str
    workers: int
    options: dict = dataclasses.field(default_factory=dict)
    # How many PS tasks hold the variables, on nodes 0..n-1; 0 means one per node (the paper's layout).
    parameter_servers: int = 0

    @property
    def ps_tasks(self) -> int:
        """The number of PS tasks the job runs."""
        return self.parameter_servers or self.workers


@dataclasses.dataclass(frozen=True)
class WorkloadSpec:
    epochs: float | None = None
    samples: int | None = None


# evaluation.live: which checkpoints the evaluator scores while training runs (cluster_manager/evaluation.py)
EVALUATION_LIVE = ("auto", "all", "watched")


@dataclasses.dataclass(frozen=True)
class EvaluationSpec:
    """`evaluation`. `live`: "all" scores every checkpoint while training runs; "watched" only those the guard
    acts on (phases it watches), the others once training has paused or ended, each still timed at its own
    checkpoint; "auto" is "watched" where the evaluator shares the training nodes' machine (the local backend),
    else "all"."""

    every: float = 0.05
    target_accuracy: float | None = None
    batch_size: int = 500
    live: str = "auto"


@dataclasses.dataclass(frozen=True)
class CheckpointSpec:
    """`checkpoint`: durable checkpoints a lost node or manager restarts from.

    `every` is a fraction of the workload (None: the evaluation points, whose checkpoints are then the
    durable ones), `every_s` adds one at least that often in wall-clock seconds, `keep` bounds how many
    periodic checkpoints stay on disk (None: all; switch and final checkpoints are never rotated). `dir` is a
    folder every node sees at the same path (a shared mount); None: the run folder's checkpoints/ where the
    nodes share it, else the chief's own disk.
    """

    every: float | None = None
    every_s: float | None = None
    keep: int | None = None
    dir: str | None = None


@dataclasses.dataclass(frozen=True)
class RecoverySpec:
    """`recovery`: what the manager does when a node's task, its agent or its host dies."""

    max_restarts: int = 3           # recoveries per run; one more loss ends the run `failed`
    on_worker_loss: str = "restore"  # restore: every node from the last durable checkpoint; continue: ASP goes on
    step_timeout_s: float = 60.0    # a training step's deadline, at least (more where the phase's steps are slow)
    silence_s: float = 180.0        # a node heard from by nothing this long, while others go on, is lost


@dataclasses.dataclass(frozen=True)
class Injection:
    """Slow `worker` down for `duration_s` seconds from fraction `at` of the workload: by `delay_ms` per
    step (method delay), or by dividing its node's CPU budget by `slowdown` (method cpu).

    Starts are fractions and durations seconds, so the spec cannot rule out that two slowdowns of
    one worker overlap in time; the injector starts one that comes due while the same worker is
    still slowed when that slowdown ends.
    """

    worker: int
    at: float
    duration_s: float
    delay_ms: float = 0.0
    slowdown: float = 1.0


@dataclasses.dataclass(frozen=True)
class StragglerSpec:
    """The `stragglers` section: how to react to stragglers, how to detect them, what to inject."""

    policy: str = "none"
    # Detection settings; None leaves the detector's default (syncswitch/policies/detection.py).
    window_s: float | None = None
    consecutive: int | None = None
    method: str = "delay"       # delay: per-step sleep; cpu: the node's CPU budget divided; netem: network delay
    injections: tuple[Injection, ...] = ()  # ordered by start
    min_gap: float | None = None


@dataclasses.dataclass(frozen=True)
class JobSpec:
    name: str
    script: str  # absolute path
    workdir: str | None  # the folder shipped with the script (absolute), None: the script alone
    workdir_given: bool  # named in the spec (its bundle must fit), or the script's folder by default
    params: dict
    hyperparameters: Hyperparameters
    workload: WorkloadSpec
    cluster: ClusterSpec
    policy: PolicySpec
    evaluation: EvaluationSpec
    seed: int
    path: str  # the spec file, absolute
    raw: dict  # the validated document after overrides, for the summary and signatures
    stragglers: StragglerSpec = StragglerSpec()
    checkpoint: CheckpointSpec = CheckpointSpec()
    recovery: RecoverySpec = RecoverySpec()

    def with_policy(self, policy: PolicySpec) -> "JobSpec":
        return dataclasses.replace(self, policy=policy)
