"""What a pilot's run folder says beyond its summary: whether its training learned anything."""

from __future__ import annotations

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
