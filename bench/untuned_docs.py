"""results.md's texts of the figure of the jobs nobody tuned for on 4 workers, where the default switch target is
local SGD (`python -m bench safety` on bench/workloads/)."""

from __future__ import annotations

UNTUNED4_FILES = ("safety-plateau-4workers-speed-off-v595-2026-11-29.json",
                  "safety-untuned-4workers-speed-off-v595-2026-11-29.json")
UNTUNED4_COMMANDS = (
    "python -m bench safety --workloads plain_cnn-4,deep_mlp-4,memory_gru-4 --variants bsp,in-place+guard --set "
    "policy.switch_speed=false --first-seed 1 --seeds 5 (one quiet call, the fc-v595 host)",
    "python -m bench safety --workloads tabular_mlp-4,bn_digits-4 --variants bsp,in-place+guard --set "
    "policy.switch_speed=false --first-seed 1 --seeds 5 (one quiet call, the fc-v595 host)")
UNTUNED4_INTRO = (
    "The jobs nobody tuned for on 4 workers, where the default switch goes to local SGD (each worker trains its own "
    "copy, averaged every 2 steps) rather than lookahead: the three plateau jobs of the figures above, and two more "
    "written as a user would (bench/workloads/): `tabular_mlp`, an MLP with dropout on scikit-learn's "
    "make_classification (8 classes, 20k examples), and `bn_digits`, a batch-normalized CNN with dropout and one-hot "
    "labels on the 8x8 digits. The speed rule off (`--set policy.switch_speed=false`), so every switch the switch "
    "rule allows happens and the switch rule and the guard alone decide the accuracy; guard and switch rule at their "
    "defaults, in place, seeds interleaved. What each run did: `stayed` synchronous (the switch rule's latest point "
    "passed first), `switched` (and kept local SGD), `repaired` (the guard rolled back or fell back). Bars: median at "
    "least BSP's - 1 point and worst at least BSP's worst - 3.")
UNTUNED4_NOTE = (
    "Every bar is met, and the guard stayed quiet in all 25 runs (17 of them switched). The switch rule moved "
    "plain_cnn's switches to 0.52-0.57 and kept one run and all five deep MLP runs synchronous past 0.6 (their "
    "loss had not left its early regime), and let the GRU switch at 0.45-0.56 in 3 of 5; tabular_mlp switched at "
    "0.25 and bn_digits at 0.35-0.36 in every run. Local SGD ran faster than BSP on the tabular MLP (0.81x the "
    "same seed's BSP time, median) and slower on the rest that switched (1.12-1.38x: 4 workers share 2 cores, and "
    "bn_digits trains 2-3 s, less than a few pauses); at its defaults the speed rule keeps each of these short "
    "jobs synchronous, the tabular MLP too (a trial that went back would cost 2.0-2.3 s of its 16 s: the peers "
    "figure's tabular cell). bench/notebook/2026-11-29-coordinator-23.md.")
