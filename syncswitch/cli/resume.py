"""`syncswitch resume RUN_DIR`: continue an interrupted or failed run from its last durable checkpoint."""

from __future__ import annotations

import sys

import click

from syncswitch.cli.errors import friendly_errors


@click.command()
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True))
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.option("--verbose", is_flag=True, help="Log what the backend and the manager do (INFO) on stderr.")
@friendly_errors
def resume(run_dir, quiet, verbose):
    """Continue the run in RUN_DIR with its spec, schedule and history; metrics.jsonl is appended to."""
    from syncswitch.cli.logs import configure_logging
    from syncswitch.cluster_manager import submission

    configure_logging(verbose)
    summary = submission.resume(run_dir, progress=not quiet)
    sys.exit(submission.exit_code(summary))
