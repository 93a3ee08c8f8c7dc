"""A job's lifecycle as explicit states and the transitions allowed between them."""

from __future__ import annotations

import enum
import time


class JobState(enum.Enum):
    """Where a job is; each state names what the manager is waiting for."""

    NEW = "new"
    PROVISIONING = "provisioning"   # the backend creates nodes and starts their agents
    LAUNCHING = "launching"         # every node builds its graph and warms every protocol up
    RUNNING = "running"             # a phase trains; `phase` says which
    SWITCHING = "switching"         # between two phases: in place, or checkpoint and relaunch
    ROLLING_BACK = "rolling_back"   # the guard abandoned a phase: restore a checkpoint, fall back
    RECOVERING = "recovering"       # a node died: replace it, restore every node from the last durable checkpoint
    FINISHING = "finishing"         # the final checkpoint and the last evaluations
    TEARING_DOWN = "tearing_down"   # every process and resource of the job is ended
    DONE = "done"                   # the run's status says how it ended


# Teardown is reachable from everywhere: errors, signals and divergence end a job in any state.
# A node can die once training began, in any state up to finishing: recovery relaunches every task.
TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    JobState.NEW: frozenset({JobState.PROVISIONING}),
    JobState.PROVISIONING: frozenset({JobState.LAUNCHING}),
    JobState.LAUNCHING: frozenset({JobState.RUNNING, JobState.RECOVERING}),
    JobState.RUNNING: frozenset({JobState.SWITCHING, JobState.ROLLING_BACK, JobState.FINISHING,
                                 JobState.RECOVERING}),
    JobState.SWITCHING: frozenset({JobState.LAUNCHING, JobState.RUNNING, JobState.RECOVERING}),
    JobState.ROLLING_BACK: frozenset({JobState.LAUNCHING, JobState.RUNNING, JobState.RECOVERING}),
    JobState.RECOVERING: frozenset({JobState.LAUNCHING}),
    # a late evaluation can still condemn a phase
    JobState.FINISHING: frozenset({JobState.ROLLING_BACK, JobState.RECOVERING}),
    JobState.TEARING_DOWN: frozenset({JobState.DONE}),
    JobState.DONE: frozenset(),
}


class RunStatus(enum.StrEnum):
    """How a run ended (summary.json `status`); a string enum, so the summary and callers compare plain names."""

    COMPLETED = "completed"
    FAILED = "failed"
    DIVERGED = "diverged"
    INTERRUPTED = "interrupted"


class TaskState(enum.Enum):
    """What the nodes' training tasks are doing as the manager sees it: which exits and lost agents are failures.

    One explicit state where a flag once meant teardown, relaunch and recovery at once beside a twin of its own.
    """

    LIVE = "live"                # training: an exit or a lost agent is a node's failure
    RELAUNCHING = "relaunching"  # old tasks stop for new ones (a switch or repair): exits expected, a lost agent not
    REPLACING = "replacing"      # recovery replaces every task: the lost branch's events are dropped until ready
    ENDING = "ending"            # teardown: every exit and lost stream is expected

    @property
    def exits_expected(self) -> bool:
        return self is not TaskState.LIVE

    @property
    def agents_may_go(self) -> bool:
        return self in (TaskState.REPLACING, TaskState.ENDING)


class InvalidTransition(RuntimeError):
    """The manager asked for a transition the lifecycle does not have: a bug, not a user error."""


class Lifecycle:
    """The current state, the running phase and the history of transitions, with their times."""

    def __init__(self, on_change=None, clock=time.time):
        self.state = JobState.NEW
        self.phase: int | None = None
        self.history: list[tuple[float, JobState, int | None]] = [(clock(), JobState.NEW, None)]
        self._on_change = on_change
        self._clock = clock

    def to(self, state: JobState, phase: int | None = None) -> None:
        """Move to `state` (with `phase` for running and switching); teardown is always allowed."""
        if state is not JobState.TEARING_DOWN and state not in TRANSITIONS[self.state]:
            raise InvalidTransition(f"job state {self.state.value} -> {state.value} is not a transition")
        if state is JobState.TEARING_DOWN and self.state in (JobState.TEARING_DOWN, JobState.DONE):
            raise InvalidTransition(f"job state {self.state.value}: already tearing down")
        self.state, self.phase = state, phase
        self.history.append((self._clock(), state, phase))
        if self._on_change is not None:
            self._on_change(state, phase)

    def __repr__(self) -> str:
        where = f" phase {self.phase}" if self.phase is not None else ""
        return f"<Lifecycle {self.state.value}{where}>"
