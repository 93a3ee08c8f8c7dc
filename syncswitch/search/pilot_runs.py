"""How a search's pilots run, and what a pilot's run folder says beyond its summary: whether its training learned
anything."""

from __future__ import annotations

import dataclasses

from syncswitch.policies.speed_settings import SpeedSettings
from syncswitch.policies.timing import TimingSettings
from syncswitch.runfolder import training_loss_ends

# How far a run's training loss must fall from where it began for the run to have trained: the switch rule's test
# for a loss that has left its early regime (policies/timing.py, min_drop). The shipped jobs' BSP runs fall far
# more (the quickstart's from 2.3 to 0.3-0.7, the digits CNN's and the ResNet's to a tenth or less); the quickstart
# at 32 workers as shipped (the rate scaled to 0.64 at a global batch of 1024, 40 updates) ended at 2.06-2.33 from
# 2.30, at 0.10-0.18 accuracy: no accuracy a switch point could be held to.
LEARNED_DROP = TimingSettings().min_drop


def learned(run_dir: str | None) -> bool | None:
    """Whether the run's training loss ended more than LEARNED_DROP of its initial value below it; None where its
    folder has no loss reports to tell."""
    ends = training_loss_ends(run_dir) if run_dir else None
    if ends is None:
        return None
    began, ended = ends
    return ended < began * (1.0 - LEARNED_DROP)


def exploring(job_spec):
    """The spec a search's real pilots run: each tries its switch target wherever the switch rule lets it switch.

    A job's own speed rule weighs first whether a trial could pay (a trial that goes back costs two pauses and its
    length, which a short job's BSP time left cannot win back), so on a short job no run ever tries the target and
    nothing learns its speed: not the runs, not the pilots, and so not the recurring job's later runs either. A
    pilot is there to measure what later runs would have to guess: its margin is fixed at the rule's noise floor,
    which skips that weighing. A trial that finds the target slower still goes back (where most pilots' trials do,
    the search ends at BSP: binary_search.SpeedTrials); what each trial measured is stored (speeds.speed_from_runs:
    the kept phase's throughput where it ran to the end), and later runs of the job weigh the switch by it, at their
    own margin, without a trial. A margin the job fixes itself, or speeds not judged, stay as given."""
    speed = job_spec.policy.switch_speed
    if speed.rule == "off" or speed.margin is not None:
        return job_spec
    return job_spec.with_policy(dataclasses.replace(
        job_spec.policy, switch_speed=dataclasses.replace(speed, margin=SpeedSettings().noise)))
