"""Every catalog protocol's simulator rule by the protocol's name (rules.py holds the base and the synchronous
rules, async_rules.py the asynchronous ones)."""

from __future__ import annotations

from syncswitch.errors import SpecError

from .async_rules import Asp, BFasgd, DcAsgd, Fasgd, Lookahead, Ssp, SpecSync
from .rules import Bsp, LocalSgd, ServerRule, Shared

RULES: dict[str, type[ServerRule]] = {rule.name: rule for rule in (Bsp, LocalSgd, Asp, Ssp, Fasgd, DcAsgd, Lookahead,
                                                                     SpecSync, BFasgd)}


def rule_for(protocol: str, shared: Shared, workers: int, params: dict, batch: int, seed: int) -> ServerRule:
    if protocol not in RULES:
        raise SpecError(f"protocol {protocol!r} has no simulator rule; valid: {', '.join(sorted(RULES))}")
    return RULES[protocol](shared, workers, params, batch, seed)
