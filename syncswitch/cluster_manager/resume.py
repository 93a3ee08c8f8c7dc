"""Manager restart: what a run folder keeps so `syncswitch resume` can go on from its last durable checkpoint.

`job.json` holds the validated spec (written at submission) and `run.json` the run record so far
(rewritten atomically at each state change and evaluation); with `checkpoints/durable.json` they are
all a new manager needs: the schedule, the switches and evaluations done, and where to restart.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time

from syncswitch.cluster_manager.checkpoints import DurableCheckpoints
from syncswitch.errors import ClusterError, SyncSwitchError
from syncswitch.files import write_json_atomic

JOB_FILE, RUN_FILE = "job.json", "run.json"
RECORD_KEYS = ("job_id", "t_submit", "first_step_time", "total_samples", "phase_log", "switches",
               "abandoned_evaluations")


def save_job(spec, run_dir: str) -> None:
    """The spec as run: its validated document and the schedule it ran (a stored switch point included)."""
    schedule = [{"protocol": p.protocol, "until": p.until} for p in spec.policy.schedule]
    write_json_atomic(os.path.join(run_dir, JOB_FILE), {"path": spec.path, "raw": spec.raw, "schedule": schedule,
                                                        "schedule_source": spec.policy.source,
                                                        # a stored policy's reference is not in the raw spec
                                                        "guard_reference": spec.policy.guard.reference})


def load_job(run_dir: str):
    """The spec a run folder was submitted with; SyncSwitchError naming the folder when it has none."""
    from syncswitch import spec as specmod

    try:
        with open(os.path.join(run_dir, JOB_FILE), encoding="utf-8") as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        raise SyncSwitchError(f"{run_dir}: not a syncswitch run folder (no {JOB_FILE})") from None
    spec = specmod.validate(doc["raw"], doc["path"])
    schedule = tuple(specmod.Phase(p["protocol"], p["until"]) for p in doc["schedule"])
    reference = doc.get("guard_reference") or spec.policy.guard.reference
    guard = dataclasses.replace(spec.policy.guard, reference=tuple(tuple(p) for p in reference))
    return spec.with_policy(dataclasses.replace(spec.policy, schedule=schedule, source=doc["schedule_source"],
                                                guard=guard))


def load_run(run_dir: str) -> dict:
    try:
        with open(os.path.join(run_dir, RUN_FILE), encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        return {}


def _metrics_reached(run_dir: str) -> float:
    """The furthest progress any worker reported in the run's metrics.jsonl (0.0 without one)."""
    best = 0.0
    try:
        with open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") as fh:
            for line in fh:
                if line.startswith('{"kind": "metrics"'):
                    try:
                        best = max(best, float(json.loads(line).get("fraction", 0.0)))
                    except ValueError:
                        continue  # the line the dead manager was writing
    except FileNotFoundError:
        pass
    return best


class JobResume:
    """The resume half of JobRun: keep run.json current, and start a resumed run from its checkpoint."""

    def save_run(self) -> None:
        if self.outputs is None:
            return
        record = {k: getattr(self.record, k) for k in RECORD_KEYS}
        write_json_atomic(os.path.join(self.run_dir, RUN_FILE), {
            **record, "evaluations": self.evaluations.results, "failures": self.failures, "resumes": self.resumes,
            "reached": max([m.fraction for m in self.latest.values()] + [self.reached_before]),
            # The plan as it stands (a rollback's fallback rung, greedy's interruptions): checkpoints name its phases.
            "plan": self.plan.describe_phases(),
            "guard": {"rollbacks": self.guard.rollbacks, "events": self.guard.events,
                      # A verdict being acted on: the checkpoints past its onset are not to be resumed from.
                      "pending_onset": self.guard.verdict.onset if self.guard.verdict else None},
            # The running branch's checkpoint names: the chief's records of saves the manager had not heard of.
            "checkpoint_name": self.checkpoint_name,
            "saved_at": time.time()}, indent=None)

    def prepare_resume(self) -> None:
        """Take over an interrupted run's record, checkpoints and results; called before `run`."""
        previous = load_run(self.run_dir)
        if not previous:
            raise SyncSwitchError(f"{self.run_dir}: no {RUN_FILE}: the run never started training; submit it again")
        store = DurableCheckpoints.load(os.path.join(self.run_dir, "checkpoints"), self.spec.checkpoint.keep)
        for key in RECORD_KEYS:
            setattr(self.record, key, previous.get(key, getattr(self.record, key)))
        self.job_id = self.record.job_id
        self.failures = previous.get("failures", [])
        self.resumes = previous.get("resumes", [])
        if previous.get("plan"):  # without it (an older run folder) the spec's schedule is the plan
            self.plan.restore(previous["plan"])
        guard = previous.get("guard") or {}
        adopted = self._adopt_unreported(store, previous.get("checkpoint_name"), guard.get("pending_onset"))
        checkpoint = store.latest()
        self.durable.entries = store.entries
        fraction = checkpoint.fraction if checkpoint else 0.0
        self.guard.rollbacks = int(guard.get("rollbacks", 0))  # the fallback ladder goes on where it was
        self.guard.events = list(guard.get("events", []))
        # run.json is rewritten at state changes and evaluations; metrics.jsonl has every worker's progress.
        self.reached_before = max(previous.get("reached", fraction), _metrics_reached(self.run_dir))
        # What was trained or scored past the checkpoint is lost with the old manager.
        self.evaluations.results = [e for e in previous.get("evaluations", []) if e["fraction"] <= fraction + 1e-9]
        self.record.abandoned_evaluations += [e for e in previous.get("evaluations", [])
                                              if e["fraction"] > fraction + 1e-9]
        # Evaluation checkpoints the old manager's evaluator had not scored yet are scored now.
        scored = {e.get("written") for e in self.evaluations.results}
        for entry in store.entries:
            if entry.kind == "evaluation" and entry.fraction <= fraction + 1e-9 and entry.path not in scored:
                self.durable.pinned.add(entry.path)
                self.evaluations.submit(entry.path, entry.fraction, self.record.t_submit + entry.time_s)
        for entry in self.record.phase_log:
            if entry["end_fraction"] > fraction:
                entry.setdefault("recovered_from", fraction)
        self.resume_point = checkpoint
        self.stragglers.t0 = self.record.first_step_time
        self.resume_info = {"t": time.time() - self.record.t_submit,
                            "checkpoint": checkpoint.path if checkpoint else None, "checkpoint_fraction": fraction,
                            "samples_lost": int(round(max(0.0, self.reached_before - fraction)
                                                      * (self.record.total_samples or 0))),
                            "down_s": time.time() - previous.get("saved_at", time.time()),
                            "adopted": [c.path for c in adopted]}

    def _start_resumed(self) -> int:
        """Launch every node from the resume checkpoint, in the phase it was taken in; returns that phase."""
        checkpoint = self.resume_point
        if checkpoint is not None and checkpoint.fraction >= 1.0:
            raise ClusterError(f"{self.run_dir}: the workload was done (final checkpoint {checkpoint.path}); "
                               "nothing to resume")
        k = self._phase_of(checkpoint)
        # The guard as the dead manager left it: without the phases before, a resumed ASP phase was not watched
        # (a chaos run's went on to collapse, 0.564 against 0.78 unfailed).
        fraction = checkpoint.fraction if checkpoint else 0.0
        starts = [0.0] + [p.until for p in self.plan][:k]
        self.guard.replay([(self.plan[j].protocol, starts[j]) for j in range(k)], self.evaluations.results,
                          [c for c in self.durable.entries if c.fraction <= fraction + 1e-9])
        self.checkpoint_name = f"model-m{len(self.resumes) + 1}.ckpt"  # the lost branch keeps its names
        self.save_run()  # before the new branch saves anything: a resume adopts only the running branch's saves
        self._launch_all(start_phase=k, restore_from=checkpoint.path if checkpoint else "")
        self.phase_run(k).start_fraction = checkpoint.fraction if checkpoint else 0.0
        self._start_phase(k)
        self.resumes.append({**self.resume_info, "phase": k,
                             "training_again_s": self.phase_run(k).last_start_time - self.record.t_submit})
        self.outputs.record({"kind": "resume", **self.resumes[-1]})
        return k
