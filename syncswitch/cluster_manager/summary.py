"""A run's summary.json: schedule as run, switches, timings, accuracy, time-to-accuracy and straggler handling."""

from __future__ import annotations

import dataclasses
import datetime
import time

from syncswitch import __version__
from syncswitch.cluster_manager.evaluator import time_to_accuracy
from syncswitch.search.traces import converged_accuracy


def build_summary(run) -> dict:
    """summary.json of `run` (a JobRun), whatever state it ended in."""
    spec = run.spec
    evaluations = sorted(run.evaluations, key=lambda e: e["fraction"])
    accuracies = [e["accuracy"] for e in evaluations]
    converged, stable = converged_accuracy(accuracies)
    target = spec.evaluation.target_accuracy
    start = run.first_step_time
    end = getattr(run, "t_end", None)
    switch_at = None
    schedule = spec.policy.schedule  # as planned: a straggler policy may have split phases since
    protocols = [p.protocol for p in schedule]
    if protocols == ["bsp"]:
        switch_at = 1.0
    elif protocols == ["asp"]:
        switch_at = 0.0
    elif protocols == ["bsp", "asp"]:
        switch_at = schedule[0].until
    return {
        "job": spec.name, "job_id": run.job_id, "spec": spec.path, "run_dir": run.run_dir,
        "backend": spec.cluster.backend, "workers": spec.cluster.workers, "status": run.status,
        "message": run.message,
        "schedule": run.phase_log, "switches": run.switches, "switch_mode": run.mode,
        "switch_at": switch_at,
        "timing_policy": {"source": spec.policy.source, "switch_at": switch_at},
        "total_time_s": (end - start) if (start and end) else None,
        "init_time_s": (start - run.t_submit) if start else None,
        "wall_time_s": time.time() - run.t_submit,
        "total_samples": run.total_samples,
        "final_accuracy": accuracies[-1] if accuracies and run.status == "completed" else None,
        "converged_accuracy": converged if run.status == "completed" else None,
        "converged": stable,  # False: the last five evaluations were not within 0.1%
        "time_to_accuracy_s": time_to_accuracy(evaluations, target),
        "target_accuracy": target,
        "evaluations": [{k: e[k] for k in ("fraction", "time_s", "accuracy", "loss")} for e in evaluations],
        "hyperparameters": dataclasses.asdict(spec.hyperparameters),
        "configuration_policy": spec.policy.configuration,
        **run.stragglers.summary(),
        "started_at": datetime.datetime.fromtimestamp(run.t_submit).isoformat(timespec="seconds"),
        "syncswitch_version": __version__,
    }
