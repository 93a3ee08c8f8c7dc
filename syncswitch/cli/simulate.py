"""`syncswitch simulate JOB`: the job's protocols on N simulated workers in this one process."""

from __future__ import annotations

import sys

import click

from syncswitch.cli.errors import friendly_errors


@click.command()
@click.argument("job", type=click.Path(dir_okay=False))
@click.option("--workers", type=click.IntRange(1, 4096), help="Simulated workers (default: the spec's).")
@click.option("--protocol", help="Run this protocol alone instead of the job's schedule (e.g. asp, ssp).")
@click.option("--switch-at", type=float, help="BSP until this fraction, then the switch target.")
@click.option("--switch-to", help="The asynchronous protocol a switch goes to.")
@click.option("--arrivals", default="round-robin", show_default=True,
              help="round-robin | speeds[:SIGMA][:jitter=J][:block=K] (random per-worker speeds, stragglers; each "
                   "step jittered by J, K steps a draw) | replay:RUN_DIR "
                   "(each worker's measured step times from a real run); any with +cores:C[:q=QUANTUM|:staleness=S]"
                   "[:stall=P/M] (the workers share C cores, time-sliced; the slice in mean steps, or calibrated to "
                   "ASP's staleness S; on a replay, by default to the staleness the run measured; a step held off "
                   "the cores after its read with probability P, for M mean steps on average); and +call:F (a "
                   "protocol's blocking call outside its read-to-update window, SSP's and specsync's, takes F of a "
                   "step off the core; default 0); and +link:MBIT[:latency=MS][:burst=KB][:shared] (the network: "
                   "all-reduces and parameter-server transfers take time on links of MBIT Mbit/s; default free).")
@click.option("--step-time", type=click.FloatRange(min=0, min_open=True), default=1.0, show_default=True,
              help="Seconds of one step on the simulated cluster (the time scale of round-robin and speeds).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seeds the model, the arrivals and the draws.")
@click.option("--no-guard", is_flag=True, help="Run without the accuracy guard.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a spec field.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), help="Run folder (default runs/<name>-sim<N>-...).")
@click.option("--quiet", is_flag=True, help="No per-evaluation progress lines.")
@friendly_errors
def simulate(job, workers, protocol, switch_at, switch_to, arrivals, step_time, seed, no_guard, sets, out_dir,
             quiet):
    """Simulate JOB on N workers in one process: every update's arrival, deterministic for a seed.

    Writes a run folder (summary.json, metrics.jsonl) that `report`, `guard replay` and the policy store read;
    times in it are simulated seconds of the simulated cluster.
    """
    from syncswitch import spec as specmod
    from syncswitch.cli.options import spec_overrides
    from syncswitch.simulator.arrivals import arrival_model
    from syncswitch.simulator.run import Options, Simulation

    overrides = spec_overrides(protocol, workers, switch_at, None, None, sets, None, no_guard, None, switch_to)
    job_spec = specmod.load(job, overrides)
    n = job_spec.cluster.workers
    model = arrival_model(arrivals, n, seed, step_time)
    summary = Simulation(job_spec, Options(n, model, seed, out_dir, progress=not quiet)).run()
    acc = summary["final_accuracy"]
    repairs = [e for e in summary["guard_events"] if not str(e.get("action", "")).startswith("none")]
    click.echo(f"{summary['status']}: {n} simulated workers, final accuracy "
               f"{'-' if acc is None else f'{acc:.3f}'}, {len(repairs)} guard repair(s), "
               f"{summary['total_time_s']:.1f} simulated s; run folder {summary['run_dir']}")
    sys.exit(0 if summary["status"] == "completed" else 3)
