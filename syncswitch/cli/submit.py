"""`syncswitch submit JOB`: run a job spec on a cluster, with a recurring job's stored switch point."""

from __future__ import annotations

import sys

import click

from syncswitch.cli.errors import friendly_errors
from syncswitch.cli.options import job_options, spec_overrides


@click.command()
@click.argument("job", type=click.Path(dir_okay=False))
@job_options
@click.option("--output-dir", type=click.Path(file_okay=False), help="Run folder (default runs/<name>-<time>).")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.option("--verbose", is_flag=True, help="Log what the backend and the manager do (INFO) on stderr.")
@click.option("--dry-run", is_flag=True, help="Print what would be provisioned and exit.")
@friendly_errors
def submit(job, protocol, switch_at, switch_to, switch_mode, workers, target_accuracy, straggler_policy, no_guard,
           cpus_per_node, sets, output_dir, quiet, verbose, dry_run):
    """Run JOB (a YAML job spec) on a parameter-server cluster."""
    from syncswitch import spec as specmod
    from syncswitch.cli.logs import configure_logging
    from syncswitch.cluster_manager import submission
    from syncswitch.search.store import stored_policy

    configure_logging(verbose)
    overrides = spec_overrides(protocol, workers, switch_at, switch_mode, target_accuracy, sets, straggler_policy,
                               no_guard, cpus_per_node, switch_to)
    job_spec = specmod.load(job, overrides)
    # A recurring job reuses its searched switch point, unless the spec or the command line gives one, and
    # the search's BSP pilots become the guard's reference, unless the spec names one ...
    stored = stored_policy(job_spec)
    if stored is not None and job_spec.policy.source == "spec":  # said, since the user searched to get that point
        click.echo(f"syncswitch: the searched switch point of this job ({stored.switch_at:.3g}, `syncswitch search`) "
                   "is not used: the spec or the command line gives a schedule or switch_at of its own, which wins "
                   "(its stored speed and reference runs are still used)", err=True)
    job_spec = specmod.adopt_stored_switch_at(job_spec, stored.switch_at if stored else None,
                                              stored.switch_rule if stored else None,
                                              stored.target_params if stored else None)
    job_spec = specmod.adopt_stored_reference(job_spec, stored.reference_runs if stored else ())
    # ... and the switch target's speed the search's pilots measured: the speed rule decides from it without a trial.
    job_spec = specmod.adopt_stored_speed(job_spec, stored.speed if stored else None)
    if dry_run:
        click.echo(submission.dry_run(job_spec))
        return
    summary = submission.submit(job_spec, output_dir=output_dir, progress=not quiet)
    hint = search_hint(summary, job)
    if hint and stored is None and not quiet:
        click.echo(hint, err=True)
    sys.exit(submission.exit_code(summary))


def search_hint(summary: dict, job: str) -> str | None:
    """A line for a run that stayed synchronous without trying its target because a trial could not pay on a job
    this short: a single run never learns the target's speed, but a search's pilots try it once for every later run
    of the job (docs/search.md). None for any other run."""
    for decision in (summary.get("switch_speed") or {}).get("decisions", []):
        values = decision.get("values") or {}
        if decision.get("action") == "stay" and ("failed_trial_s" in values or "failed_trial_steps" in values):
            return (f"syncswitch: {values.get('target', 'the switch target')} was not tried (a trial could not pay "
                    f"on a job this short); for a job you run again, `syncswitch search {job}` tries it once for "
                    "every later run")
    return None
