"""The shared WAN segment between lab clusters: a switch (tests.lab.switch) in its own netns, gateways attach
to it with a port named wan0."""
from __future__ import annotations

import ipaddress

from tests.lab import netns, switch


class LabWan:
    def __init__(self, prefix: str, cidr: str = "192.168.254.0/24"):
        self.prefix = prefix
        self.cidr = ipaddress.ip_network(cidr)
        self.netns = f"{prefix}-wan"
        self._hosts = self.cidr.hosts()
        self.created = False

    def up(self) -> None:
        if self.created:
            return
        netns.create_netns([self.netns])
        netns.ip_batch(switch.up_commands(), netns=self.netns)
        self.created = True

    def allocate(self) -> str:
        """Next free WAN address, with its prefix length."""
        return f"{next(self._hosts)}/{self.cidr.prefixlen}"

    def attach_commands(self, node_netns: str) -> list[str]:
        """`ip` commands, run inside the WAN's netns, giving the node its port wan0."""
        return switch.attach_commands(node_netns, "wan0")

    def down(self) -> None:
        netns.delete_netns([self.netns])
        self.created = False
