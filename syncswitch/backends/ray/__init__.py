"""Ray backend (`cluster.backend: ray`); Ray itself is imported only when a job uses it."""

from syncswitch.backends.ray.backend import INSTALL_HINT, RayBackend

__all__ = ["INSTALL_HINT", "RayBackend"]
