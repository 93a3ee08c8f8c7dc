"""Registered provisioning backends (`cluster.backend` in a job spec)."""

from syncswitch.cluster_manager.backends.base import Backend, ClusterInfo, NodeInfo, ProvisionRequest
from syncswitch.registry import Registry

BACKENDS: Registry[type[Backend]] = Registry("backend")


def get_backend(name: str) -> type[Backend]:
    """The backend class registered as `name` (importing built-ins lazily)."""
    _load_builtins()
    return BACKENDS.get(name, field="cluster.backend")


def _load_builtins() -> None:
    # Import for the registration side effect; cloud SDKs stay lazy inside each backend.
    import syncswitch.cluster_manager.backends.local  # noqa: F401
    try:
        import syncswitch.cluster_manager.backends.gce  # noqa: F401
    except ImportError:
        pass


__all__ = ["BACKENDS", "Backend", "ClusterInfo", "NodeInfo", "ProvisionRequest", "get_backend"]
