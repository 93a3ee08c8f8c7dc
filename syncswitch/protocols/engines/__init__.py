"""Protocol engines, one module per synchronization protocol, behind `ProtocolEngine` (base.py)."""

from __future__ import annotations

from .asp import AsyncEngine
from .base import ENGINE_STATE, CountingOptimizer, ProtocolEngine, StalenessMeter
from .bfasgd import BandwidthAwareEngine
from .bsp import SyncReplicasEngine
from .dcasgd import DelayCompensatedEngine
from .fasgd import StalenessAwareEngine
from .localsgd import LocalSGDEngine
from .lookahead import LookaheadEngine
from .specsync import SpeculativeEngine
from .ssp import StaleSyncEngine
from .synchronous import SynchronousEngine

# Catalog name (syncswitch/protocols/catalog.py) -> engine class.
ENGINES: dict[str, type[ProtocolEngine]] = {
    "asp": AsyncEngine, "bsp": SynchronousEngine, "ssp": StaleSyncEngine, "dc-asgd": DelayCompensatedEngine,
    "fasgd": StalenessAwareEngine, "specsync": SpeculativeEngine, "lookahead": LookaheadEngine,
    "local-sgd": LocalSGDEngine, "b-fasgd": BandwidthAwareEngine,
}


def needs_replica(protocols) -> bool:
    """Whether any of `protocols` trains a worker-local copy of the model (the graph then builds one)."""
    return any(ENGINES[p].needs_replica for p in protocols if p in ENGINES)


def build_engines(protocols, optimizer, grads_and_vars, global_step, samples, batch_by_protocol,
                  num_workers: int, is_chief: bool, task_index: int = 0, **shared) -> dict[str, ProtocolEngine]:
    """Build the update path of every protocol the schedule uses, sharing one optimizer; `shared`: what some
    engines also need (the model replica, the rate tensors), passed to every one."""
    engines: dict[str, ProtocolEngine] = {}
    for protocol in protocols:
        if protocol not in ENGINES:  # validated at spec load
            raise ValueError(f"unknown protocol {protocol!r}; valid: {', '.join(sorted(ENGINES))}")
        engines[protocol] = ENGINES[protocol](
            optimizer, grads_and_vars, global_step, samples, batch_by_protocol[protocol],
            num_workers=num_workers, is_chief=is_chief, task_index=task_index, **shared)
    return engines


__all__ = ["ENGINES", "ENGINE_STATE", "AsyncEngine", "BandwidthAwareEngine", "CountingOptimizer",
           "DelayCompensatedEngine", "LocalSGDEngine", "LookaheadEngine", "ProtocolEngine", "SpeculativeEngine",
           "StaleSyncEngine", "StalenessAwareEngine", "StalenessMeter", "SyncReplicasEngine", "SynchronousEngine",
           "build_engines",
           "needs_replica"]
