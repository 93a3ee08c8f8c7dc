"""`syncswitch search` (real or simulated binary search) and `syncswitch policy` (the stored timing policies)."""

from __future__ import annotations

import functools
import json
import os
import statistics

import click

from syncswitch.cli.errors import friendly_errors
from syncswitch.cli.options import workers_override
from syncswitch.cli.search_periods import (acc, check_periods, pct, period_line, period_search, periods_option,
                                          pilot_cache, secs)

INTERRUPTED = "interrupted (finished pilots are cached; run the search again to resume)"


class DefaultCommandGroup(click.Group):
    """A group whose first argument falls back to `default_command` when it names no subcommand.

    So `search JOB --runs 3` means `search run JOB --runs 3` while `search simulate ...` still works.
    """

    def __init__(self, *args, default_command: str = "run", **kwargs):
        super().__init__(*args, **kwargs)
        self.default_command = default_command

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = [self.default_command, *args]
        return super().parse_args(ctx, args)

    def resolve_command(self, ctx, args):
        if args and args[0] not in self.commands:
            args = [self.default_command, *args]
        return super().resolve_command(ctx, args)


_FORMAT = click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
                       show_default=True, help="Output format.")


@click.group("search", cls=DefaultCommandGroup, default_command="run",
             context_settings={"help_option_names": ["-h", "--help"]})
def search():
    """Find a job's switch point with pilot runs (`search JOB`), or replay the search on logs (`search simulate`)."""


def _progress(echo, target: str):
    """on_event callback printing which point runs and what each pilot and setting gave."""
    state = {"index": 0}

    def on_event(kind, **info):
        if kind == "reference":
            echo(f"reference: {info['runs']} BSP run(s) to set the target accuracy")
        elif kind == "target":
            echo(f"target accuracy A = {info['target_accuracy']:.4f} (accept within +/- {info['threshold']:g})")
        elif kind in ("pilot_start", "pilot_reused"):
            if info["role"] == "candidate" and info["repeat"] == 0:
                state["index"] += 1
                echo(f"setting {state['index']}: BSP for {pct(info['switch_at'])} of the workload, then {target}")
            if kind == "pilot_start":
                echo(f"  pilot {info['repeat'] + 1} at {pct(info['switch_at'])}: running ...")
            else:
                echo(f"  pilot {info['repeat'] + 1} at {pct(info['switch_at'])}: reused, accuracy "
                     f"{acc(info['accuracy'])} in {secs(info['time_s'])}{_rolled_back(info)}")
        elif kind == "pilot_done":
            where = f" ({info['run_dir']})" if info.get("run_dir") else ""
            echo(f"  pilot {info['repeat'] + 1} at {pct(info['switch_at'])}: accuracy {acc(info['accuracy'])} "
                 f"in {secs(info['time_s'])}{_rolled_back(info)}{where}")
        elif kind == "setting_done":
            verdict = "within the margin" if info["within_margin"] else "outside the margin"
            if info["went_back"] and not info["accepted"]:
                verdict += f", but {info['went_back']} pilot(s) went back to BSP: not accepted"
            echo(f"  => mean {acc(info['mean_accuracy'])}: {verdict}")

    return on_event


def _rolled_back(info) -> str:
    if info.get("learned") is False:
        return "; its training loss did not fall: counts as failed"
    if info.get("slower"):
        return "; its speed trial found the target slower and went back to BSP: it cannot vouch for the point"
    return "; the guard rolled its switch back: counts as failed" if info.get("rolled_back") else ""


@search.command("run")
@click.argument("job", type=click.Path(dir_okay=False))
@click.option("--runs", "-r", type=click.IntRange(min=1), default=3, show_default=True,
              help="Pilot runs per candidate switch point (R).")
@click.option("--threshold", type=click.FloatRange(0, 1, max_open=True), default=0.01, show_default=True,
              help="Accuracy margin beta around the target (0.01 = one point).")
@click.option("--max-settings", type=click.IntRange(min=1), default=5, show_default=True,
              help="Most switch points to explore (M).")
@click.option("--bsp-runs", type=click.IntRange(min=0), default=3, show_default=True,
              help="Pure-BSP reference runs (K) whose mean is the target accuracy A.")
@click.option("--target-accuracy", type=click.FloatRange(0, 1), help="Give A instead of running BSP references.")
@click.option("--workers", type=click.IntRange(min=1), help="Number of nodes for every pilot.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Override a spec field (dotted key, YAML value).")
@click.option("--output-dir", type=click.Path(file_okay=False), help="Root of the pilot run folders.")
@click.option("--fresh", is_flag=True, help="Ignore pilots cached from earlier searches of this job.")
@click.option("--no-store", is_flag=True, help="Do not save the found switch point as the job's policy.")
@click.option("--one-sided", is_flag=True, help="Accept accuracies above A + beta too (the paper rejects them).")
@click.option("--simulate", "simulated", is_flag=True,
              help="Run the pilots in the simulator (one process) on --workers simulated workers.")
@click.option("--arrivals", default="speeds:0.2", show_default=True, help="With --simulate: the arrival model.")
@click.option("--step-time", type=click.FloatRange(min=0, min_open=True),
              help="With --simulate: seconds of one step on the simulated cluster (default: measured here).")
@click.option("--periods", callback=periods_option, metavar="P,P,...",
              help="Local-SGD periods longer than the switch target's own to try at the found switch point, "
                   "R pilots each; the longest that keeps the accuracy and trains faster is stored.")
@_FORMAT
@friendly_errors(interrupted=INTERRUPTED)
def run_cmd(job, runs, threshold, max_settings, bsp_runs, target_accuracy, workers, sets, output_dir, fresh,
            no_store, one_sided, simulated, arrivals, step_time, periods, fmt):
    """Search JOB's switch point with real pilot trainings and store it for later submits."""
    from syncswitch import spec as specmod
    from syncswitch.search import speeds
    from syncswitch.search import store as storemod
    from syncswitch.search.binary_search import SearchError, binary_search
    from syncswitch.search.pilot_runs import exploring

    job_spec = specmod.load(job, list(sets) + workers_override(workers))
    if bsp_runs == 0 and target_accuracy is None:
        raise SearchError("--bsp-runs 0 needs --target-accuracy: without BSP reference runs there is no target")
    check_periods(periods, job_spec)  # before any pilot runs
    signature, inputs = storemod.signature_for_spec(job_spec)
    root = output_dir or os.path.join("runs", f"search-{job_spec.name}-{signature[:8]}")
    pilot_spec = job_spec if simulated else exploring(job_spec)  # a simulated pilot's speeds are not judged
    pilots, simulation = _pilots(pilot_spec, root, simulated, arrivals, step_time)
    cache, switching = pilot_cache(pilot_spec, simulation, fresh)
    then = specmod.switch_target(job_spec.policy).protocol  # the pilots keep the job's own switch target
    echo = functools.partial(click.echo, err=True)
    echo(f"searching {job_spec.name} (signature {signature[:12]}): M={max_settings}, R={runs}, "
         f"K={bsp_runs if target_accuracy is None else 0}, beta={threshold:g}; pilots under {root}")
    result = binary_search(pilots, max_settings=max_settings, threshold=threshold,
                           runs=runs, bsp_runs=bsp_runs, target_accuracy=target_accuracy, cache=cache,
                           on_event=_progress(echo, then), two_sided=not one_sided)
    chosen = result.chosen
    accs = [a for a in (chosen.accuracies if chosen else result.reference) if a is not None]
    found = period_search(pilot_spec, periods, result, cache, runs, not one_sided, fresh, echo,
                           lambda spec, sub: _pilots(spec, os.path.join(root, sub), simulated, arrivals, step_time))
    record = storemod.PolicyRecord(
        signature=signature, job_name=job_spec.name, switch_at=result.switch_at,
        target_accuracy=result.target_accuracy, achieved_mean=statistics.fmean(accs) if accs else None,
        achieved_std=statistics.pstdev(accs) if len(accs) > 1 else (0.0 if accs else None),
        threshold=threshold, search_cost_s=result.cost_s + (found.cost_s if found else 0.0),
        search_cost_bsp=result.cost_bsp, runs=result.runs + (sum(runs for _ in found.trials) if found else 0),
        created=storemod.now_iso(), inputs=inputs,
        target_params={"period": found.period} if found and found.trials and found.trials[0].accepted else {},
        settings={"max_settings": max_settings, "runs": runs, "bsp_runs": bsp_runs if target_accuracy is None else 0,
                  "two_sided": not one_sided, "switching": switching,
                  **({"simulated": simulation} if simulation else {})},
        reference_runs=[os.path.abspath(d) for d in result.reference_runs],
        switch_rule=storemod.switch_rule_for_spec(job_spec),
        speed=speeds.speed_from_runs([cache[key].run_dir for key in cache], then,
                                       job_spec.policy.switch_speed.rule))
    if not no_store:
        storemod.PolicyStore().put(record)
    if fmt == "json":
        click.echo(json.dumps({"policy": storemod._plain(record), "search": storemod._plain(result.to_dict()),
                               "periods": storemod._plain(found) if found else None, "stored": not no_store},
                              indent=2))
        return
    _report(job, job_spec, result, record, found, simulation, no_store)


def _report(job, job_spec, result, record, found, simulation, no_store) -> None:
    """The search's outcome in lines: the switch point, the accuracy and cost, what the pilots measured."""
    from syncswitch import spec as specmod

    target = specmod.switch_target(job_spec.policy)
    click.echo(f"switch at {pct(result.switch_at)} of the workload (BSP, then {target.protocol})"
               + (" - the switch target is slower than BSP on this job: pure BSP" if result.stopped == "target-slower"
                  else " - no earlier switch kept the accuracy: pure BSP" if result.switch_at == 1.0 else ""))
    click.echo(f"accuracy {acc(record.achieved_mean)} vs target {result.target_accuracy:.4f} +/- "
               f"{result.threshold:g}; {result.runs} pilot(s), {result.new_runs} new; cost {secs(result.cost_s)}"
               + (f" = {result.cost_bsp:.2f}x one BSP training" if result.cost_bsp else ""))
    if simulation:
        click.echo(_simulated_line(simulation))
    if found and found.trials:
        click.echo(period_line(found, target.param_dict["period"]))
    if record.speed:
        click.echo(_speed_line(record.speed, job_spec.policy.switch_speed))
    click.echo(f"stored as policy {record.signature[:12]}; `syncswitch submit {job}` will use it" if not no_store
               else "not stored (--no-store)")


def _simulated_line(simulation: dict) -> str:
    """What the simulated pilots' seconds are: steps of the per-step cost, with no communication in them."""
    how = "measured here: one gradient of the per-worker batch" if simulation["step_time_calibrated"] else "given"
    return (f"simulated on {simulation['workers']} workers ({simulation['arrivals']}); the times are steps of "
            f"{simulation['step_time_s'] * 1000:.3g} ms ({how}), with no communication: compare them with each "
            "other, not with a real cluster's; speeds are not simulated: a real run judges its target's speed itself")


def _speed_line(speed: dict, spec) -> str:
    """What the pilots measured of the switch target's speed and of a switch's pause, and what later runs do with
    them."""
    from syncswitch.policies.speed import SpeedSettings

    settings = SpeedSettings.from_spec(spec)
    margin = settings.margin if settings.margin is not None else settings.noise
    paused = (f"; switches out of BSP paused {speed['pause_s']:.2f} s (median of {speed['pauses']}): later runs weigh "
              "a switch by it" if speed.get("pause_s") is not None else "")
    if speed.get("ratio") is None:
        return paused[2:]
    said = (f"{speed['target']} measured {speed['ratio']:.2f}x BSP's throughput by {speed['runs']} pilot(s) (median; "
            "a pilot that kept it to the end, over its whole phase)")
    if speed["ratio"] < margin:
        return f"{said}: later runs stay synchronous (a switch needs {margin:g}x){paused}"
    return f"{said}: later runs switch without a trial{paused}"


def _pilots(job_spec, root: str, simulated: bool, arrivals: str, step_time: float | None):
    """(run_pilot, what the simulation was or None): real pilots through the cluster manager, or simulated ones."""
    if not simulated:
        from syncswitch.cli.pilots import run_pilot_factory

        return run_pilot_factory(job_spec, root), None
    from syncswitch.simulator.arrivals import arrival_model
    from syncswitch.simulator.pilots import calibrate_step_time, simulated_pilot_factory

    arrival_model(arrivals, job_spec.cluster.workers, job_spec.seed)  # a bad model fails before any pilot
    calibrated = step_time is None
    step_time = step_time or calibrate_step_time(job_spec)
    simulation = {"workers": job_spec.cluster.workers, "arrivals": arrivals, "step_time_s": step_time,
                  "step_time_calibrated": calibrated}
    return simulated_pilot_factory(job_spec, root, arrivals, step_time), simulation


@search.command("simulate")
@click.argument("manifest", type=click.Path())
@click.option("--setting", "settings", multiple=True, metavar="REC,K,R",
              help="yes|no,BSP_RUNS,CANDIDATE_RUNS (repeatable); default: the paper's Table IV rows.")
@click.option("--trials", type=int, default=1000, show_default=True, help="Replayed searches per setting.")
@click.option("--threshold", type=float, default=0.01, show_default=True, help="Accuracy margin beta.")
@click.option("--max-settings", type=int, default=5, show_default=True, help="Most switch points to explore (M).")
@click.option("--seed", type=int, default=0, show_default=True, help="Sampling seed.")
@click.option("--one-sided", is_flag=True, help="Accept accuracies above A + beta too.")
@_FORMAT
@friendly_errors(interrupted=INTERRUPTED)
def simulate_cmd(manifest, settings, trials, threshold, max_settings, seed, one_sided, fmt):
    """Replay the search on logged runs: a trace manifest or a folder of syncswitch run folders."""
    from syncswitch.search import simulate as sim
    from syncswitch.search import traces

    # "--setting 'no,1,1 yes,0,2'" works too: each value may hold several settings
    parsed = [sim.parse_setting(s) for v in settings for s in v.replace(";", " ").split()]
    parsed = parsed or list(sim.TABLE_IV_SETTINGS)
    report = sim.simulate(traces.load(manifest), parsed, trials=trials, threshold=threshold,
                          max_settings=max_settings, seed=seed, two_sided=not one_sided)
    if fmt == "json":
        click.echo(json.dumps(list(report.rows), indent=2))
    else:
        click.echo(sim.format_table(report))


@click.group("policy", context_settings={"help_option_names": ["-h", "--help"]})
def policy():
    """Timing policies stored by `syncswitch search` for recurring jobs."""


def _row(r) -> list[str]:
    cost = "-" if r.search_cost_bsp is None else f"{r.search_cost_bsp:.2f}x"
    return [r.signature[:12], r.job_name, pct(r.switch_at), f"{r.target_accuracy:.4f}", acc(r.achieved_mean),
            cost, r.created[:10]]


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(line, widths)).rstrip() for line in [header, *rows])


@policy.command("list")
@_FORMAT
@friendly_errors(interrupted=INTERRUPTED)
def policy_list(fmt):
    """List stored policies."""
    from syncswitch.search.store import PolicyStore, _plain

    records = PolicyStore().list()
    if fmt == "json":
        click.echo(json.dumps([_plain(r) for r in records], indent=2))
    elif not records:
        click.echo("no stored policies (run `syncswitch search JOB` to create one)")
    else:
        click.echo(_table(["SIGNATURE", "JOB", "SWITCH AT", "TARGET", "ACHIEVED", "COST", "DATE"],
                          [_row(r) for r in records]))


@policy.command("show")
@click.argument("key")
@_FORMAT
@friendly_errors(interrupted=INTERRUPTED)
def policy_show(key, fmt):
    """Show one policy (KEY: signature, unique signature prefix, or job name)."""
    from syncswitch.search.store import PolicyStore, _plain

    record = PolicyStore().resolve(key)
    if fmt == "json":
        click.echo(json.dumps(_plain(record), indent=2))
        return
    std = "" if record.achieved_std is None else f" (std {record.achieved_std:.4f})"
    cost = f"{record.search_cost_s:.0f} s" + ("" if record.search_cost_bsp is None
                                              else f" = {record.search_cost_bsp:.2f}x one BSP training")
    lines = [("signature", record.signature), ("job", record.job_name), ("switch at", pct(record.switch_at)),
             ("target accuracy", f"{record.target_accuracy:.4f} +/- {record.threshold:g}"),
             ("achieved accuracy", acc(record.achieved_mean) + std), ("search cost", f"{cost}, {record.runs} pilots"),
             ("created", record.created)]
    lines += [(f"switch target {k}", str(v)) for k, v in record.target_params.items()]  # a searched local-SGD period
    lines += [(f"input {k}", json.dumps(v) if not isinstance(v, str) else v) for k, v in record.inputs.items()]
    lines += [(f"setting {k}", str(v)) for k, v in record.settings.items()]
    width = max(len(k) for k, _ in lines)
    click.echo("\n".join(f"{k.ljust(width)}  {v}" for k, v in lines))


@policy.command("delete")
@click.argument("key")
@friendly_errors(interrupted=INTERRUPTED)
def policy_delete(key):
    """Delete one policy (KEY: signature, unique signature prefix, or job name)."""
    from syncswitch.search.store import PolicyStore

    record = PolicyStore().delete(key)
    click.echo(f"deleted policy {record.signature[:12]} ({record.job_name}, switch at {pct(record.switch_at)})")
