"""The network model: a link as a first-come-first-served token bucket, the ring all-reduce's alpha-beta time, the
parameter servers' shared links, and `+link:` among an arrival model's suffixes."""

from __future__ import annotations

import pytest

from syncswitch.errors import SpecError
from syncswitch.simulator.arrivals import arrival_model
from syncswitch.simulator.network import Bucket, Link, Network, parse_link


def test_a_plain_link_sends_in_turn_at_its_rate():
    link = Bucket(rate=1000.0)
    assert link.send(0.0, 1000) == pytest.approx(1.0)
    assert link.send(0.5, 500) == pytest.approx(1.5)  # behind the first
    assert link.send(3.0, 100) == pytest.approx(3.1)  # idle meanwhile: no bank without a burst


def test_a_burst_banks_idle_time_up_to_its_depth():
    link = Bucket(rate=1000.0, burst=300.0)
    assert link.send(0.0, 200) == 0.0  # from the full bucket, at once
    assert link.send(0.0, 300) == pytest.approx(0.2)  # 100 left banked, 200 at the rate
    assert link.send(10.0, 1000) == pytest.approx(10.7)  # the bank refilled to 300, not to 9800


def test_a_ring_all_reduce_moves_2_n_minus_1_chunks_of_a_buffer_over_n():
    size, n = 4_000_000, 4
    own = Network(Link(mbit=8.0, latency_s=0.001), n, ps_tasks=n)  # 1e6 bytes a second
    assert own.all_reduce(0.0, [size]) == pytest.approx(2 * (n - 1) * size / n / 1e6)
    shared = Network(Link(mbit=8.0, shared=True), n, ps_tasks=n)
    assert shared.all_reduce(0.0, [size]) == pytest.approx(2 * (n - 1) * size / 1e6)  # every chunk on one medium
    assert Network(Link(mbit=8.0), 1, 1).all_reduce(0.0, [size]) == 0.0


def test_a_ring_step_takes_the_longer_of_its_chunk_and_the_latency():
    n = 4
    slow = Network(Link(mbit=8.0, latency_s=0.5), n, ps_tasks=n)
    assert slow.all_reduce(0.0, [400_000]) == pytest.approx(6 * 0.5)  # 0.1 s of bytes a step hide in the latency
    # Two collectives of one call (compressed values, the float32 loss and flag) share the steps and their latency.
    both = Network(Link(mbit=8.0, latency_s=0.5), n, ps_tasks=n)
    assert both.all_reduce(0.0, [400_000, 8]) == pytest.approx(6 * 0.5)
    fast = Network(Link(mbit=8.0, latency_s=0.5), n, ps_tasks=n)
    assert fast.all_reduce(0.0, [4_000_000, 4_000_000]) == pytest.approx(6 * 2.0)


def test_a_banked_burst_shortens_the_first_ring_steps():
    n, size = 2, 2_000_000  # 2 steps of 1e6 bytes on each link
    net = Network(Link(mbit=8.0, burst_bytes=500_000), n, ps_tasks=n)
    assert net.all_reduce(0.0, [size]) == pytest.approx(0.5 + 1.0)
    assert net.all_reduce(1.5, [size]) == pytest.approx(2.0)  # no idle time since: the bank is empty


def test_parameter_servers_serve_their_workers_in_turn_at_their_links_rate():
    net = Network(Link(mbit=8.0), members=4, ps_tasks=2)  # servers 2e6 bytes a second together
    waits = [net.push_pull(0.0, 1e6) for _ in range(4)]
    # Each worker's own link bounds it at 1 s; the servers' queue ends the fourth at 4 x 1e6 / 2e6.
    assert waits == pytest.approx([1.0, 1.0, 1.5, 2.0])
    assert Network(Link(mbit=8.0, latency_s=0.7), 4, 4).push_pull(0.0, 1e5) == pytest.approx(1.4)  # two round trips
    shared = Network(Link(mbit=8.0, shared=True), members=4, ps_tasks=4)
    assert [shared.push_pull(0.0, 1e6) for _ in range(2)] == pytest.approx([1.0, 2.0])


@pytest.mark.parametrize("text,expected", [
    ("100", Link(100.0)),
    ("10000:latency=0.05", Link(10000.0, latency_s=5e-5)),
    ("50:burst=256:shared", Link(50.0, burst_bytes=256 * 1024, shared=True)),
    ("shared", None), ("0", None), ("-5", None), ("50:latency=-1", None), ("50:rate=3", None), ("50:shared:x", None),
    ("inf", None), ("50:latency=1:latency=2", None),
])
def test_link_forms(text, expected):
    if expected is None:
        with pytest.raises(SpecError, match=r"\+link:MBIT\[:latency=MS\]"):
            parse_link(text, f"round-robin+link:{text}")
    else:
        assert parse_link(text, text) == expected


def test_link_stands_anywhere_among_the_suffixes_and_is_described():
    for text in ("speeds:0.2+cores:2+link:50:shared", "speeds:0.2+link:50:shared+cores:2",
                 "speeds:0.2+link:50:shared+cores:2+call:0.2"):
        model = arrival_model(text, 4, 0)
        assert model.cores == 2 and model.link == Link(50.0, shared=True)
        assert model.describe()["link"] == {"mbit": 50.0, "latency_ms": 0.0, "burst_kb": 0.0, "shared": True}
    free = arrival_model("round-robin", 4, 0)
    assert free.link is None and "link" not in free.describe()
    with pytest.raises(SpecError, match="unknown arrival model"):
        arrival_model("poisson+link:50", 4, 0)
