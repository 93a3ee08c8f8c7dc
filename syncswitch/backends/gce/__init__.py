"""Google Compute Engine backend (`cluster.backend: gce`); google-cloud-compute is imported only when used."""

from syncswitch.backends.gce.backend import GceBackend
from syncswitch.backends.gce.net import wait_for_port

__all__ = ["GceBackend", "wait_for_port"]
