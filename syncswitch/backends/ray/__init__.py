"""Ray backend (`cluster.backend: ray`); Ray itself is imported only when a job uses it."""

from syncswitch.backends.ray.backend import RayBackend
from syncswitch.backends.ray.loader import INSTALL_HINT

__all__ = ["INSTALL_HINT", "RayBackend"]
