"""The `syncswitch` command line: submit, resume, experiment, report, search, policy, guard, cluster, simulate.

Every command lives in this package and raises domain errors only; `errors.friendly_errors`
turns them into one line and an exit code. Libraries never import this package.
"""

from __future__ import annotations

import click

# Imported for their registrations: the backends, policies and protocols a spec names (before the commands, whose
# options list the registered names).
import syncswitch.backends
import syncswitch.policies  # noqa: F401
from syncswitch.cli.cluster import cluster
from syncswitch.cli.experiment import experiment
from syncswitch.cli.guard import guard
from syncswitch.cli.report import report
from syncswitch.cli.resume import resume
from syncswitch.cli.search import policy, search
from syncswitch.cli.simulate import simulate
from syncswitch.cli.submit import submit


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="syncswitch")
def cli():
    """syncswitch: BSP->ASP switching parameter-server training for TensorFlow."""


for _command in (submit, resume, experiment, report, search, policy, guard, cluster, simulate):
    cli.add_command(_command)


def main() -> None:
    cli(prog_name="syncswitch")


if __name__ == "__main__":
    main()
