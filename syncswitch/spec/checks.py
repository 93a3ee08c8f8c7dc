"""Checks across spec sections, made once at load time: what the backend and the policies need of the rest."""

from __future__ import annotations

from syncswitch.errors import SpecError
from syncswitch.registry import BACKENDS, CONFIGURATION_POLICIES, PROTOCOLS, STRAGGLER_POLICIES
from syncswitch.spec.fields import fail
from syncswitch.spec.model import JobSpec


def check_across(job: JobSpec) -> None:
    """Raise SpecError naming the field when the sections contradict each other or the backend."""
    backend = BACKENDS.get(job.cluster.backend, field="cluster.backend")
    if job.policy.source == "spec":  # a schedule from the spec names its phases policy.schedule[i]
        for i, phase in enumerate(job.policy.schedule):
            PROTOCOLS.get(phase.protocol).check_params(phase.param_dict, f"policy.schedule[{i}]", job.cluster.workers)
    stragglers = job.stragglers
    methods = backend.capabilities.slowdown_methods
    if stragglers.method not in methods:
        raise fail("stragglers.method", stragglers.method,
                   f"the {job.cluster.backend} backend injects stragglers by {' or '.join(methods)} only"
                   + (f" ({backend.capabilities.why_not.get(stragglers.method)})"
                      if stragglers.method in backend.capabilities.why_not else ""))
    if job.cluster.options.get("cpus_per_ps") and not job.cluster.options.get("cpus_per_node"):
        raise fail("cluster.cpus_per_ps", job.cluster.options["cpus_per_ps"],
                   "adds to the budget of a node that hosts a PS task: it needs cluster.cpus_per_node")
    if stragglers.method == "cpu" and not job.cluster.options.get("cpus_per_node"):
        raise fail("stragglers.method", "cpu", "divides a node's CPU budget: it needs cluster.cpus_per_node")
    policy = STRAGGLER_POLICIES.get(stragglers.policy, field="stragglers.policy")
    if policy.switches_in_place:
        if job.policy.switch_mode != "in-place":
            raise SpecError(f"stragglers.policy={stragglers.policy!r} switches protocols in place; it needs "
                            f"policy.switch_mode='in-place' (got {job.policy.switch_mode!r})")
        configuration = CONFIGURATION_POLICIES.get(job.policy.configuration)()
        batches = {configuration.configure(p, job.hyperparameters, job.cluster.workers).per_worker_batch
                   for p in ("bsp", "asp")}
        if len(batches) > 1:
            raise SpecError(f"stragglers.policy={stragglers.policy!r} switches protocols in place; it needs one "
                            f"per-worker batch size for BSP and ASP, but policy.configuration="
                            f"{job.policy.configuration!r} gives {sorted(batches)}")
