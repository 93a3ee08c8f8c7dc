"""`syncswitch search run --periods`: the pilots of longer local-SGD periods at the found switch point, and the
pilot formatting the search's lines share (search.py imports these; they import nothing from it)."""

from __future__ import annotations

import click


def pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.4g}%"


def secs(t: float) -> str:
    """Seconds as a pilot's time reads: whole seconds, or two digits where that shows 0 (a simulated pilot's
    cluster time at a small per-step cost)."""
    return f"{t:.0f} s" if t >= 10 else f"{t:.2g} s"


def acc(a) -> str:
    return "failed" if a is None else f"{a:.4f}"


def cached_as(simulation: dict) -> dict:
    """What sets simulated pilots apart in the cache: a per-step cost measured here is left out. Measured anew by
    every call (and never twice the same), it made each call a fresh search, so a search cut short by a time limit
    never resumed; it scales a pilot's seconds and changes nothing a pilot trains."""
    if not simulation["step_time_calibrated"]:
        return simulation
    return {key: value for key, value in simulation.items() if key != "step_time_s"}


def pilot_cache(job_spec, simulation: dict | None, fresh: bool):
    """(the cache of the job's pilots under its way of switching, that way): simulated pilots are cached apart
    from real ones, and the stored policy says so; `fresh` empties it."""
    from syncswitch.search import store as storemod

    switching = storemod.switching_for_spec(job_spec)
    if simulation:
        switching = {**switching, "simulated": cached_as(simulation)}
    cache = storemod.pilot_cache_for(storemod.signature_for_spec(job_spec)[0], switching)
    if fresh:
        cache.clear()
    return cache, switching


def periods_option(ctx, param, value):
    """--periods 4,8 -> (4, 8); a bad list is a usage error naming the option."""
    if not value:
        return ()
    try:
        return tuple(int(p) for p in value.split(","))
    except ValueError:
        raise click.BadParameter(f"{value!r}: expected local-SGD periods, e.g. 4,8") from None


def check_periods(periods, job_spec) -> None:
    """--periods names periods (1..10000) of a switch target that has one, before any pilot runs."""
    from syncswitch import spec as specmod
    from syncswitch.search import period_search as periods_mod
    from syncswitch.search.binary_search import SearchError

    if not periods:
        return
    target = specmod.switch_target(job_spec.policy)
    if "period" not in target.param_dict:
        raise SearchError(f"--periods: the switch target, {target.protocol}, has no period to try (local-sgd has "
                          "one: policy.switch_to: {protocol: local-sgd})")
    periods_mod.check_periods(list(periods), target.param_dict["period"])


def period_search(job_spec, periods, result, cache, runs, two_sided, fresh, echo, pilots_in):
    """The longest local-SGD period that keeps the found switch point's accuracy (search/period_search.py); None
    where none is asked for or the search found no switch (pure BSP runs no period)."""
    from syncswitch import spec as specmod
    from syncswitch.search.binary_search import cache_key
    from syncswitch.search.period_search import longest_period

    if not periods or result.chosen is None or result.switch_at >= 1.0:
        return None

    def pilots_for(period):
        spec = specmod.with_target_params(job_spec, {"period": period}, "--periods")
        run_pilot, simulation = pilots_in(spec, f"period{period}")
        return run_pilot, pilot_cache(spec, simulation, fresh)[0]

    base = specmod.switch_target(job_spec.policy).param_dict["period"]
    chosen = [cache[cache_key(result.switch_at, r)] for r in range(runs)]
    if all(p.switched is False for p in chosen):
        echo(f"periods: not tried: every pilot at {pct(result.switch_at)} stayed on BSP (no local SGD ran)")
        return None
    longer = ", ".join(str(p) for p in sorted(set(periods)) if p > base) or "none (none is longer)"
    echo(f"periods: trying {longer} after {pct(result.switch_at)} (the job's own: {base})")
    return longest_period(pilots_for, result.switch_at, base, [p.total_time_s for p in chosen], periods, runs=runs,
                          target=result.target_accuracy, threshold=result.threshold, two_sided=two_sided,
                          on_event=_period_progress(echo))


WHY = {"went back": "went back (a pilot's speed trial sent it back to BSP, so it cannot vouch for the period; most "
                    "trials so far kept local SGD, so the next period is tried)",
       "slower": "slower (no faster than the period kept, or most speed trials so far went back to BSP)"}


def _period_progress(echo):
    def on_event(kind, **info):
        if kind == "pilot_start":
            echo(f"  period {info['period']}, pilot {info['repeat'] + 1}: running ...")
        elif kind == "period_done":
            t = info["trial"]
            accs = " ".join(acc(a) for a in t.accuracies)
            why = WHY.get(t.why, t.why)
            echo(f"  => period {t.period}: accuracies {accs}, mean {acc(t.mean_accuracy)}, median "
                 f"{secs(t.time_s)}: {why}")

    return on_event


def period_line(found, base: int) -> str:
    """Which period the search kept, and why the next one was not."""
    tried = "; ".join(f"period {t.period}: {t.why} (mean {acc(t.mean_accuracy)}, {secs(t.time_s)})"
                      for t in found.trials)
    kept = f"local-sgd period {found.period} stored" if found.period != base else \
        f"local-sgd keeps its period {base}"
    return f"{kept} ({tried})"
