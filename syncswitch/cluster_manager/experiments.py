"""Repeated runs of one job under several schedules: `syncswitch experiment` and the search's pilot runner."""

from __future__ import annotations

import dataclasses
import os

import click

from syncswitch import spec as specmod
from syncswitch.errors import SpecError


def variant_policy(spec, variant: str):
    """The spec's policy for a variant name: `bsp`, `asp` or `switch@F`."""
    if variant in ("bsp", "asp"):
        schedule = (specmod.Phase(variant, 1.0),)
    elif variant.startswith("switch@"):
        try:
            fraction = float(variant.split("@", 1)[1])
        except ValueError:
            raise SpecError(f"--compare variant {variant!r}: expected switch@FRACTION, e.g. switch@0.25") from None
        schedule = specmod.switch_at_schedule(fraction, f"--compare {variant}")
    else:
        raise SpecError(f"--compare variant {variant!r}: expected bsp, asp or switch@FRACTION")
    return dataclasses.replace(spec.policy, schedule=schedule, source="cli")


def run_variant(spec, variant: str, run_dir: str, progress: bool = False) -> dict:
    from syncswitch.cluster_manager import manager

    return manager.submit(spec.with_policy(variant_policy(spec, variant)), output_dir=run_dir, progress=progress)


def run_pilot_factory(job_spec, output_root: str):
    """run_pilot(switch_at, repeat) -> PilotResult: one real run through the cluster manager per call."""
    from syncswitch.search.binary_search import PilotResult

    def run_pilot(switch_at: float, repeat: int) -> PilotResult:
        run_dir = os.path.join(output_root, f"switch{switch_at:.4f}-r{repeat}")
        summary = run_variant(job_spec, f"switch@{switch_at}", run_dir)
        accuracy = summary.get("converged_accuracy") if summary.get("status") == "completed" else None
        return PilotResult(converged_accuracy=accuracy, total_time_s=summary.get("total_time_s") or 0.0,
                           run_dir=run_dir)

    return run_pilot


@click.command()
@click.argument("job", type=click.Path(dir_okay=False))
@click.option("--compare", default="bsp,asp,switch@0.25", show_default=True,
              help="Comma-separated variants: bsp, asp, switch@F.")
@click.option("--repeats", type=click.IntRange(1, 100), default=1, show_default=True)
@click.option("--output-dir", type=click.Path(file_okay=False), help="Parent folder of the runs.")
@click.option("--workers", type=int)
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE")
def experiment(job, compare, repeats, output_dir, workers, sets):
    """Run JOB under each variant REPEATS times, one output folder per run."""
    from syncswitch.cli import friendly_errors
    from syncswitch.cluster_manager.manager import default_run_dir

    @friendly_errors
    def run():
        overrides = list(sets) + ([f"cluster.workers={workers}"] if workers is not None else [])
        spec = specmod.load(job, overrides)
        variants = [v.strip() for v in compare.split(",") if v.strip()]
        for variant in variants:
            variant_policy(spec, variant)  # fail on a bad name before any run starts
        root = output_dir or default_run_dir(f"{spec.name}-experiment")
        failed = 0
        for variant in variants:
            for r in range(repeats):
                run_dir = os.path.join(root, f"{variant.replace('@', '')}-r{r}")
                summary = run_variant(spec, variant, run_dir)
                failed += summary["status"] != "completed"
                click.echo(f"{variant} run {r}: {summary['status']}, {summary.get('total_time_s') or 0:.1f} s, "
                           f"converged accuracy {summary.get('converged_accuracy')}, {run_dir}")
        click.echo(f"runs in {root}; report with: syncswitch report {root}/*")
        if failed:
            raise SystemExit(1)

    run()
