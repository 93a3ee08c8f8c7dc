"""The `syncswitch` command line (click): submit, experiment, report, and the search/policy/cluster groups."""

from __future__ import annotations

import functools
import importlib
import os
import sys

import click

from syncswitch.errors import SyncSwitchError


def _debug() -> bool:
    return os.environ.get("SYNCSWITCH_DEBUG") == "1"


def friendly_errors(fn):
    """Turn domain errors into one line on stderr and a non-zero exit (tracebacks only in debug)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except SyncSwitchError as exc:
            if _debug():
                raise
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            if _debug():
                raise
            click.echo("interrupted", err=True)
            sys.exit(130)

    return wrapper


def spec_overrides(protocol, workers, switch_at, switch_mode, target_accuracy, sets,
                   straggler_policy=None) -> list[str]:
    """Translate CLI shortcuts into `--set` assignments applied before validation."""
    out = list(sets)
    if protocol and switch_at is not None:
        raise click.UsageError("--protocol and --switch-at are exclusive")
    if protocol:
        out.append(f"policy.schedule=[{{protocol: {protocol}}}]")
    if switch_at is not None:
        out.append(f"policy.switch_at={switch_at}")
    if workers is not None:
        out.append(f"cluster.workers={workers}")
    if switch_mode:
        out.append(f"policy.switch_mode={switch_mode}")
    if target_accuracy is not None:
        out.append(f"evaluation.target_accuracy={target_accuracy}")
    if straggler_policy:
        out.append(f"stragglers.policy={straggler_policy}")
    return out


def job_options(fn):
    """Options shared by every command that runs a job."""
    from syncswitch.policies import STRAGGLER_POLICIES

    options = [
        click.option("--protocol", type=click.Choice(["bsp", "asp"]), help="Run one protocol for the whole workload."),
        click.option("--switch-at", type=float, help="Shortcut for the schedule [bsp until F, asp]."),
        click.option("--switch-mode", type=click.Choice(["in-place", "relaunch"]), help="How a switch is actuated."),
        click.option("--workers", type=int, help="Number of nodes (one PS and one worker each)."),
        click.option("--target-accuracy", type=float, help="Time-to-accuracy threshold."),
        click.option("--straggler-policy", type=click.Choice(STRAGGLER_POLICIES.names()),
                     help="How to react to stragglers during the BSP share."),
        click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a spec field (dotted key, YAML value)."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="syncswitch")
def cli():
    """syncswitch: BSP->ASP switching parameter-server training for TensorFlow."""


@cli.command()
@click.argument("job", type=click.Path(dir_okay=False))
@job_options
@click.option("--output-dir", type=click.Path(file_okay=False), help="Run folder (default runs/<name>-<time>).")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.option("--dry-run", is_flag=True, help="Print what would be provisioned and exit.")
@friendly_errors
def submit(job, protocol, switch_at, switch_mode, workers, target_accuracy, straggler_policy, sets, output_dir,
           quiet, dry_run):
    """Run JOB (a YAML job spec) on a parameter-server cluster."""
    from syncswitch import spec as specmod
    from syncswitch.cluster_manager import manager

    overrides = spec_overrides(protocol, workers, switch_at, switch_mode, target_accuracy, sets, straggler_policy)
    job_spec = specmod.load(job, overrides)
    from syncswitch.search.store import apply_stored_policy

    job_spec = apply_stored_policy(job_spec)  # a recurring job reuses its searched switch point
    if dry_run:
        click.echo(manager.dry_run(job_spec))
        return
    summary = manager.submit(job_spec, output_dir=output_dir, progress=not quiet)
    sys.exit(manager.exit_code(summary))


# Command groups that live next to their subsystem; attached when importable.
_GROUPS = (
    ("syncswitch.cluster_manager.experiments", "experiment"),
    ("syncswitch.cluster_manager.reports", "report"),
    ("syncswitch.search.cli", "search"),
    ("syncswitch.search.cli", "policy"),
    ("syncswitch.cluster_manager.backends.gce.cli", "cluster"),
)


def _attach_groups() -> None:
    for module_name, attr in _GROUPS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                continue  # subsystem not installed in this tree
            raise
        command = getattr(module, attr, None)
        if command is not None:
            cli.add_command(command, attr)


_attach_groups()


def main() -> None:
    cli(prog_name="syncswitch")


if __name__ == "__main__":
    main()
