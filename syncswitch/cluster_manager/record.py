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


@dataclasses.dataclass(frozen=True)
class EvaluationResult:
    """One checkpoint the evaluator scored, as the run keeps it (run.json, summary.json `evaluations`)."""

    fraction: float                     # of the workload, when the checkpoint was written
    time_s: float                       # written at, from the first training step
    accuracy: float
    loss: float
    written: str                        # the checkpoint as the task reported it (rollback targets are named so)
    checkpoint: str = ""                # the path the evaluator read (a local copy without a shared filesystem)
    examples: int = 0
    eval_s: float = 0.0

    SUMMARY = ("fraction", "time_s", "accuracy", "loss")  # what summary.json keeps of it

    @classmethod
    def from_event(cls, evaluation: pb.Evaluation, written: str) -> EvaluationResult:
        return cls(evaluation.fraction, evaluation.time_s, evaluation.accuracy, evaluation.loss, written,
                   evaluation.checkpoint, evaluation.examples, evaluation.eval_s)

    @classmethod
    def from_dict(cls, entry: dict) -> EvaluationResult:
        """One as run.json kept it; a record of an older run folder without `written` names what was read."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{"written": entry.get("checkpoint", ""), **{k: v for k, v in entry.items() if k in names}})

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    def summary(self) -> dict:
        return {k: getattr(self, k) for k in self.SUMMARY}


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
class PhaseLogEntry:
    """One phase as it ran (summary.json `schedule`); the repairs and restarts that cut it short say so on it."""

    protocol: str
    start_fraction: float
    end_fraction: float
    wall_time_s: float
    samples: int
    steps: int
    examples_per_s: float | None
    config: dict
    params: dict | None = None            # the protocol's parameters, catalog defaults filled in
    measured: dict | None = None          # the protocol's own counters, as the last worker to pause read them
    rolled_back_to: float | None = None   # the guard rolled its training back to this fraction
    recovered_from: float | None = None   # a recovery or resume restarted from this fraction, before its end

    OPTIONAL = ("params", "measured", "rolled_back_to", "recovered_from")  # left out of the summary while unset

    def restarted_from(self, fraction: float) -> None:
        """Training restarts from `fraction`: a phase that ran past it says where it was cut (once, the first)."""
        if self.end_fraction > fraction and self.recovered_from is None:
            self.recovered_from = fraction

    def as_dict(self) -> dict:
        entry = dataclasses.asdict(self)
        return {k: v for k, v in entry.items() if v is not None or k not in self.OPTIONAL}

    @classmethod
    def from_dict(cls, entry: dict) -> PhaseLogEntry:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in entry.items() if k in names})


# What run.json keeps of the record for a resume, and how it is read back.
KEPT = ("job_id", "t_submit", "first_step_time", "total_samples", "phase_log", "switches", "abandoned_evaluations",
        "failures", "resumes")


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
    phase_log: list[PhaseLogEntry] = dataclasses.field(default_factory=list)
    switches: list[dict] = dataclasses.field(default_factory=list)
    evaluations: list[EvaluationResult] = dataclasses.field(default_factory=list)
    abandoned_evaluations: list[EvaluationResult] = dataclasses.field(default_factory=list)  # of abandoned branches
    states: list[dict] = dataclasses.field(default_factory=list)   # the lifecycle's transitions
    failures: list[dict] = dataclasses.field(default_factory=list)  # one per node recovery (summary `failures`)
    resumes: list[dict] = dataclasses.field(default_factory=list)   # one per `syncswitch resume` of this run

    def kept(self) -> dict:
        """The part of the record run.json keeps for a resume, as JSON."""
        out = {k: getattr(self, k) for k in KEPT}
        out["phase_log"] = [e.as_dict() for e in self.phase_log]
        out["abandoned_evaluations"] = [e.as_dict() for e in self.abandoned_evaluations]
        return out

    def take_over(self, saved: dict) -> None:
        """A dead manager's record as run.json kept it (`kept`); what it lacks keeps its value here."""
        for key in KEPT:
            if key in saved:
                setattr(self, key, saved[key])
        self.phase_log = [PhaseLogEntry.from_dict(e) for e in saved.get("phase_log", [])]
        self.abandoned_evaluations = [EvaluationResult.from_dict(e) for e in saved.get("abandoned_evaluations", [])]

    def restarted_from(self, fraction: float) -> None:
        for entry in self.phase_log:
            entry.restarted_from(fraction)

    def log_phase(self, protocol: str, config: dict, run: PhaseRun) -> PhaseLogEntry:
        """Append phase `run`'s entry: where it started and ended, how long it took, how fast."""
        if run.start_fraction is not None:
            start_fraction = run.start_fraction
        elif self.phase_log:
            start_fraction = self.phase_log[-1].end_fraction
        else:
            start_fraction = run.entered.fraction if run.entered is not None else 0.0
        end_fraction = run.end_fraction
        samples = (end_fraction - start_fraction) * (self.total_samples or 0)
        start, end = run.start_time, run.end_time
        entry = PhaseLogEntry(protocol, start_fraction, end_fraction, end - start, round(samples), run.steps,
                              samples / (end - start) if end > start else None, config)
        self.phase_log.append(entry)
        return entry
