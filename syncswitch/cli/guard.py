"""`syncswitch guard replay RUN_DIR...`: what the accuracy guard would decide on recorded runs, with other settings."""

from __future__ import annotations

import json

import click

from syncswitch.cli.errors import friendly_errors


@click.group()
def guard():
    """The accuracy guard (policy.guard) on runs already made."""


def _overrides(sets) -> dict:
    import yaml

    from syncswitch.errors import SpecError

    out = {}
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SpecError(f"--set {item!r}: expected KEY=VALUE, e.g. accuracy_drop=0.1")
        try:
            out[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            raise SpecError(f"--set {item!r}: the value is not valid YAML ({exc.problem or exc})") from None
    return out


@guard.command()
@click.argument("run_dirs", nargs=-1, required=True, metavar="RUN_DIR...")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="A policy.guard setting to try instead of the run's own (e.g. accuracy_drop=0.1); repeatable.")
@click.option("--as-switch-at", type=float, metavar="F",
              help="Replay runs that never left synchronous training as if an asynchronous phase began at F: "
                   "a verdict there is a false alarm on synchronous training's own noise.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per run instead of text.")
@friendly_errors
def replay(run_dirs, sets, as_switch_at, as_json):
    """Feed each run's recorded losses and evaluations through the guard again; print its first verdict."""
    from syncswitch.cluster_manager.guard_replay import replay_runs, tally

    replays = replay_runs(run_dirs, _overrides(sets), as_switch_at)
    for r in replays:
        click.echo(json.dumps(r.as_dict(), default=str) if as_json else r.line())
    if not as_json:
        click.echo(tally(replays))
