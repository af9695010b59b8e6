"""The lab's listener ports (tests/lab/apiserver.free_port): outside the kernel's ephemeral range, where another
process's outgoing connection could take a port between its choice and the listener's bind."""
import socket

from tests.lab import apiserver


def test_ports_are_below_the_ephemeral_range_distinct_and_free():
    low = apiserver._ephemeral_low()
    ports = [apiserver.free_port() for _i in range(50)]
    assert len(set(ports)) == 50
    for port in ports:
        assert apiserver._PORTS[0] <= port < min(low, apiserver._PORTS[1] + 1), port
    with socket.socket() as s:
        s.bind(("127.0.0.1", ports[-1]))   # still free: nothing holds it after the choice


def test_a_taken_port_is_not_handed_out(monkeypatch):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        taken = held.getsockname()[1]
        picks = iter([taken, taken, 21001])
        monkeypatch.setattr(apiserver.random.SystemRandom, "randint", lambda self, a, b: next(picks))
        monkeypatch.setattr(apiserver, "_PORTS", (1, 65535))
        monkeypatch.setattr(apiserver, "_handed_out", set())
        assert apiserver.free_port() == 21001
