"""`bsp`: all-reduce between the workers' replicas by default, SyncReplicasOptimizer where a phase needs the
parameter servers to aggregate (backup workers, an elastic group, or a model all-reduce cannot carry)."""

from __future__ import annotations

from .allreduce import AllReduceEngine
from .base import ProtocolEngine
from .bsp import SyncReplicasEngine
from .replica_training import gradients_supported


def wants_ps(params: dict | None) -> bool:
    """Whether a BSP phase with `params` aggregates on the parameter servers (backup workers, or all-reduce off)."""
    params = params or {}
    return not params.get("allreduce", True) or int(params.get("aggregate") or 0) > 0


class SynchronousEngine(ProtocolEngine):
    """BSP's paths in one graph, the parameter-server one only where a phase of the launch can take it; each
    phase's entry picks one (`allreduce` and `aggregate` parameters).

    All-reduce cannot drop a late gradient (backup workers) nor leave a worker out mid-phase (the elastic
    policy's shrink): the parameter-server path keeps both. Everything the step loop reads is the mode's.
    """

    name = "bsp"
    needs_replica = True

    def __init__(self, optimizer, grads_and_vars, global_step, samples, per_worker_batch: int,
                 num_workers: int, is_chief: bool, replica=None, schedule=None, bsp_ps: bool = True,
                 clip_norm=None, compression=None, **shared):
        """`bsp_ps`: whether a phase of this launch may take the parameter-server path (graph.py decides from the
        phases' parameters); without it only all-reduce is built, where the model allows it."""
        fits = replica is not None and schedule is not None and num_workers > 1 and gradients_supported(replica)
        self.ps = None
        if bsp_ps or not fits:
            self.ps = SyncReplicasEngine(optimizer, grads_and_vars, global_step, samples, per_worker_batch,
                                         num_workers, is_chief, clip_norm=clip_norm, **shared)
        self.fast = None
        if fits:
            self.fast = AllReduceEngine(optimizer, global_step, samples, per_worker_batch, num_workers, is_chief,
                                        replica, schedule, clip_norm, compression)
        self.samples_now = self.ps.samples_now if self.ps is not None else None
        self.active: ProtocolEngine = self.fast or self.ps

    def modes(self) -> list[ProtocolEngine]:
        """Every path, in build order: each is warmed up before training (the same order on every worker)."""
        return [m for m in (self.ps, self.fast) if m is not None]

    def choose(self, params: dict | None) -> ProtocolEngine:
        if self.fast is None:
            return self.ps
        if not wants_ps(params):
            return self.fast
        if self.ps is None:  # the launch's phases said no phase would (graph.py): a plan changed under the nodes
            raise ValueError(f"bsp parameters {params} need the parameter-server path, which this launch did not "
                             "build (no phase of its plan asked for it)")
        return self.ps

    # What the step loop reads, from the mode the phase entered.
    train_op = property(lambda self: self.active.train_op)
    samples_after = property(lambda self: self.active.samples_after)
    push_op = property(lambda self: self.active.push_op)
    step_op = property(lambda self: self.active.step_op)
    step_samples = property(lambda self: self.active.step_samples)
    step_wait_s = property(lambda self: self.active.step_wait_s)
    loss = property(lambda self: self.active.loss)
    agreed_stop = property(lambda self: getattr(self.active, "agreed_stop", None))
    stop = property(lambda self: getattr(self.active, "stop", None))
    collective = property(lambda self: self.active.collective)
    collective_wait_s = property(lambda self: self.active.collective_wait_s)
    snapshot = property(lambda self: self.active.snapshot)

    def choose_path(self, params: dict | None) -> None:
        self.active = self.choose(params)

    def enter_chief(self, session, params: dict | None = None) -> None:
        self.choose_path(params)
        if self.ps is not None:
            self.ps.enter_chief(session, params)  # the parameter-server path's state is reset either way
        else:
            self.active.enter_chief(session, params)

    def enter_worker(self, session, params: dict | None = None) -> None:
        self.choose_path(params)
        self.active.enter_worker(session, params)

    def release(self, session) -> None:
        if self.ps is not None:  # a collective step has no waiter to free: its peers stop at the same step
            self.ps.release(session)

    def after_step(self, session, state) -> float:
        return self.active.after_step(session, state)

    def publish(self, session) -> None:
        """Write the phase's model to the parameter servers (before a checkpoint)."""
        if self.active is self.fast:
            self.fast.publish(session)

    def add_snapshot(self, saved, global_step, samples) -> None:
        if self.fast is not None:
            self.fast.add_snapshot(saved, global_step, samples)

    def stats(self, session) -> dict:
        return {"allreduce": self.active is self.fast, **self.active.stats(session)}

    def set_group(self, session, size: int) -> None:
        if self.ps is None:  # the plan forces the parameter-server path under a group-shrinking policy (plan.py)
            raise ValueError("the elastic group needs BSP's parameter-server path, which this launch did not build")
        self.ps.set_group(session, size)
