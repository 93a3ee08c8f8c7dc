"""The protocol catalog, free of TensorFlow: each protocol's name, parameters and traits, checked at spec load.

The spec (floor 1) reaches it through `syncswitch.registry.PROTOCOLS`, which imports this module on
first lookup; the node's engines (syncswitch/protocols/engines/) are built from the same names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from syncswitch.errors import SpecError
from syncswitch.registry import PROTOCOLS, did_you_mean
from syncswitch.spec.fields import fail, number


@dataclasses.dataclass(frozen=True)
class Param:
    """One protocol parameter: its type ("int" | "float" | "bool"), default and bounds."""

    name: str
    type: str
    default: Any
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    help: str = ""

    def check(self, value: Any, field: str) -> Any:
        if self.type == "bool":
            if not isinstance(value, bool):
                raise fail(field, value, "must be true or false")
            return value
        return number(value, field, lo=self.lo, hi=self.hi, lo_open=self.lo_open, integer=self.type == "int")


@dataclasses.dataclass(frozen=True)
class Protocol:
    """A synchronization protocol as the spec, the guard and the plan see it.

    `synchronous`: every update waits for a group of workers (the guard has nothing safer to fall
    back to and watches such a phase for divergence only). `blocks`: workers can wait inside a step
    for others, so a phase boundary must release them. `scales_batch`: the configuration policy
    treats an update as the whole group's (linear scaling of batch and rate).

    Every engine wraps the one shared optimizer in one worker graph, so any two protocols switch in
    place; the plan relaunches only when their per-worker batch sizes differ (one input pipeline).
    """

    name: str
    params: tuple[Param, ...] = ()
    synchronous: bool = False
    blocks: bool = False
    scales_batch: bool = False
    summary: str = ""
    cross_check: Callable[[dict, int, str], None] | None = None  # (params, workers, field) -> raise SpecError

    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def check_params(self, given: dict, field: str, workers: int | None = None, also: tuple[str, ...] = ()) -> dict:
        """`given` validated and completed with defaults; errors name `field.<param>` and the value.

        `also`: the other keys valid beside the parameters (a phase's protocol and until), named in errors.
        """
        known = {p.name: p for p in self.params}
        for key in given:
            if key not in known:
                valid = ", ".join(list(also) + list(known))
                raise SpecError(f"unknown key {field}.{key} for protocol {self.name!r}"
                                f"{did_you_mean(key, list(also) + list(known))}; valid: {valid}")
        out = {p.name: p.check(given[p.name], f"{field}.{p.name}") if p.name in given else p.default
               for p in self.params}
        if workers is not None and self.cross_check is not None:
            self.cross_check(out, workers, field)
        return out


def _aggregate_fits(params: dict, workers: int, field: str) -> None:
    m = params["aggregate"]
    if m and m > workers:
        raise fail(f"{field}.aggregate", m, f"must be at most cluster.workers ({workers})")


def register(protocol: Protocol) -> Protocol:
    PROTOCOLS.register(protocol.name)(protocol)
    return protocol


register(Protocol("bsp", (
    Param("aggregate", "int", 0, lo=0, help="update with the first m of n gradients (backup workers); 0: all n"),
    Param("allreduce", "bool", True, help="average the gradients between the workers' replicas by all-reduce "
          "(one fused collective per step); false: through the parameter servers (SyncReplicasOptimizer), which "
          "backup workers (aggregate), the elastic straggler policy and models all-reduce cannot carry use anyway"),
), synchronous=True, blocks=True, scales_batch=True, cross_check=_aggregate_fits,
    summary="bulk synchronous: one update per step from the (first m of the) n workers' gradients"))
register(Protocol("asp", summary="asynchronous: every worker applies its gradient as soon as it has it"))
register(Protocol("ssp", (
    Param("staleness", "int", 3, lo=0, hi=1000, help="a worker may run at most this many steps ahead of the slowest"),
), blocks=True, summary="stale synchronous: asynchronous updates, but no worker runs more than s steps ahead"))
register(Protocol("dc-asgd", (
    Param("lambda", "float", 0.04, lo=0.0, help="variance-control strength of the compensation term"),
    Param("adaptive", "bool", False, help="DC-ASGD-a: lambda / sqrt(mean square of the gradient)"),
    Param("decay", "float", 0.95, lo=0.0, hi=1.0, lo_open=True, help="mean-square moving-average decay (adaptive)"),
), summary="delay-compensated ASP: g + lambda * g * g * (w_now - w_read)"))
register(Protocol("fasgd", (
    Param("power", "float", 1.0, lo=0.0, hi=4.0, help="the rate is divided by max(1, staleness) ** power"),
), summary="staleness-aware ASP: each update's rate divided by its measured step-staleness"))
register(Protocol("b-fasgd", (
    # 0.05: measured best on the quickstart (BENCHMARKS, "B-FASGD"); 1 let copies grow 5-7 updates stale there.
    Param("fetch", "float", 0.05, lo=0.0, hi=1e6,
          help="c_fetch: a worker refreshes its copy with probability 1 / (1 + c / v); 0: after every step"),
    Param("push", "float", 0.0, lo=0.0, hi=1e6,
          help="c_push: a gradient is sent with probability 1 / (1 + c / v); 0: every one (the paper: more diverges)"),
    Param("decay", "float", 0.99, lo=0.0, hi=1.0, lo_open=True, help="moving-average decay of the gradient statistics"),
    Param("power", "float", 1.0, lo=0.0, hi=4.0, help="the rate is divided by max(1, staleness) ** power"),
), summary="bandwidth-aware fasgd: pushes and fetches each happen with a probability that grows with gradient noise"))
register(Protocol("lookahead", (
    Param("delay", "float", 1.0, lo=0.0, hi=1000.0,
          help="expected staleness in updates: how far ahead gradients are taken"),
    Param("adaptive", "bool", True, help="replace delay with the staleness this phase measures, every few steps"),
), summary="look-ahead ASP (after DANA): gradients taken where momentum will carry the parameters by their apply"))
register(Protocol("local-sgd", (
    Param("period", "int", 2, lo=1, hi=10000, help="local steps between two averages of the workers' copies"),
), blocks=True, scales_batch=True,
    summary="local SGD: each worker steps on its own copy at BSP's rate; the copies are averaged every period steps"))
register(Protocol("specsync", (
    Param("abort_rate", "float", 0.5, lo=0.0, hi=8.0,
          help="drop a gradient when more than abort_rate * workers updates landed in the speculation period"),
    Param("abort_time", "float", 0.0, lo=0.0, hi=3600.0,
          help="the speculation period in seconds after a step's read; 0: until its gradient is ready"),
    Param("adaptive", "bool", False,
          help="tune abort_time and abort_rate every epoch from the logged pushes (the paper's Algorithm 1)"),
), summary="speculative re-sync: a worker that missed too many fresh updates drops its gradient and recomputes"))


def get(name: str, field: str | None = None) -> Protocol:
    return PROTOCOLS.get(name, field=field)


def synchronous(name: str) -> bool:
    """Whether every update of protocol `name` waits for a group of workers (its `synchronous` trait): the one way
    the manager asks, instead of comparing names with "bsp"."""
    return PROTOCOLS.get(name).synchronous
