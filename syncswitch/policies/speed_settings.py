"""What the switch-speed rules (policies/speed.py) decide with and return: their decisions, the workers' report
cadence, the settings, what the run says about a switch's cost, earlier runs' measures, and a decision."""

from __future__ import annotations

import dataclasses

from syncswitch.policies.base import settings_from_spec

SWITCH, STAY, TRIAL, KEEP, BACK = "switch", "stay", "trial", "keep", "back"  # a rule's decisions
MEASURE = "measure"  # during a trial: the ratio is within the noise of the bar, the trial measures on

SLOWER = "slower"  # the guard's verdict reason for a trial whose target was not faster: back to the trial's start

# How the workers' metrics hooks report (cluster_manager/launch.py starts them with these): each of a phase's first
# windows of REPORT_WINDOW steps as it fills, and every REPORT_INTERVAL_S; a trial's length follows from them.
REPORT_WINDOW = 20
REPORT_INTERVAL_S = 0.5


def window_fraction(workers: int | None, per_worker_batch: int | None, total_samples: int | None) -> float:
    """The workload fraction one metrics window (REPORT_WINDOW steps of every worker) spans; 0.0 where a figure is
    unknown. The guard waits for it before judging a phase's loss (DegradationGuard.on_phase)."""
    if not (workers and per_worker_batch and total_samples):
        return 0.0
    return REPORT_WINDOW * workers * per_worker_batch / total_samples


@dataclasses.dataclass(frozen=True)
class SpeedSettings:
    """Thresholds of a speed rule (`policy.switch_speed` in a job spec).

    - margin=None: the least target/BSP throughput ratio a switch needs, derived at each decision from what the
      switch costs and the work it can win it back on (`needed`): a switch pauses every worker once (`pause`),
      which a target `r` times BSP's speed wins back over the T seconds BSP would
      still take when T (1 - 1/r) exceeds it; never below `noise`. A number fixes the margin instead.
    - noise=1.1: the least ratio counted as faster: throughputs measured over a fraction of a second scatter by
      about 10% on a loaded machine, and a target measured within that of BSP may well be the slower one.
    - A switch's pause before the run has measured one (`pause`): the median pause out of BSP in earlier runs of the
      job where the policy store holds them (`RunCosts.stored_pause_s`), else pause_cpu_s / min(1, the nodes' CPU
      budget) + pause_steps x BSP's step time (its global batch over its measured examples/s). Fitted on 465 pauses
      out of BSP in place (2-4 workers, 14 jobs): pause_cpu_s=0.2 (a few control round trips, which a
      node's CPU budget stretches: MNIST-1D's 0.29 s became 0.74 s at 0.4 CPU a node) and pause_steps=4 (the first
      steps of the new phase enter its graph and fetch what it keeps: ResNet's 0.17-0.22 s steps made its pauses
      1.0-1.3 s); predicted within 0.15 s of the median on the small jobs, 0.86 and 1.38 s against 1.01 and 1.26 s on
      ResNet. Once the run has switched, its own last pause counts.
    - relaunch_pause_s=2.5: the same by relaunch (checkpoint, new processes: 1.5-3.4 s measured on small jobs).
    - hoped=1.25: the speed a target a trial keeps is expected to run at, as a multiple of BSP's (local-sgd beside
      all-reduce BSP on MNIST-1D: 1.2-1.3x). A trial that goes back is rolled back to where it started: it costs its
      two pauses and its whole length (`trial_length`: a report every window of REPORT_WINDOW steps at BSP's step
      time or every REPORT_INTERVAL_S, whichever comes first, for the mean of trial_reports and trial_max_reports; a
      trial that goes back decides anywhere between them). A target is tried only where the gain a kept one would
      bring in the work left, T (1 - 1/hoped) - pause, covers what a failed trial costs (`worth_trying`).
    - trial_reports=2: a trial judges the target after this many metrics reports from each worker in its phase.
      Workers report each of a phase's first windows of steps as it fills (every 20 steps; a phase's first step,
      its graph entry, is left out of the times): a trial of a few tenths of a second on a small job. Once a
      worker's second report is in, its first is left out of the measure: a phase's first window reads low while
      it warms up (lowest in 7 of 8 MNIST-1D trials, 0.72-1.12x BSP where kept trials' local-sgd ran 1.13-1.22x).
    - trial_max_reports=8: a trial whose ratio is still within the noise of the bar measures on (a sequential
      decision, `after_trial`), up to this many reports a worker (three early windows, then one every half second:
      about three seconds; windows of 20 slow steps make it longer: ResNet-4's trials ran 20-35% of the workload);
      then the measured ratio decides alone. It decides alone sooner where measuring on is not worth it: a trial that
      goes back throws its whole length away, and once that and its two pauses cost more than a target at the top
      of the band could still win in the time BSP has left, measuring on can only lose (`_measuring_spent`). For the
      same reason a target measured at least as fast as BSP is kept, bar or not, once going back (the trial's samples
      again at BSP's speed, and a pause) costs more than it could lose at the bottom of its band (`_cheaper_to_keep`).
    - sigmas=2.0: the noise band around a trial's ratio, in standard errors over the reports its measure uses (one
      after two reports, the first left out: +-20%; seven at the cap: +-8%): a ratio decides once the bar lies
      outside ratio x (1 +- sigmas x se). A report's relative scatter counts as at least `noise` - 1 (a phase's
      early reports read up to a fifth below its speed a few seconds on: MNIST-1D's local-sgd 0.98-1.06x BSP in its
      first window, 1.2-1.3x from the third on).
    - bsp_reports=10: BSP's throughput is the median of each worker's last this-many reports (summed over workers).
    """

    margin: float | None = None
    noise: float = 1.1
    pause_cpu_s: float = 0.2
    pause_steps: float = 4.0
    relaunch_pause_s: float = 2.5
    hoped: float = 1.25
    trial_reports: int = 2
    trial_max_reports: int = 8
    sigmas: float = 2.0
    bsp_reports: int = 10

    @classmethod
    def from_spec(cls, spec) -> SpeedSettings:
        """The settings of a spec's `policy.switch_speed` (a SwitchSpeedSpec), defaults where it gives none."""
        return settings_from_spec(cls, spec)


@dataclasses.dataclass(frozen=True)
class RunCosts:
    """What the run says about a switch's cost before it has switched: BSP's global batch (its step time from its
    measured examples/s), each node's CPU budget (None: unbudgeted), and the median pause out of BSP measured in
    earlier runs of the job (the policy store; None where none)."""

    global_batch: int | None = None
    cpus_per_node: float | None = None
    stored_pause_s: float | None = None


@dataclasses.dataclass(frozen=True)
class KnownSpeed:
    """The target's speed measured in earlier runs of the job (the policy store): its throughput as a share of
    BSP's, measured side by side in those runs (absolute rates move with the machine's load; their ratio less)."""

    target: str
    ratio: float
    runs: int = 1


@dataclasses.dataclass(frozen=True)
class SpeedDecision:
    """What a rule decided at `fraction`, why, and the numbers it decided on."""

    action: str        # SWITCH | STAY | TRIAL before a switch; KEEP | BACK after a trial
    fraction: float
    reason: str
    values: dict
