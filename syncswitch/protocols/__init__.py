"""Synchronization protocols: what each one is called and takes (`catalog`), and its TensorFlow update path (`engines`).

Importing this package registers the catalog's protocols in the ground floor's `PROTOCOLS` registry, which the spec
checks a schedule's names and parameters against; the engines (TensorFlow) stay unimported until the node side
asks for them.
"""

from syncswitch.protocols import catalog
from syncswitch.registry import PROTOCOLS

__all__ = ["PROTOCOLS", "catalog"]
