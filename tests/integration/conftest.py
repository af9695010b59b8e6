"""Fixtures for root tests on a real kernel: throwaway network namespaces named with the lab prefix."""

import pytest

from tests.conftest import require_root
from tests.lab import names, netns


@pytest.fixture
def netns_factory():
    """netns_factory("a", "b") -> ["lfabXXXXt-a", "lfabXXXXt-b"], created with lo up; removed after."""
    require_root()
    made: list[str] = []
    lab_id = names.new_lab_id()

    def make(*suffixes: str) -> list[str]:
        new = [f"{names.lab_prefix(lab_id)}t-{s}" for s in suffixes]
        netns.create_netns(new)
        for n in new:
            netns.ip_batch(["link set lo up"], netns=n)
        made.extend(new)
        return new

    yield make
    netns.delete_netns_and_processes(made)


@pytest.fixture
def veth_pair(netns_factory):
    """Two namespaces joined by a veth: (ns_a, ns_b) with 192.168.77.1/24 and .2/24 on `eth0`."""
    a, b = netns_factory("a", "b")
    netns.ip_batch([f"link add eth0 netns {a} type veth peer name eth0 netns {b}"])
    netns.ip_batch(["addr add 192.168.77.1/24 dev eth0", "link set eth0 up"], netns=a)
    netns.ip_batch(["addr add 192.168.77.2/24 dev eth0", "link set eth0 up"], netns=b)
    return a, b
