"""Repeated runs of one job under several schedules (`syncswitch experiment`)."""

from __future__ import annotations

import dataclasses
import os

from syncswitch import spec as specmod
from syncswitch.errors import SpecError
from syncswitch.registry import did_you_mean


def variant_policy(spec, variant: str):
    """The spec's policy for a variant name: a protocol (`bsp`, `asp`, `ssp`, ...) or `switch@F` (BSP until F, then
    the spec's own switch target: X for a `[bsp until F, X]` schedule, `policy.switch_to` otherwise)."""
    if variant in specmod.PROTOCOLS:
        schedule = (specmod.Phase(variant, 1.0),)
    elif variant.startswith("switch@"):
        try:
            fraction = float(variant.split("@", 1)[1])
        except ValueError:
            raise SpecError(f"--compare variant {variant!r}: expected switch@FRACTION, e.g. switch@0.25") from None
        schedule = specmod.switch_at_schedule(fraction, f"--compare {variant}", specmod.switch_target(spec.policy))
    else:
        raise SpecError(f"--compare variant {variant!r}: expected a protocol ({', '.join(specmod.PROTOCOLS)}) "
                        f"or switch@FRACTION{did_you_mean(variant, specmod.PROTOCOLS)}")
    return dataclasses.replace(spec.policy, schedule=schedule, source="cli")


def run_variant(spec, variant: str, run_dir: str, progress: bool = False) -> dict:
    from syncswitch.cluster_manager import submission

    return submission.submit(spec.with_policy(variant_policy(spec, variant)), output_dir=run_dir, progress=progress)


def run_experiment(spec, variants: list[str], repeats: int, root: str, on_run=None, run=None) -> int:
    """Run `spec` under each variant `repeats` times, one folder per run under `root`; returns how many failed.

    Repeat r runs with seed `spec.seed + r`, every variant alike: one seed is one draw, and an accuracy spread needs
    several. The variants take turns within each repeat, so a machine whose load drifts slows them alike and
    their time ratios stay fair. `on_run(variant, repeat, run_dir, summary)` is called after each run.
    """
    for variant in variants:
        variant_policy(spec, variant)  # fail on a bad name before any run starts
    run = run or run_variant
    failed = 0
    for r in range(repeats):
        seeded = dataclasses.replace(spec, seed=spec.seed + r, raw={**spec.raw, "seed": spec.seed + r})
        for variant in variants:
            run_dir = os.path.join(root, f"{variant.replace('@', '')}-r{r}")
            summary = run(seeded, variant, run_dir)
            failed += summary["status"] != "completed"
            if on_run is not None:
                on_run(variant, r, run_dir, summary)
    return failed
