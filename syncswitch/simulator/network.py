"""The network between simulated nodes: an arrival model's `+link:MBIT[:latency=MS][:burst=KB][:shared]`.

Without a link, communication is free: a synchronous round ends when its slowest worker's steps do, an
asynchronous update lands as its step ends. With one, the rules' traffic takes time on it:

- A ring all-reduce (BSP by all-reduce, local SGD's averages, its momenta's at a phase's end) is TensorFlow's ring
  (ring.py): 2(n-1) steps, each member sending one chunk of size/n to the next at once (reduce-scatter, then
  all-gather): 2(n-1)/n of the buffer on each node's link, the bandwidth term of the alpha-beta model the ring's
  optimality comes from (Patarasuk and Yuan 2009; NCCL's "bus bandwidth"). A step takes the longer of its chunk's
  time on the link and the latency (a message's fixed cost: the RPC, the peers' turn on a shared core), as LogP
  spaces a processor's messages by the larger of its overhead and its gap: the fixed cost overlaps the bytes.
  Collectives issued in one call (compressed: the values, and the loss and stop flag in float32) run at once and
  share the steps. On a `shared` link, one medium carries every node's traffic (a loopback under a rate limit, as
  `bench --loopback-mbit` sets up): the n chunks of a step queue on it, 2(n-1) buffers in all.
- A parameter-server transfer (an asynchronous step's pull and push; BSP's on the servers, `aggregate: m`) moves
  the parameters each way through the worker's link and the servers' links: the PS tasks spread the variables,
  so together they serve at ps_tasks times a link's rate (one rate when shared), first come first served; at
  least two latencies (a pull and a push).

`burst=KB` makes each link a token bucket (`tc qdisc ... tbf`'s burst): while it idles it banks up to KB of rate
to send at once, so a worker's compute between two collectives hides up to KB of the next one's bytes. A real NIC
has no such bank (0, the default); the loopback's limit does, and the model needs it to be held to those runs.
"""

from __future__ import annotations

import dataclasses

from syncswitch.errors import SpecError

LINK = "+link:MBIT[:latency=MS][:burst=KB][:shared]"


@dataclasses.dataclass
class Bucket:
    """One first-come-first-served link of `rate` bytes a second that banks up to `burst` bytes while idle."""

    rate: float
    burst: float = 0.0
    at: float = 0.0  # when the link is next free (the bucket's level is `tokens` there)
    tokens: float = dataclasses.field(default=None)

    def __post_init__(self):
        if self.tokens is None:
            self.tokens = self.burst  # a link starts idle: its bucket full

    def send(self, now: float, nbytes: float) -> float:
        """When `nbytes` handed to the link at `now` (behind what it still carries) have all left."""
        start = max(now, self.at)
        tokens = min(self.burst, self.tokens + (start - self.at) * self.rate)
        if tokens >= nbytes:
            self.at, self.tokens = start, tokens - nbytes
            return start
        self.at, self.tokens = start + (nbytes - tokens) / self.rate, 0.0
        return self.at


@dataclasses.dataclass(frozen=True)
class Link:
    """Each node's link (or the one every node shares): Mbit/s each way, seconds a message, bytes of burst."""

    mbit: float
    latency_s: float = 0.0
    burst_bytes: float = 0.0
    shared: bool = False

    @property
    def rate(self) -> float:
        """Bytes a second."""
        return self.mbit * 1e6 / 8

    def describe(self) -> dict:
        return {"mbit": self.mbit, "latency_ms": self.latency_s * 1e3, "burst_kb": self.burst_bytes / 1024,
                "shared": self.shared}


class Network:
    """A simulation's links and their state: `all_reduce` and `push_pull` return the seconds a transfer takes."""

    def __init__(self, link: Link, members: int, ps_tasks: int):
        self.link, self.n = link, members
        # Ring traffic is symmetric: every node's link carries the same bytes at the same time, so one bucket stands
        # for each of them (for the one, when shared).
        self.ring = Bucket(link.rate, link.burst_bytes)
        servers = 1 if link.shared else max(1, ps_tasks)
        self.servers = self.ring if link.shared else Bucket(link.rate * servers, link.burst_bytes * servers)

    def all_reduce(self, now: float, buffers: list[float]) -> float:
        """Seconds the ring all-reduces of `buffers` (bytes each), issued together at `now`, take: they run at once
        (one call: compressed, the values and the float32 loss beside them), their chunks sharing each ring step."""
        if self.n == 1 or not buffers:
            return 0.0
        step = sum(buffers) / self.n * (self.n if self.link.shared else 1)  # on each link, a ring step
        t = now
        for _ in range(2 * (self.n - 1)):  # each step waits for the previous one's chunk
            t = max(self.ring.send(t, step), t + self.link.latency_s)
        return t - now

    def push_pull(self, now: float, nbytes: float) -> float:
        """Seconds one worker's pull and push, `nbytes` together, asked for at `now`, take through the servers."""
        done = self.servers.send(now, nbytes)
        if not self.link.shared:  # the worker's own link carries its two transfers at its rate
            done = max(done, now + nbytes / self.link.rate)
        return max(done, now + 2 * self.link.latency_s) - now


def parse_link(arg: str, text: str) -> Link:
    """`MBIT[:latency=MS][:burst=KB][:shared]` (what follows `+link:`); a one-line error names the form."""
    first, *named = arg.split(":")
    fail = SpecError(f"--arrivals {text}: expected {LINK} with MBIT > 0 and LATENCY, BURST >= 0, "
                     "e.g. +link:10000:latency=0.05")
    given, shared = {}, False
    for item in named:
        key, eq, value = item.partition("=")
        if item == "shared":
            shared = True
        elif eq and key in ("latency", "burst") and key not in given:
            given[key] = value
        else:
            raise fail
    try:
        mbit, latency, burst = float(first), float(given.get("latency", 0)), float(given.get("burst", 0))
    except ValueError:
        raise fail from None
    if not (mbit > 0 and latency >= 0 and burst >= 0) or mbit == float("inf"):
        raise fail
    return Link(mbit, latency / 1e3, burst * 1024, shared)
