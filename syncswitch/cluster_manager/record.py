"""What a run records as it goes: one small state object per phase, and the run record the summary is built from."""

from __future__ import annotations

import dataclasses

from syncswitch.cluster_manager.lifecycle import RunStatus
from syncswitch.cluster_manager.plan import SwitchMode
from syncswitch.wire import agent_pb2 as pb


@dataclasses.dataclass
class PolicyActionRecord:
    """One straggler-policy action as carried out (summary.json `policy_actions`): decided when, what, and what it
    cost once known (the switch it caused, or until its last idled straggler left the group)."""

    time_s: float                       # decided at, from the first training step
    action: str                         # "shrink" | "switch"
    protocol: str | None
    workers: list[int]
    reason: str
    overhead_s: float | None = None
    group_size: int | None = None       # elastic's shrink: the group it left training
    at_fraction: float | None = None    # greedy's switch: where it cut the running phase

    def cost_at_least(self, seconds: float) -> None:
        self.overhead_s = max(self.overhead_s or 0.0, seconds)

    def as_dict(self) -> dict:
        entry = dataclasses.asdict(self)
        return {k: v for k, v in entry.items() if v is not None or k not in ("group_size", "at_fraction")}


@dataclasses.dataclass
class PhaseRun:
    """The manager's view of one phase while it runs: who started, who paused, what was done for it."""

    index: int
    first_steps: dict[int, float] = dataclasses.field(default_factory=dict)   # worker -> time
    paused: dict[int, tuple[float, pb.Paused]] = dataclasses.field(default_factory=dict)
    entered: pb.Entered | None = None       # the chief applied the phase's configuration
    released: bool = False                  # BSP workers blocked in a step were freed at the boundary
    joined: bool = False                    # idled workers were told to join the others at the boundary
    policy_switch: tuple[float, PolicyActionRecord] | None = None  # a straggler policy ended it: (decided at, action)
    start_fraction: float | None = None     # where it starts when that is not where the last one ended
    restored: pb.Restored | None = None     # after it was abandoned: the chief restored a checkpoint

    def started(self, workers: int) -> bool:
        return len(self.first_steps) >= workers

    def ended(self, workers: int) -> bool:
        return len(self.paused) >= workers

    @property
    def start_time(self) -> float:
        return min(self.first_steps.values())

    @property
    def last_start_time(self) -> float:
        return max(self.first_steps.values())

    @property
    def first_pause_time(self) -> float:
        return min(t for t, _ in self.paused.values())

    @property
    def end_time(self) -> float:
        return max(t for t, _ in self.paused.values())

    @property
    def end_fraction(self) -> float:
        return max(p.fraction for _, p in self.paused.values())

    @property
    def steps(self) -> int:
        return sum(p.phase_steps for _, p in self.paused.values())


@dataclasses.dataclass
class RunRecord:
    """Everything the summary reports about a run, whatever state it ended in."""

    job_id: str
    run_dir: str
    mode: SwitchMode                        # how switches are actuated: in-place | relaunch
    t_submit: float
    status: RunStatus = RunStatus.FAILED
    message: str | None = None
    first_step_time: float | None = None
    t_end: float | None = None              # the last worker reached the end of the workload
    total_samples: int | None = None
    phase_log: list[dict] = dataclasses.field(default_factory=list)
    switches: list[dict] = dataclasses.field(default_factory=list)
    evaluations: list[dict] = dataclasses.field(default_factory=list)
    abandoned_evaluations: list[dict] = dataclasses.field(default_factory=list)  # of branches rolled back
    states: list[dict] = dataclasses.field(default_factory=list)   # the lifecycle's transitions
    failures: list[dict] = dataclasses.field(default_factory=list)  # one per node recovery (summary `failures`)
    resumes: list[dict] = dataclasses.field(default_factory=list)   # one per `syncswitch resume` of this run

    def log_phase(self, protocol: str, config: dict, run: PhaseRun) -> dict:
        """Append phase `run`'s entry: where it started and ended, how long it took, how fast."""
        if run.start_fraction is not None:
            start_fraction = run.start_fraction
        elif self.phase_log:
            start_fraction = self.phase_log[-1]["end_fraction"]
        else:
            start_fraction = run.entered.fraction if run.entered is not None else 0.0
        end_fraction = run.end_fraction
        samples = (end_fraction - start_fraction) * (self.total_samples or 0)
        start, end = run.start_time, run.end_time
        entry = {"protocol": protocol, "start_fraction": start_fraction, "end_fraction": end_fraction,
                 "wall_time_s": end - start, "samples": round(samples), "steps": run.steps,
                 "examples_per_s": samples / (end - start) if end > start else None, "config": config}
        self.phase_log.append(entry)
        return entry
