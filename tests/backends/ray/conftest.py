"""A real multi-node Ray cluster on this machine (`ray.cluster_utils.Cluster`): three raylets, each a Ray node
with its own resources, shared by a test module."""

import os
import time

import pytest

NODES, CPUS_PER_NODE = 3, 1
NODE_ARGS = {"num_cpus": CPUS_PER_NODE, "object_store_memory": 80 * 1024 * 1024}


@pytest.fixture(scope="module")
def ray_cluster():
    from ray.cluster_utils import Cluster

    saved = {k: os.environ.get(k) for k in ("RAY_USAGE_STATS_ENABLED",)}
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    # Ray binds its nodes to the machine's address (it turns 127.0.0.1 into that address when it connects).
    args = NODE_ARGS
    # A dead raylet is noticed after 5 failed health checks: 5 s at this period instead of Ray's default 15 s.
    config = {"health_check_period_ms": 1000}
    cluster = Cluster(initialize_head=True, head_node_args={**args, "include_dashboard": False,
                                                            "_system_config": config})
    try:
        for _ in range(NODES - 1):
            cluster.add_node(**args)
        cluster.wait_for_nodes()
        yield cluster
    finally:
        cluster.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def cluster_is_clean(address: str, timeout_s: float = 15.0) -> str:
    """'' once no actor or placement group of a syncswitch job holds anything on the cluster; else what does."""
    import ray

    ray.init(address=address, log_to_driver=False, logging_level="ERROR")
    try:
        deadline = time.time() + timeout_s
        while True:
            actors = [a for a in ray.util.list_named_actors(all_namespaces=True) if a["name"].startswith("syncswitch")]
            groups = [g for g in ray.util.placement_group_table().values() if g["state"] != "REMOVED"]
            free, total = ray.available_resources().get("CPU", 0), ray.cluster_resources().get("CPU", 0)
            left = f"actors {actors}, placement groups {groups}, {free:g} of {total:g} CPU free"
            if not actors and not groups and free == total:
                return ""
            if time.time() > deadline:
                return left
            time.sleep(0.2)
    finally:
        ray.shutdown()
