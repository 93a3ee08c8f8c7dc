"""`syncswitch experiment JOB`: run a job under several schedules, repeatedly, one run folder each."""

from __future__ import annotations

import click

from syncswitch.cli.errors import friendly_errors
from syncswitch.cli.options import workers_override


@click.command()
@click.argument("job", type=click.Path(dir_okay=False))
@click.option("--compare", default="bsp,asp,switch@0.25", show_default=True,
              help="Comma-separated variants: a protocol alone (asp, or with parameters: ssp(staleness=3)); "
                   "switch@F (BSP until F, then the job's switch target: X for a [bsp until F, X] schedule, else "
                   "policy.switch_to); or switch@F:X (BSP until F, then protocol X, parameters allowed).")
@click.option("--repeats", type=click.IntRange(1, 100), default=1, show_default=True,
              help="Runs per variant; repeat r uses seed (the job's seed + r), the variants taking turns.")
@click.option("--output-dir", type=click.Path(file_okay=False), help="Parent folder of the runs.")
@click.option("--workers", type=int)
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE")
@friendly_errors
def experiment(job, compare, repeats, output_dir, workers, sets):
    """Run JOB under each variant REPEATS times, one output folder per run."""
    from syncswitch import spec as specmod
    from syncswitch.cluster_manager.experiments import run_experiment, split_variants
    from syncswitch.cluster_manager.submission import default_run_dir

    spec = specmod.load(job, list(sets) + workers_override(workers))
    variants = split_variants(compare)
    root = output_dir or default_run_dir(f"{spec.name}-experiment")

    def echo(variant, r, run_dir, summary):
        click.echo(f"{variant} run {r}: {summary['status']}, {summary.get('total_time_s') or 0:.1f} s, "
                   f"converged accuracy {summary.get('converged_accuracy')}, {run_dir}")

    failed = run_experiment(spec, variants, repeats, root, on_run=echo)
    click.echo(f"runs in {root}; report with: syncswitch report {root}/*")
    if failed:
        raise SystemExit(1)
