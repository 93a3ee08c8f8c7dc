"""GPU and CPU quota check before anything is created: keep the zones whose region fits, or fail with numbers."""

from __future__ import annotations

import re
from typing import Callable

from syncswitch.backends.gce.compute import ComputeClient, GceError
from syncswitch.backends.gce.options import GPU_QUOTA_METRICS, GceConfig, region_of
from syncswitch.errors import ClusterError


def vcpus(machine_type: str) -> int | None:
    """vCPUs of a predefined N1 shape (the ones counted by the regional CPUS quota), else None."""
    m = re.fullmatch(r"n1-(?:standard|highmem|highcpu)-(\d+)", machine_type)
    return int(m.group(1)) if m else None


def _needs(cfg: GceConfig, nodes: int, quotas: dict[str, tuple[float, float]]) -> list[tuple[str, int]]:
    """(metric, amount) pairs the job consumes in one region."""
    out = []
    spot_prefix = "PREEMPTIBLE_"

    def pick(metric: str) -> str:
        # Spot VMs use the preemptible quota when the project has one, the standard one otherwise.
        if cfg.spot and quotas.get(spot_prefix + metric, (0.0, 0.0))[0] > 0:
            return spot_prefix + metric
        return metric

    if cfg.accelerator:
        out.append((pick(GPU_QUOTA_METRICS[cfg.accelerator["type"]]), nodes * cfg.accelerator["count"]))
    cpus = vcpus(cfg.machine_type)
    if cpus:
        out.append((pick("CPUS"), nodes * cpus))
    return out


def _shortfalls(needs: list[tuple[str, int]], quotas: dict[str, tuple[float, float]]) -> list[str]:
    out = []
    for metric, need in needs:
        limit, usage = quotas.get(metric, (0.0, 0.0))
        if limit - usage < need:
            out.append(f"{metric} needs {need}, limit {limit:g}, in use {usage:g} ({max(limit - usage, 0):g} free)")
    return out


def check(api: ComputeClient, cfg: GceConfig, nodes: int, event: Callable[[str], None]) -> tuple[str, ...]:
    """The zones of `cfg.zones` whose region has quota for `nodes` nodes, in order; raise if none."""
    hint = (f"request more at https://console.cloud.google.com/iam-admin/quotas?project={api.project}, "
            f"add zones in other regions to cluster.zones, or lower cluster.workers")
    if cfg.accelerator and not cfg.spot:
        try:
            project_quotas = api.project_quotas()
        except GceError as exc:
            event(f"could not read the project's GPU quota ({exc}); going ahead without that check")
            project_quotas = {}
        if "GPUS_ALL_REGIONS" in project_quotas:
            short = _shortfalls([("GPUS_ALL_REGIONS", nodes * cfg.accelerator["count"])], project_quotas)
            if short:
                raise ClusterError(f"not enough GPU quota for {nodes} node(s): project {api.project}: "
                                   f"{short[0]}; {hint}")
    usable, problems = [], []
    checked: dict[str, list[str] | None] = {}
    for zone in cfg.zones:
        region = region_of(zone)
        if region not in checked:
            try:
                quotas = api.region_quotas(region)
            except GceError as exc:
                event(f"could not read the quota of {region} ({exc}); trying its zones anyway")
                checked[region] = None
            else:
                checked[region] = _shortfalls(_needs(cfg, nodes, quotas), quotas)
                if checked[region]:
                    problems.append(f"{region}: {'; '.join(checked[region])}")
                    event(f"skipping zone(s) in {region}: not enough quota ({'; '.join(checked[region])})")
        if not checked[region]:
            usable.append(zone)
    if not usable:
        gpu = f" + {cfg.accelerator['count']}x {cfg.accelerator['type']}" if cfg.accelerator else ""
        raise ClusterError(f"not enough quota for {nodes} node(s) of {cfg.machine_type}{gpu} in project "
                           f"{api.project}: {' | '.join(problems)}; {hint}")
    return tuple(usable)
