"""Protocol engines, one module per synchronization protocol, behind `ProtocolEngine` (base.py)."""

from __future__ import annotations

from .asp import AsyncEngine
from .base import ENGINE_STATE, CountingOptimizer, ProtocolEngine, StalenessMeter
from .bfasgd import BandwidthAwareEngine
from .bsp import SyncReplicasEngine
from .clipping import clipped
from .dcasgd import DelayCompensatedEngine
from .fasgd import StalenessAwareEngine
from .localsgd import LocalSGDEngine
from .localsgd_collective import CollectiveLocalSGDEngine
from .lookahead import LookaheadEngine
from .replica_training import supported
from .specsync import SpeculativeEngine
from .ssp import StaleSyncEngine
from .synchronous import SynchronousEngine
from .update_log import LogPlace

# Catalog name (syncswitch/protocols/catalog.py) -> engine class.
ENGINES: dict[str, type[ProtocolEngine]] = {
    "asp": AsyncEngine, "bsp": SynchronousEngine, "ssp": StaleSyncEngine, "dc-asgd": DelayCompensatedEngine,
    "fasgd": StalenessAwareEngine, "specsync": SpeculativeEngine, "lookahead": LookaheadEngine,
    "local-sgd": LocalSGDEngine, "b-fasgd": BandwidthAwareEngine,
}


def needs_replica(protocols) -> bool:
    """Whether any of `protocols` trains a worker-local copy of the model (the graph then builds one)."""
    return any(ENGINES[p].needs_replica for p in protocols if p in ENGINES)


def engine_class(protocol: str, num_workers: int, replica=None, schedule=None) -> type[ProtocolEngine]:
    """The engine that runs `protocol`: local SGD averages by all-reduce where its copies fit one float32 buffer
    (its workers then run the rate schedule themselves), through the parameter servers otherwise (and alone, where
    there is no one to average with)."""
    fits = replica is not None and schedule is not None and supported(replica.pairs)
    if protocol == "local-sgd" and num_workers > 1 and fits:
        return CollectiveLocalSGDEngine
    return ENGINES[protocol]


def build_engines(protocols, optimizer, grads_and_vars, global_step, samples, batch_by_protocol,
                  num_workers: int, is_chief: bool, task_index: int = 0, update_log: bool = False,
                  **shared) -> dict[str, ProtocolEngine]:
    """Build the update path of every protocol the schedule uses, sharing one optimizer; `shared`: what some
    engines also need (the model replica, the rate tensors), passed to every one. `update_log`: the engines that
    count their own update (asp, ssp, dc-asgd, fasgd, specsync) keep every update's row (update_log.py), else only
    the phase's mean."""
    engines: dict[str, ProtocolEngine] = {}
    shared["update_log"] = LogPlace(num_workers, task_index) if update_log else None
    worker_grads = None  # clipped once for every engine that applies a worker's gradient as it is
    for protocol in protocols:
        if protocol not in ENGINES:  # validated at spec load
            raise ValueError(f"unknown protocol {protocol!r}; valid: {', '.join(sorted(ENGINES))}")
        cls = engine_class(protocol, num_workers, shared.get("replica"), shared.get("schedule"))
        grads = grads_and_vars
        if cls.worker_gradient and shared.get("clip_norm"):
            worker_grads = worker_grads or clipped(grads_and_vars, shared["clip_norm"])
            grads = worker_grads
        engines[protocol] = cls(optimizer, grads, global_step, samples, batch_by_protocol[protocol],
                                num_workers=num_workers, is_chief=is_chief, task_index=task_index, **shared)
    return engines


__all__ = ["ENGINES", "ENGINE_STATE", "AsyncEngine", "BandwidthAwareEngine", "CollectiveLocalSGDEngine",
           "CountingOptimizer",
           "DelayCompensatedEngine", "LocalSGDEngine", "LookaheadEngine", "ProtocolEngine", "SpeculativeEngine",
           "StaleSyncEngine", "StalenessAwareEngine", "StalenessMeter", "SyncReplicasEngine", "SynchronousEngine",
           "build_engines", "engine_class", "needs_replica"]
