"""Ray itself, imported only when a job (or a dead job's cleanup) uses it: the module, or the install hint."""

from __future__ import annotations

from syncswitch.errors import ClusterError

INSTALL_HINT = "the ray backend needs Ray: pip install 'syncswitch[ray]'"


def import_ray():
    """The `ray` module, or a ClusterError with the one-line install hint."""
    try:
        import ray
    except ImportError:
        raise ClusterError(INSTALL_HINT) from None
    return ray
