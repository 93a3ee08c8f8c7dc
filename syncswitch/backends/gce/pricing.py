"""A small built-in table of GCE list prices for the dry-run's hourly cost ESTIMATE (never a quote)."""

from __future__ import annotations

import re

from syncswitch.backends.gce.options import GceConfig

PRICES_AS_OF = "2024 on-demand list prices, us-central1"

# USD per hour; n1 shapes follow the per-vCPU ($0.031611) and per-GB ($0.004237) rates.
MACHINE_USD_H = {
    "n1-standard-1": 0.0475, "n1-standard-2": 0.0950, "n1-standard-4": 0.1900,
    "n1-standard-8": 0.3800, "n1-standard-16": 0.7600, "n1-standard-32": 1.5200,
    "n1-highmem-2": 0.1184, "n1-highmem-4": 0.2368, "n1-highmem-8": 0.4736, "n1-highmem-16": 0.9472,
    "n1-highcpu-8": 0.2836, "n1-highcpu-16": 0.5672,
    "e2-standard-4": 0.1340, "e2-standard-8": 0.2681,
    "n2-standard-8": 0.3885,
    "a2-highgpu-1g": 3.6731, "a2-highgpu-2g": 7.3462, "a2-highgpu-4g": 14.6924, "a2-highgpu-8g": 29.3848,
    "g2-standard-4": 0.7068, "g2-standard-8": 0.8536, "g2-standard-16": 1.1470,
}
GPU_USD_H = {
    "nvidia-tesla-t4": 0.35, "nvidia-tesla-k80": 0.45, "nvidia-tesla-p4": 0.60,
    "nvidia-tesla-p100": 1.46, "nvidia-tesla-v100": 2.48,
}
# a2/g2 prices above already include their bundled GPUs.
BUNDLED_GPU_FAMILIES = ("a2-", "a3-", "g2-")
DISK_USD_GB_MONTH = {"pd-standard": 0.04, "pd-balanced": 0.10, "pd-ssd": 0.17}
HOURS_PER_MONTH = 730


def _machine_price(machine: str) -> float | None:
    if machine in MACHINE_USD_H:
        return MACHINE_USD_H[machine]
    m = re.fullmatch(r"n1-standard-(\d+)", machine)
    return 0.0475 * int(m.group(1)) if m else None


def hourly_cost_line(cfg: GceConfig, nodes: int) -> str:
    """One line: total $/hour for `nodes` nodes, with its parts, marked as an estimate."""
    machine = _machine_price(cfg.machine_type)
    parts, missing = [], []
    per_node = 0.0
    if machine is None:
        missing.append(cfg.machine_type)
    else:
        per_node += machine
        parts.append(f"{cfg.machine_type} ${machine:.3f}")
    if cfg.accelerator and not cfg.machine_type.startswith(BUNDLED_GPU_FAMILIES):
        gpu = GPU_USD_H.get(cfg.accelerator["type"])
        if gpu is None:
            missing.append(cfg.accelerator["type"])
        else:
            per_node += gpu * cfg.accelerator["count"]
            parts.append(f"{cfg.accelerator['count']}x {cfg.accelerator['type']} ${gpu:.2f}")
    disk = DISK_USD_GB_MONTH[cfg.disk_type] * cfg.disk_size_gb / HOURS_PER_MONTH
    per_node += disk
    parts.append(f"{cfg.disk_size_gb} GB {cfg.disk_type} ${disk:.3f}")
    line = (f"ESTIMATED cost: ${per_node * nodes:.2f}/hour = {nodes} node(s) x ${per_node:.3f} "
            f"({' + '.join(parts)})")
    notes = [f"built-in {PRICES_AS_OF}", "excludes egress, discounts and other regions' rates"]
    if cfg.spot:
        notes.append("spot prices vary and are usually 60-90% lower: this is the on-demand upper bound")
    if missing:
        notes.append(f"no built-in price for {', '.join(missing)}: not counted")
    return f"{line} [estimate only: {'; '.join(notes)}; see https://cloud.google.com/compute/vm-instance-pricing]"
