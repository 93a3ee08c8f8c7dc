"""A run's summary.json, built from its run record: schedule as run, switches, timings, accuracy, stragglers."""

from __future__ import annotations

import dataclasses
import datetime
import time

from syncswitch import __version__
from syncswitch.cluster_manager.lifecycle import RunStatus
from syncswitch.metrics import converged_accuracy, time_to_accuracy
from syncswitch.protocols.catalog import synchronous


def planned_switch_at(schedule) -> float | None:
    """The BSP share of a plain schedule (1.0 all BSP, 0.0 all ASP, F for BSP then any asynchronous protocol);
    None for any other shape."""
    protocols = [p.protocol for p in schedule]
    if protocols == ["bsp"]:
        return 1.0
    if protocols == ["asp"]:
        return 0.0
    if len(protocols) == 2 and protocols[0] == "bsp" and not synchronous(protocols[1]):
        return schedule[0].until
    return None


def build_summary(spec, record, policies: dict) -> dict:
    """summary.json of a run from its `record` (a RunRecord), whatever state it ended in."""
    evaluations = [e.summary() for e in sorted(record.evaluations, key=lambda e: e.fraction)]
    accuracies = [e["accuracy"] for e in evaluations]
    converged, stable = converged_accuracy(accuracies)
    target = spec.evaluation.target_accuracy
    start, end = record.first_step_time, record.t_end
    completed = record.status is RunStatus.COMPLETED
    switch_at = planned_switch_at(spec.policy.schedule)  # as planned: a straggler policy may split phases
    return {
        "job": spec.name, "job_id": record.job_id, "spec": spec.path, "run_dir": record.run_dir,
        "backend": spec.cluster.backend, "workers": spec.cluster.workers, "parameter_servers": spec.cluster.ps_tasks,
        "status": record.status,
        "message": record.message,
        "schedule": [e.as_dict() for e in record.phase_log], "switches": record.switches, "switch_mode": record.mode,
        "switch_at": switch_at,
        "timing_policy": {"source": spec.policy.source, "switch_at": switch_at},
        "total_time_s": (end - start) if (start and end) else None,
        "init_time_s": (start - record.t_submit) if start else None,
        "wall_time_s": time.time() - record.t_submit,
        "total_samples": record.total_samples,
        "final_accuracy": accuracies[-1] if accuracies and completed else None,
        "converged_accuracy": converged if completed else None,
        "converged": stable,  # False: the last five evaluations were not within 0.1%
        "time_to_accuracy_s": time_to_accuracy(evaluations, target),
        "target_accuracy": target,
        "evaluations": evaluations,
        "hyperparameters": dataclasses.asdict(spec.hyperparameters),
        "configuration_policy": spec.policy.configuration,
        "abandoned_evaluations": [e.summary() for e in record.abandoned_evaluations],
        **policies,  # what the straggler and guard policies saw and did
        "states": record.states,
        "started_at": datetime.datetime.fromtimestamp(record.t_submit).isoformat(timespec="seconds"),
        "syncswitch_version": __version__,
    }
