"""Repeated runs of one job under several schedules (`syncswitch experiment`)."""

from __future__ import annotations

import dataclasses
import os

import yaml

from syncswitch import spec as specmod
from syncswitch.errors import SpecError
from syncswitch.registry import did_you_mean


VARIANT_SYNTAX = ("a protocol (NAME or NAME(key=value,...), alone), or switch@F (BSP until F, then the job's switch "
                  "target) or switch@F:NAME(key=value,...) (BSP until F, then that protocol)")


def split_variants(text: str) -> list[str]:
    """`bsp,ssp(staleness=3,until=1),switch@0.25` -> the variants: commas inside parentheses stay."""
    out, depth, current = [], 0, ""
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            out.append(current.strip())
            current = ""
        else:
            current += ch
    out.append(current.strip())
    return [v for v in out if v]


def _protocol_item(text: str, variant: str) -> dict:
    """`ssp` or `ssp(staleness=3)`: a schedule item, the values read as YAML scalars (3, 0.5, true)."""
    name, paren, rest = text.partition("(")
    name = name.strip()
    if name not in specmod.PROTOCOLS:
        raise SpecError(f"--compare variant {variant!r}: expected {VARIANT_SYNTAX}; {name!r} is no protocol "
                        f"({', '.join(specmod.PROTOCOLS)}){did_you_mean(name, specmod.PROTOCOLS)}")
    item = {"protocol": name}
    if paren:
        if not rest.endswith(")"):
            raise SpecError(f"--compare variant {variant!r}: unclosed parenthesis")
        for pair in filter(None, (p.strip() for p in rest[:-1].split(","))):
            key, eq, value = pair.partition("=")
            if not eq or not key.strip():
                raise SpecError(f"--compare variant {variant!r}: expected key=value, got {pair!r}")
            item[key.strip()] = yaml.safe_load(value.strip())
    return item


def variant_schedule(spec, variant: str) -> tuple:
    """The schedule a variant name stands for (see VARIANT_SYNTAX); parameters are checked as a spec's are."""
    field = f"--compare {variant}"
    if not variant.startswith("switch@"):
        return specmod.parse_schedule([_protocol_item(variant, variant)], field)
    point, colon, target = variant[len("switch@"):].partition(":")
    try:
        fraction = float(point)
    except ValueError:
        raise SpecError(f"--compare variant {variant!r}: expected switch@FRACTION, e.g. switch@0.25") from None
    after = specmod.parse_schedule([_protocol_item(target, variant)], field)[0] if colon \
        else specmod.switch_target(spec.policy)
    return specmod.switch_at_schedule(fraction, field, after)


def variant_policy(spec, variant: str):
    """The spec's policy under a variant name: a protocol (`bsp`, `ssp(staleness=3)`, ...), `switch@F` (BSP until
    F, then the spec's own switch target: X for a `[bsp until F, X]` schedule, `policy.switch_to` otherwise) or
    `switch@F:X(...)` (BSP until F, then X). `syncswitch experiment` and the benchmarks share this syntax."""
    return dataclasses.replace(spec.policy, schedule=variant_schedule(spec, variant), source="cli")


def variant_folder(variant: str) -> str:
    """A run folder name for a variant: `switch@0.25:ssp(staleness=3)` -> `switch0.25-ssp-staleness3`."""
    out = variant.replace("@", "").replace(":", "-").replace("(", "-").replace(",", "-").replace("=", "")
    return "".join(ch for ch in out if ch.isalnum() or ch in "._-").strip("-")


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
            run_dir = os.path.join(root, f"{variant_folder(variant)}-r{r}")
            summary = run(seeded, variant, run_dir)
            failed += summary["status"] != "completed"
            if on_run is not None:
                on_run(variant, r, run_dir, summary)
    return failed
