"""Options shared by the commands that run a job, and their translation into spec overrides."""

from __future__ import annotations

import click


def workers_override(workers: int | None) -> list[str]:
    """`--workers N` as a spec override (none when not given)."""
    return [] if workers is None else [f"cluster.workers={workers}"]


class SwitchAt(click.ParamType):
    """--switch-at: a fraction of the workload, or `auto`."""

    name = "F|auto"

    def convert(self, value, param, ctx):
        if isinstance(value, float) or value == "auto":
            return value
        try:
            return float(value)
        except ValueError:
            self.fail(f"{value!r} is neither a fraction of the workload nor auto", param, ctx)


def spec_overrides(protocol, workers, switch_at, switch_mode, target_accuracy, sets,
                   straggler_policy=None, no_guard=False, cpus_per_node=None, switch_to=None) -> list[str]:
    """Translate CLI shortcuts into `--set` assignments applied before validation."""
    out = list(sets)
    if protocol and switch_at is not None:
        raise click.UsageError("--protocol and --switch-at are exclusive")
    if protocol:
        out.append(f"policy.schedule=[{{protocol: {protocol}}}]")
    if switch_at is not None:
        out.append(f"policy.switch_at={switch_at}")
    if switch_to:
        out.append(f"policy.switch_to={switch_to}")
    out += workers_override(workers)
    if switch_mode:
        out.append(f"policy.switch_mode={switch_mode}")
    if target_accuracy is not None:
        out.append(f"evaluation.target_accuracy={target_accuracy}")
    if straggler_policy:
        out.append(f"stragglers.policy={straggler_policy}")
    if no_guard:
        out.append("policy.guard.enabled=false")
    if cpus_per_node is not None:
        out.append(f"cluster.cpus_per_node={cpus_per_node}")
    return out


def job_options(fn):
    """Options shared by every command that runs a job."""
    from syncswitch.policies import STRAGGLER_POLICIES
    from syncswitch.spec import DEFAULT_SWITCH_TO, PROTOCOLS, asynchronous_protocols
    from syncswitch.spec.model import LOOKAHEAD_MAX_WORKERS, NONBLOCKING_SWITCH_TO

    options = [
        click.option("--protocol", type=click.Choice(list(PROTOCOLS)),
                     help="Run one protocol (its default parameters) for the whole workload."),
        click.option("--switch-at", type=SwitchAt(),
                     help="Shortcut for the schedule [bsp until F, X], X the job's switch target (--switch-to); F is "
                          "the earliest point, the switch rule may defer it; auto: the rule alone decides."),
        click.option("--switch-to", type=click.Choice(asynchronous_protocols()),
                     help=f"The protocol a switch goes to (default {NONBLOCKING_SWITCH_TO} on up to "
                          f"{LOOKAHEAD_MAX_WORKERS} workers, {DEFAULT_SWITCH_TO} on more; asp is the paper's)."),
        click.option("--switch-mode", type=click.Choice(["in-place", "relaunch"]), help="How a switch is actuated."),
        click.option("--workers", type=int, help="Number of nodes (one PS and one worker each)."),
        click.option("--target-accuracy", type=float, help="Time-to-accuracy threshold."),
        click.option("--straggler-policy", type=click.Choice(STRAGGLER_POLICIES.names()),
                     help="How to react to stragglers during the BSP share."),
        click.option("--no-guard", is_flag=True,
                     help="Do not watch asynchronous phases: no rollback or fall-back when one degrades."),
        click.option("--cpus-per-node", type=float,
                     help="Local backend: each node's own CPU budget (e.g. 0.45), enforced with cgroups."),
        click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
                     help="Override a spec field (dotted key, YAML value)."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn
