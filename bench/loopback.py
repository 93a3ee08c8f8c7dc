"""The loopback as a network of limited bandwidth: a token bucket (`tc qdisc ... tbf`) on `lo` for a bench part.

Every process of a local run talks over `lo` (the workers' ring all-reduce, parameter-server transfers, the
manager's calls), at memory speed: on one machine communication costs next to nothing, where on a cluster it is
what a protocol that communicates less saves. A token bucket on `lo` makes all of it share one link of the given
rate, so the same comparison can be run where communication costs time; `tc -s` counts the bytes each run sent.
One shared link is harsher than a switched cluster, where each node's own link carries its part of a ring.

The burst holds a 64 KiB loopback packet (a smaller bucket stalls them) and the long latency keeps the queue from
dropping. Needs root and `tc`. The limit is removed when the part ends, however it ends (an exception, Ctrl-C,
SIGTERM, the interpreter's exit), and only a limit this module set is ever removed.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import signal
import subprocess

OPTION = "--loopback-mbit"
_SENT = re.compile(r"^\s*Sent (\d+) bytes", re.MULTILINE)


def parse_sent(text: str) -> int | None:
    """Bytes sent by the root qdisc in `tc -s qdisc show dev lo`'s output (None: no count there)."""
    match = _SENT.search(text)
    return int(match.group(1)) if match else None


def _tc(run, *args: str) -> str:
    done = run(["tc", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{OPTION}: tc {' '.join(args)} failed: {(done.stderr or done.stdout).strip()}")
    return done.stdout


def _is_ours(shown: str) -> bool:
    """Whether `tc qdisc show dev lo` shows a token bucket, the only qdisc this module puts there."""
    return " tbf " in f" {shown}"


def sent_bytes(run=subprocess.run) -> int | None:
    """Bytes through the loopback's limit so far; None where no limit of this module's is in place."""
    text = _tc(run, "-s", "qdisc", "show", "dev", "lo")
    return parse_sent(text) if _is_ours(text) else None


@contextlib.contextmanager
def limited(mbit: float | None, run=subprocess.run, is_root=None):
    """Within: all loopback traffic limited to `mbit` Mbit/s (None or 0: no limit, yields None). Yields what was
    set: {"loopback_mbit", "qdisc"}."""
    if not mbit:
        yield None
        return
    if run is subprocess.run and not shutil.which("tc"):
        raise SystemExit(f"{OPTION}: needs `tc` (iproute2) on the PATH")
    if not (os.geteuid() == 0 if is_root is None else is_root):
        raise SystemExit(f"{OPTION}: needs root (a qdisc on lo)")
    present = _tc(run, "qdisc", "show", "dev", "lo").strip()
    if present and not present.startswith("qdisc noqueue"):
        raise SystemExit(f"{OPTION}: lo already has a qdisc ({present.splitlines()[0]}): not replacing another's")
    _tc(run, "qdisc", "add", "dev", "lo", "root", "tbf", "rate", f"{mbit:g}mbit", "burst", "256kb", "latency", "4s")

    def remove(*_):
        if _is_ours(_tc(run, "qdisc", "show", "dev", "lo")):
            _tc(run, "qdisc", "del", "dev", "lo", "root")

    def on_term(signum, _frame):  # lift the limit, then die of the signal as the process would have
        remove()
        signal.signal(signum, previous)
        os.kill(os.getpid(), signum)

    atexit.register(remove)
    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield {"loopback_mbit": mbit, "qdisc": _tc(run, "qdisc", "show", "dev", "lo").strip()}
    finally:
        signal.signal(signal.SIGTERM, previous)
        atexit.unregister(remove)
        remove()
