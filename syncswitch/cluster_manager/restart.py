"""Going on from an earlier checkpoint: what a rollback, a node recovery and a resume share."""

from __future__ import annotations

import dataclasses

from syncswitch.cluster_manager.checkpoints import DurableCheckpoints
from syncswitch.cluster_manager.context import RunContext
from syncswitch.cluster_manager.evaluation import Evaluations
from syncswitch.cluster_manager.guarding import GuardRuntime
from syncswitch.cluster_manager.journal import RunJournal
from syncswitch.cluster_manager.launcher import Launcher
from syncswitch.cluster_manager.phases import PhaseDriver


@dataclasses.dataclass
class Restart:
    """The parts a restart from a checkpoint moves, handed as one to the guard's repairs, node recovery and resume:
    the launcher and the phase driver start the new branch; the guard, the evaluations and the durable checkpoints
    forget the abandoned one past the checkpoint; the journal records the new branch before it saves anything."""

    ctx: RunContext
    launcher: Launcher
    phases: PhaseDriver
    guard: GuardRuntime
    evaluations: Evaluations
    durable: DurableCheckpoints
    journal: RunJournal

    def new_branch(self, name: str, forget_after: float | None = None) -> None:
        """The next checkpoints are named `name` (the abandoned branch keeps its names); with `forget_after`, what
        the abandoned branch saved or scored past that fraction leaves the run. Journaled at once: a resume adopts
        only the running branch's saves."""
        ctx = self.ctx
        if forget_after is not None:
            ctx.record.abandoned_evaluations += self.evaluations.abandon_after(forget_after)
            self.durable.drop_after(forget_after)
        ctx.checkpoint_name = name
        self.journal.save()

    def started(self, k: int, fraction: float) -> None:
        """Phase k runs again from `fraction` (once the tasks are launched or restored): wait for its first steps."""
        self.ctx.phase_run(k).start_fraction = fraction
        self.phases.start(k)
