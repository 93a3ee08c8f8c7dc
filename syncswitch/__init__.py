"""syncswitch: parameter-server training that switches BSP to ASP at the right moment."""

__version__ = "0.1.0"
