"""The malloc every process of a bench part runs on: the system's, or gperftools' tcmalloc preloaded.

On some hosts glibc's malloc hands each step's tensor memory back to the kernel and faults it in again (MWMS spent
half its CPU in the kernel on one), and a TensorFlow user would tune that away: `--allocator tcmalloc` preloads it
into every process of every variant alike.
"""

from __future__ import annotations

import os

# Where distributions put gperftools' tcmalloc (Debian/Ubuntu's libtcmalloc-minimal4, Fedora's gperftools-libs).
TCMALLOC_NAMES = ("libtcmalloc_minimal.so.4", "libtcmalloc.so.4")
LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib")
ALLOCATORS = ("system", "tcmalloc")


def allocator_library(name: str, dirs=LIB_DIRS) -> str | None:
    """The shared library to preload for allocator `name`; None for the system's malloc. Exits with a one-line
    error where tcmalloc is asked for and not installed."""
    if name == "system":
        return None
    if name not in ALLOCATORS:
        raise SystemExit(f"--allocator: unknown allocator {name!r}; valid: {', '.join(ALLOCATORS)}")
    for directory in dirs:
        for lib in TCMALLOC_NAMES:
            path = os.path.join(directory, lib)
            if os.path.exists(path):
                return path
    raise SystemExit(f"--allocator tcmalloc: none of {', '.join(TCMALLOC_NAMES)} in {', '.join(dirs)} "
                     "(install libtcmalloc-minimal4 or gperftools)")


def allocator_of(doc: dict) -> str:
    """The allocator a result file's runs used: its `allocator` name, `system` for files written before the
    option."""
    return (doc.get("allocator") or {}).get("name", "system")


def allocator_env(library: str | None, env: dict) -> dict:
    """`env` with `library` preloaded ahead of whatever the caller preloads already."""
    if not library:
        return dict(env)
    return dict(env, LD_PRELOAD=" ".join(filter(None, [library, env.get("LD_PRELOAD")])))
