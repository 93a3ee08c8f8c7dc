"""Built-in straggler policies (paper IV-B2): none, greedy (asynchronous while stragglers last) and elastic."""

from __future__ import annotations

from syncswitch.policies.base import Action, PolicyContext, StragglerPolicy
from syncswitch.policies.detection import MIN_WORKERS


def _in_bsp_share(ctx: PolicyContext) -> bool:
    # Only synchronous training (BSP) suffers from a straggler, and once the BSP share is done training stays
    # asynchronous, which the paper considers immune to transient stragglers: nothing to do after that.
    return ctx.synchronous and not ctx.bsp_share_done


class NoStragglerPolicy(StragglerPolicy):
    """Never acts: the straggler-agnostic baseline (detections are still recorded)."""

    name = "none"


class GreedyPolicy(StragglerPolicy):
    """Switch to asynchronous training when a straggler appears under BSP; back to BSP once none is left.

    The paper's asynchronous protocol is ASP; here it is the run's switch target (`policy.switch_to`, the
    context's `switch_to`), the protocol every switch to asynchronous training goes to; the plan replaces a
    target under which workers wait for each other (local SGD) with `lookahead` (plan.interlude_for). Costs a
    switch each way (tens of seconds, paper VI-C2) and, in the paper's runs, 2% of final accuracy; kept as the
    paper's first policy and a baseline for the elastic one.
    """

    name = "greedy"
    min_workers = MIN_WORKERS
    switches_in_place = True

    def on_detected(self, worker, ctx):
        if not _in_bsp_share(ctx):
            return []  # already asynchronous (e.g. a second, overlapping straggler), or past the BSP share
        return [Action("switch", protocol=ctx.switch_to, reason=f"worker {worker} is a straggler")]

    def on_cleared(self, worker, ctx):
        remaining = ctx.stragglers - {worker}
        # Only undo our own switch: an asynchronous phase the schedule asked for is left alone.
        if remaining or ctx.bsp_share_done or ctx.scheduled != "bsp" or ctx.synchronous:
            return []
        return [Action("switch", protocol="bsp", reason=f"worker {worker} recovered; no straggler left")]


class ElasticPolicy(StragglerPolicy):
    """Shrink the synchronous group to the healthy workers, so the BSP share runs without stragglers.

    A BSP step waits for the slowest member, so a group of n whose slowest worker makes r steps per
    busy second advances about n × r worker-steps per second. Idling the detected stragglers pays only
    when the healthy rest is faster: removing one worker of 4 slowed by 20% would cost more (3 × 1 <
    4 × 0.8) than it saves. So the policy idles every detected straggler together (one at a time, the
    first of two equally slow ones changes nothing) and only when the detector's last-window rates say
    the smaller group is faster; without rates it idles them as the paper does.

    The paper restores the cluster size at the switch to ASP, which the manager does, so
    `on_cleared` asks for nothing: an idled worker makes no progress, so the detector cannot see it
    recover anyway. The group never drops below one active worker (the paper assumes fewer unique
    stragglers than workers), and `protected` workers are never idled: worker 0, the chief, runs
    the sync token queue runner and writes the checkpoints, so the group cannot do without it.
    """

    name = "elastic"
    min_workers = MIN_WORKERS
    shrinks_group = True

    def __init__(self, protected: tuple[int, ...] = (0,)):
        self.protected = frozenset(protected)

    def on_detected(self, worker, ctx):
        if not _in_bsp_share(ctx) or worker in ctx.idle or worker in self.protected:
            return []
        active = frozenset(range(ctx.num_workers)) - ctx.idle
        out = tuple(sorted(w for w in (ctx.stragglers | {worker}) & active if w not in self.protected))
        if len(active) - len(out) < 1:
            return []  # the last active worker keeps training, straggler or not
        named = f"worker{'s' if len(out) > 1 else ''} {', '.join(map(str, out))}"
        before, after = group_speed(active, ctx.rates), group_speed(active - set(out), ctx.rates)
        if before is None or after is None:
            verb = "are stragglers" if len(out) > 1 else "is a straggler"
            return [Action("shrink", workers=out, reason=f"{named} {verb}")]
        if after <= before:
            return []  # the healthy rest would be slower than the whole group, stragglers included
        return [Action("shrink", workers=out,
                       reason=f"{named} slow: group speed {before:.3g} -> {after:.3g} worker-steps/s")]


def group_speed(workers, rates) -> float | None:
    """Worker-steps per second of a BSP group: its size times its slowest member's rate; None if unknown."""
    if not workers or any(w not in rates for w in workers):
        return None
    return len(workers) * min(rates[w] for w in workers)
