"""The local backend's ports: distinct, free, and out of the range outgoing connections draw from."""

import socket

from syncswitch.backends import local


def test_ports_are_distinct_bindable_and_below_the_ephemeral_range():
    ports = local.free_ports(24)
    assert len(set(ports)) == 24
    span = local.ephemeral_range()
    if span and span[0] - 10000 >= 1000:
        assert all(10000 <= p < span[0] for p in ports)
    for p in ports[:4]:
        with socket.socket() as s:
            s.bind(("0.0.0.0", p))


def test_without_room_below_the_range_the_kernel_picks(monkeypatch):
    monkeypatch.setattr(local, "ephemeral_range", lambda: (10500, 60999))
    ports = local.free_ports(3)
    assert len(set(ports)) == 3 and all(p > 0 for p in ports)


def test_a_taken_port_is_never_handed_out(monkeypatch):
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        port = taken.getsockname()[1]
        picks = iter([port, port, port + 1 if port < 60000 else port - 1])
        monkeypatch.setattr(local, "ephemeral_range", lambda: (65000, 65535))
        monkeypatch.setattr(local.random.SystemRandom, "randrange", lambda self, lo, hi: next(picks, 10001))
        ports = local.free_ports(1)
        assert ports != [port]
