"""The Launch message each node's task starts from: cluster, phases with their configurations, where to write."""

from __future__ import annotations

import dataclasses
import json
import os

from syncswitch.cluster_manager.checkpoints import checkpoint_folder
from syncswitch.cluster_manager.plan import SwitchMode
from syncswitch.cluster_manager.switch_timing import decided_as_it_goes, judged_switch
from syncswitch.policies.speed import REPORT_INTERVAL_S, REPORT_WINDOW
from syncswitch.wire import agent_pb2 as pb
from syncswitch.wire.codec import struct

# Every node's session: kernels on one intra-op thread; the simulator matches it (simulator/model.py).
INTRA_THREADS, INTER_THREADS = 1, 2


def phase_config(config) -> pb.PhaseConfig:
    """A policies.PhaseConfig on the wire."""
    return pb.PhaseConfig(**dataclasses.asdict(config))


def launch_message(spec, plan, cluster, run_dir: str, index: int, start_phase: int, restore_from: str = "",
                   checkpoint_name: str = "model.ckpt") -> pb.Launch:
    """What node `index` needs to start the plan's phase `start_phase` (restoring `restore_from`, if given)."""
    hp = spec.hyperparameters
    # A switch target the rules may never enter (the loss rule may stay past its latest point, the speed rule where a
    # trial cannot pay) is built but on standby: its first call is paid at the switch, where the speed rule's measure
    # leaves the trial's first step out. Warming it up before training cost the ResNet 13-22 s of start-up a node on
    # 2 cores in runs that never left BSP (bench/notebook/2026-11-27-coordinator-9.md, section 6).
    live = decided_as_it_goes(spec)
    phases = [pb.PhasePlan(protocol=p.protocol, until=p.until, config=phase_config(p.config),
                           build=plan.mode is SwitchMode.IN_PLACE or k == start_phase, params=struct(plan.params(p)),
                           standby=live and k != start_phase and judged_switch(plan.phases, k))
              for k, p in enumerate(plan)]
    # Policies may switch to a protocol the plan lacks: in place, its update op is built too, as a
    # phase never entered. On standby: not warmed up before training (a rollback or greedy's interlude pays its
    # first call, ~1 s on 2 cores, where every run paid it at start-up).
    phases += [pb.PhasePlan(protocol=p, until=1.0, config=phase_config(plan.config_for(p)),
                            build=plan.mode is SwitchMode.IN_PLACE, params=struct(plan.params(p)), standby=True)
               for p in plan.extra_protocols()]
    workload = pb.Workload(samples=spec.workload.samples) if spec.workload.samples else \
        pb.Workload(epochs=spec.workload.epochs)
    return pb.Launch(
        task_index=index, num_workers=len(cluster.nodes), ps_hosts=cluster.ps_hosts(spec.cluster.parameter_servers),
        worker_hosts=cluster.worker_hosts(), params_json=json.dumps(spec.params), seed=spec.seed,
        lr_decay=pb.LrDecay(boundaries=hp.lr_decay.boundaries, factors=hp.lr_decay.factors,
                            warmup=hp.lr_decay.warmup, cosine=hp.lr_decay.cosine is not None,
                            cosine_to=hp.lr_decay.cosine or 0.0),
        clip_norm=hp.clip_norm or 0.0,
        compression=hp.compression or "",
        workload=workload, phases=phases, start_phase=start_phase,
        # Without a shared filesystem or checkpoint.dir the agent picks a node-local folder (its work dir's
        # checkpoints/).
        checkpoint_dir=checkpoint_folder(spec, run_dir) if cluster.shared_filesystem or spec.checkpoint.dir else "",
        eval_every=spec.evaluation.every, intra_threads=INTRA_THREADS, inter_threads=INTER_THREADS,
        metrics_interval_s=REPORT_INTERVAL_S, window=REPORT_WINDOW,
        restore_from=restore_from, checkpoint_name=checkpoint_name,
        # Durable checkpoints besides the evaluation points (which are durable too).
        checkpoint_every=spec.checkpoint.every or 0.0, checkpoint_every_s=spec.checkpoint.every_s or 0.0,
        step_timeout_s=spec.recovery.step_timeout_s,
        # Verification mode: the chief reports variable digests at save and restore.
        report_variables=os.environ.get("SYNCSWITCH_REPORT_VARIABLES") == "1",
        # Measurement mode: every asynchronous update's staleness row in its phase's record (update_log.py).
        update_log=os.environ.get("SYNCSWITCH_UPDATE_LOG") == "1")

