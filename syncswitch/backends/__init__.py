"""Provisioning backends (`cluster.backend` in a job spec), registered by name when this package is imported.

The layers that use them import it (the cluster manager, the CLI; a library loading specs does too): the registry
on the ground floor never imports upward.
"""

from syncswitch.backends.base import Backend, BackendCapabilities, ClusterInfo, NodeInfo, ProvisionRequest
from syncswitch.registry import BACKENDS


def get_backend(name: str) -> type[Backend]:
    """The backend class registered as `name`."""
    return BACKENDS.get(name, field="cluster.backend")


# Imported for the registration side effect; cloud SDKs stay lazy inside each backend.
from syncswitch.backends import gce, local, ray  # noqa: E402,F401

__all__ = ["BACKENDS", "Backend", "BackendCapabilities", "ClusterInfo", "NodeInfo", "ProvisionRequest", "get_backend"]
