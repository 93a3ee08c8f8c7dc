"""The switch-point search's pilots in the simulator: a cluster size this machine cannot host.

Each pilot is one simulated run (`switch@F`, seed spec.seed + repeat: the simulator is deterministic, so a
repeat is another seed). Its time is the simulated cluster's: the arrival model's step times, in units of a
calibrated per-step cost (given, or measured here as this machine's time for one worker's gradient step).
"""

from __future__ import annotations

import dataclasses
import os
import time

from syncswitch.cluster_manager.experiments import variant_policy
from syncswitch.simulator.arrivals import arrival_model
from syncswitch.simulator.model import GradientModel, Shards
from syncswitch.simulator.run import Options, Simulation


def calibrate_step_time(job_spec, steps: int = 20) -> float:
    """Seconds one gradient step of the job's model takes on this machine (the median of `steps` after warm-up)."""
    model = GradientModel(job_spec, job_spec.seed)
    shards = Shards(model, 1, job_spec.hyperparameters.batch_size)
    w = model.initial()
    times = []
    for k in range(steps + 3):
        batch = shards.next(0)
        began = time.perf_counter()
        model.gradient(w, batch)
        if k >= 3:
            times.append(time.perf_counter() - began)
    return sorted(times)[len(times) // 2]


def simulated_pilot_factory(job_spec, output_root: str, arrivals: str, step_time: float):
    """run_pilot(switch_at, repeat) -> PilotResult, each pilot a simulated run on cluster.workers workers."""
    from syncswitch.search.binary_search import PilotResult
    from syncswitch.search.pilot_runs import learned

    def run_pilot(switch_at: float, repeat: int) -> PilotResult:
        seed = job_spec.seed + repeat
        spec = dataclasses.replace(job_spec.with_policy(variant_policy(job_spec, f"switch@{switch_at}")), seed=seed)
        run_dir = os.path.join(output_root, f"switch{switch_at:.4f}-r{repeat}")
        n = spec.cluster.workers
        summary = Simulation(spec, Options(n, arrival_model(arrivals, n, seed, step_time), seed, run_dir)).run()
        accuracy = summary.get("converged_accuracy") if summary.get("status") == "completed" else None
        rolled_back = any(not e.get("action", "").startswith("none") for e in summary.get("guard_events") or [])
        return PilotResult(converged_accuracy=accuracy, total_time_s=summary.get("total_time_s") or 0.0,
                           run_dir=run_dir, rolled_back=rolled_back, learned=learned(run_dir),
                           switched=bool(summary.get("switches")))

    return run_pilot
