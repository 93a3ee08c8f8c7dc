"""The switch-point search's pilot runner: one real run through the cluster manager per pilot.

Here, on the floor that may use both, so that neither the cluster manager nor the search imports the other.
"""

from __future__ import annotations

import dataclasses
import os

from syncswitch.cluster_manager.experiments import run_variant
from syncswitch.runfolder import RunSummary
from syncswitch.search.binary_search import PilotResult
from syncswitch.search.pilot_runs import learned


def run_pilot_factory(job_spec, output_root: str):
    """run_pilot(switch_at, repeat) -> PilotResult, each pilot in its own folder under `output_root`, repeat r on
    seed job_spec.seed + r."""

    def run_pilot(switch_at: float, repeat: int) -> PilotResult:
        run_dir = os.path.join(output_root, f"switch{switch_at:.4f}-r{repeat}")
        # Each repeat its own seed, as `experiment`'s repeats and the simulated pilots: R pilots of one seed would
        # measure one draw R times, and Algorithm 1's mean over R is a mean over draws.
        seed = job_spec.seed + repeat
        seeded = dataclasses.replace(job_spec, seed=seed, raw={**job_spec.raw, "seed": seed})
        summary = RunSummary(run_variant(seeded, f"switch@{switch_at}", run_dir))
        accuracy = summary.doc.get("converged_accuracy") if summary.completed else None
        # The guard repaired it (rolled back, or fell back from the current weights): that switch point degraded;
        # or the speed rule's trial sent it back to BSP: the switch target is slower on this job.
        return PilotResult(converged_accuracy=accuracy, total_time_s=summary.doc.get("total_time_s") or 0.0,
                           run_dir=run_dir, rolled_back=summary.guard_acted and not summary.went_back_slower,
                           slower=summary.went_back_slower, learned=learned(run_dir),
                           switched=bool(summary.doc.get("switches")))

    return run_pilot
