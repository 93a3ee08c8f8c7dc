"""What a run folder keeps so `syncswitch resume` can go on from its last durable checkpoint.

`job.json` holds the validated spec (written at submission) and `run.json` the run record so far
(rewritten atomically at each state change and evaluation); with `checkpoints/durable.json` they are
all a new manager needs: the schedule, the switches and evaluations done, and where to restart.
"""

from __future__ import annotations

import dataclasses
import os
import time

from syncswitch.errors import SyncSwitchError
from syncswitch.files import write_json_atomic
from syncswitch.runfolder import JOB_FILE, RUN_FILE, read_json


def save_job(spec, run_dir: str) -> None:
    """The spec as run: its validated document and the schedule it ran (a stored switch point included)."""
    schedule = [{"protocol": p.protocol, "until": p.until} for p in spec.policy.schedule]
    write_json_atomic(os.path.join(run_dir, JOB_FILE), {"path": spec.path, "raw": spec.raw, "schedule": schedule,
                                                        "schedule_source": spec.policy.source,
                                                        # a stored policy's reference is not in the raw spec
                                                        "guard_reference": spec.policy.guard.reference})


def load_job(run_dir: str):
    """The spec a run folder was submitted with; SyncSwitchError naming the folder when it has none."""
    # Imported for their registrations: the backends (which validate their options), policies and protocols it names.
    import syncswitch.backends
    import syncswitch.policies  # noqa: F401
    from syncswitch import spec as specmod

    doc = read_json(run_dir, JOB_FILE)
    if doc is None:
        raise SyncSwitchError(f"{run_dir}: not a syncswitch run folder (no {JOB_FILE})")
    spec = specmod.validate(doc["raw"], doc["path"])
    schedule = tuple(specmod.Phase(p["protocol"], p["until"]) for p in doc["schedule"])
    reference = doc.get("guard_reference") or spec.policy.guard.reference
    guard = dataclasses.replace(spec.policy.guard, reference=tuple(tuple(p) for p in reference))
    return spec.with_policy(dataclasses.replace(spec.policy, schedule=schedule, source=doc["schedule_source"],
                                                guard=guard))


def load_run(run_dir: str) -> dict:
    return read_json(run_dir, RUN_FILE) or {}


class RunJournal:
    """Keeps run.json current: the record so far, the plan as it stands, the guard's state, the running branch."""

    def __init__(self, ctx, evaluations, guard):
        self.ctx = ctx
        self.evaluations = evaluations
        self.guard = guard

    def save(self) -> None:
        ctx, guard = self.ctx, self.guard
        if ctx.outputs is None:
            return
        write_json_atomic(os.path.join(ctx.run_dir, RUN_FILE), {
            **ctx.record.kept(), "evaluations": [e.as_dict() for e in self.evaluations.results],
            "reached": max(ctx.reached(), ctx.reached_before),
            # The plan as it stands (a rollback's fallback rung, greedy's interruptions): checkpoints name its phases.
            "plan": ctx.plan.describe_phases(),
            "guard": {"rollbacks": guard.rollbacks, "events": guard.events,
                      # A verdict being acted on: the checkpoints past its onset are not to be resumed from.
                      "pending_onset": guard.verdict.onset if guard.verdict else None},
            # The running branch's checkpoint names: the chief's records of saves the manager had not heard of.
            "checkpoint_name": ctx.checkpoint_name,
            "saved_at": time.time()}, indent=None)
