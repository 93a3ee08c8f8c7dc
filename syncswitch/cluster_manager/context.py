"""What every part of a run shares: one typed context, handed to each collaborator in its constructor."""

from __future__ import annotations

import dataclasses
from typing import Any

from syncswitch.cluster_manager.events import EventFeed
from syncswitch.cluster_manager.lifecycle import Lifecycle, TaskState
from syncswitch.cluster_manager.outputs import RunOutputs
from syncswitch.cluster_manager.plan import RunPlan
from syncswitch.cluster_manager.progress import ProgressBar
from syncswitch.cluster_manager.record import PhaseRun, RunRecord
from syncswitch.wire import agent_pb2 as pb


@dataclasses.dataclass
class RunContext:
    """The run's shared state: its spec and plan, where it stands, and where it writes.

    Each collaborator (phases, repairs, recovery, resume, stragglers, events) keeps its own state and reads or
    moves only these shared parts; nothing else travels between them as attributes of a common object.
    """

    spec: Any
    run_dir: str
    plan: RunPlan
    record: RunRecord
    lifecycle: Lifecycle
    feed: EventFeed
    bar: ProgressBar
    outputs: RunOutputs | None = None    # opened when the run starts (the folder exists then)
    tasks: TaskState = TaskState.LIVE
    checkpoint_name: str = "model.ckpt"  # a rollback, recovery or resume starts a new branch of checkpoint names
    running_phase: int = 0               # the plan phase that last started: the one checkpoints belong to
    phase_runs: dict[int, PhaseRun] = dataclasses.field(default_factory=dict)
    latest: dict[int, pb.Metrics] = dataclasses.field(default_factory=dict)  # each worker's newest metrics
    reached_before: float = 0.0          # progress an earlier manager of this run folder reached

    @property
    def job_id(self) -> str:
        return self.record.job_id

    def phase_run(self, k: int) -> PhaseRun:
        if k not in self.phase_runs:
            self.phase_runs[k] = PhaseRun(k)
        return self.phase_runs[k]

    def since_submit(self, t: float) -> float:
        return t - self.record.t_submit

    def note(self, kind: str, t: float, **fields) -> None:
        """One record in metrics.jsonl, timed from the submission."""
        self.outputs.append({"kind": kind, "t": self.since_submit(t), **fields})

    def scalar(self, tag: str, value: float, fraction: float, wall_time: float) -> None:
        """A TensorBoard scalar whose step is the workload's progress in millionths."""
        self.outputs.scalar(tag, value, int(fraction * 1e6), wall_time)

    def reached(self) -> float:
        """The furthest progress any worker reported since the last (re)start."""
        return max([m.fraction for m in self.latest.values()] + [0.0])
