"""A simulated run's folder, as a real run writes it: metrics.jsonl as it goes, summary.json at the end.

Times (`t`, `time_s`, `wall_time_s`, `total_time_s`) are simulated seconds of the simulated cluster (the arrival
model's step times); the host's own time is `simulation.host_s`. `backend` is "simulator".
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import secrets

from syncswitch import __version__
from syncswitch.cluster_manager.summary import planned_switch_at
from syncswitch.files import write_text_atomic
from syncswitch.metrics import converged_accuracy, time_to_accuracy


def default_run_dir(name: str, workers: int) -> str:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return os.path.join("runs", f"{name}-sim{workers}-{stamp}-{secrets.token_hex(2)}")


class RunFolder:
    def __init__(self, out_dir: str | None, job, sim):
        self.job, self.sim = job, sim
        self.dir = out_dir or default_run_dir(job.name, sim.workers)
        os.makedirs(self.dir, exist_ok=True)
        self._fh = open(os.path.join(self.dir, "metrics.jsonl"), "w", encoding="utf-8")  # closed in finish
        self.evaluations: list[dict] = []
        self.phases: list[dict] = []
        self.switches: list[dict] = []
        self.started = datetime.datetime.now()

    def record(self, doc: dict) -> None:
        self._fh.write(json.dumps(doc) + "\n")

    def metrics(self, t, worker, protocol, phase, samples, fraction, local_steps, step_s, busy_s, wait_s,
                loss) -> None:
        self.record({"kind": "metrics", "t": t, "event": "metrics", "worker": worker, "protocol": protocol,
                     "phase": phase, "samples": samples, "fraction": fraction, "local_steps": local_steps,
                     "step_time_s": step_s, "examples_per_s": self.sim.config.per_worker_batch / max(step_s, 1e-9),
                     "loss": loss, "busy_s": busy_s, "wait_s": wait_s})

    def evaluation(self, t, fraction, path, accuracy, loss) -> None:
        doc = {"fraction": fraction, "time_s": t, "accuracy": accuracy, "loss": loss}
        self.evaluations.append(doc)
        self.record({"kind": "eval_checkpoint", "t": t, "path": path, "fraction": fraction})
        self.record({"kind": "evaluation", "abandoned": False, "event": "evaluation", "checkpoint": path, **doc})

    def entered(self, t, k, planned, shared, lr, momentum, total) -> None:
        self.record({"kind": "entered", "source": 0, "t": t, "event": "entered", "phase": k,
                     "protocol": planned.protocol, "learning_rate": lr, "momentum": momentum,
                     "momentum_now": momentum, "samples": shared.samples, "fraction": shared.samples / total})
        if k:
            self.switches.append({"from": self.phases[-1]["protocol"], "to": planned.protocol,
                                  "at_fraction": shared.samples / total, "mode": "in-place", "overhead_s": 0.0,
                                  "reason": "schedule" if not self.sim.guard.events else "guard"})

    def phase_done(self, k, planned, start, end, total, measured) -> None:
        (t0, samples0, step0), (t1, samples1, step1) = start, end
        wall = t1 - t0
        self.phases.append({"protocol": planned.protocol, "start_fraction": samples0 / total,
                            "end_fraction": samples1 / total, "wall_time_s": wall, "samples": samples1 - samples0,
                            "steps": step1 - step0, "examples_per_s": (samples1 - samples0) / wall if wall else None,
                            "config": dataclasses.asdict(planned.config), "params": planned.params,
                            "measured": measured})

    def guard_event(self, t, entry) -> None:
        self.record({"kind": "guard", "t": t, **entry})

    def finish(self, status: str, message: str, shared, host_s: float) -> dict:
        sim, job = self.sim, self.job
        last = self.evaluations[-1] if self.evaluations else None
        if status == "completed" and last is not None:
            short = sim.guard.shortfall(last["fraction"], last["accuracy"])
            if short is not None:
                self.guard_event(sim.now, short)
        self._fh.close()
        evaluations = sorted(self.evaluations, key=lambda e: e["fraction"])
        accuracies = [e["accuracy"] for e in evaluations]
        converged, stable = converged_accuracy(accuracies)
        switch_at = planned_switch_at(job.policy.schedule)
        completed = status == "completed"
        summary = {
            "job": job.name, "job_id": f"{job.name}-sim-{secrets.token_hex(4)}", "spec": job.path,
            "run_dir": os.path.abspath(self.dir), "backend": "simulator", "workers": sim.workers,
            "parameter_servers": 0, "status": status, "message": message, "schedule": self.phases,
            "switches": self.switches, "switch_mode": "in-place", "switch_at": switch_at,
            "timing_policy": {"source": job.policy.source, "switch_at": switch_at},
            "total_time_s": sim.now, "init_time_s": 0.0, "wall_time_s": sim.now, "total_samples": sim.total,
            "final_accuracy": accuracies[-1] if accuracies and completed else None,
            "converged_accuracy": converged if completed else None, "converged": stable,
            "time_to_accuracy_s": time_to_accuracy(evaluations, job.evaluation.target_accuracy),
            "target_accuracy": job.evaluation.target_accuracy, "evaluations": evaluations,
            "hyperparameters": dataclasses.asdict(job.hyperparameters),
            "configuration_policy": job.policy.configuration, "abandoned_evaluations": [],
            "straggler_policy": "none", "straggler_events": [], "policy_actions": [], "injected_stragglers": [],
            **sim.guard.summary(), **sim.timing.summary(), "failures": [], "resumes": [],
            "goodput": {"useful_samples": shared.samples, "trained_samples": shared.samples, "wall_s": sim.now},
            "simulation": {"seed": sim.options.seed, "arrivals": sim.arrivals.describe(), "host_s": host_s,
                           "final_samples": shared.samples, "updates": shared.step,
                           # False: kernels on another thread count than the nodes' (model.match_node_threads)
                           "node_threads": getattr(sim.model, "node_threads", True)},
            "states": [], "started_at": self.started.isoformat(timespec="seconds"),
            "syncswitch_version": __version__,
        }
        write_text_atomic(os.path.join(self.dir, "summary.json"), json.dumps(summary, indent=2, default=_plain))
        return summary


def _plain(value):
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (set, tuple)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
