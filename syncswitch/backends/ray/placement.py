"""Where a job's nodes go on a Ray cluster: one placement-group bundle per node, spread over Ray's nodes."""

from __future__ import annotations

import math

STRICT, SPREAD = "STRICT_SPREAD", "SPREAD"


def room(alive_nodes: list[dict], bundle: dict[str, float]) -> tuple[int, int]:
    """(how many bundles the cluster's alive nodes hold in all, how many nodes hold at least one)."""
    total, nodes = 0, 0
    for node in alive_nodes:
        have = node.get("Resources", {})
        fits = min(math.floor(have.get(name, 0.0) / amount + 1e-9) for name, amount in bundle.items())
        total += fits
        nodes += fits > 0
    return total, nodes


def strategy(alive_nodes: list[dict], bundle: dict[str, float], count: int) -> tuple[str, str]:
    """STRICT_SPREAD (each node of the job on its own Ray node) where enough Ray nodes can hold a bundle,
    SPREAD (as spread as the cluster allows) otherwise; with the reason, for the log."""
    _, nodes = room(alive_nodes, bundle)
    if nodes >= count:
        return STRICT, f"{nodes} Ray node(s) can each hold one of the {count} node(s): one per Ray node"
    return SPREAD, (f"only {nodes} Ray node(s) can hold a node of {describe(bundle)} for {count} node(s): "
                    "spread as far as they go, some share a Ray node")


def describe(bundle: dict[str, float]) -> str:
    return "{" + ", ".join(f"{k}: {v:g}" for k, v in bundle.items()) + "}"


def shortfall(alive_nodes: list[dict], bundle: dict[str, float], count: int) -> str:
    """Why `count` bundles cannot be placed now ('' when they fit)."""
    total, _ = room(alive_nodes, bundle)
    if total >= count:
        return ""
    have = ", ".join(describe({k: v for k, v in n.get("Resources", {}).items() if k in bundle})
                     for n in alive_nodes) or "none"
    return (f"the Ray cluster has room for {total} node(s) of {describe(bundle)} ({len(alive_nodes)} alive Ray "
            f"node(s), with {have})")


def unseen_checkpoint_dir(index: int, host: str, folder: str) -> str:
    """The error for a node that does not see the run's checkpoint.dir folder the manager made."""
    return (f"checkpoint.dir: node {index} (Ray node {host}) does not see {folder}, which the manager just made: "
            "the path is on the manager's own disk, not on a mount every node shares; mount one shared "
            "filesystem (NFS, Filestore, a bucket through gcsfuse) at the same path on every node")
