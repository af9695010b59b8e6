"""The shared WAN segment between lab clusters: a bridge in its own netns, gateways attach to it."""
from __future__ import annotations

import ipaddress

from tests.lab import netns


class LabWan:
    def __init__(self, prefix: str, cidr: str = "192.168.254.0/24"):
        self.prefix = prefix
        self.cidr = ipaddress.ip_network(cidr)
        self.netns = f"{prefix}-wan"
        self._hosts = self.cidr.hosts()
        self._ports = 0
        self.created = False

    def up(self) -> None:
        if self.created:
            return
        netns.create_netns([self.netns])
        netns.ip_batch(["link set lo up", "link add br0 type bridge", "link set br0 up"], netns=self.netns)
        self.created = True

    def allocate(self) -> tuple[str, str]:
        """Next free WAN address (with prefix length) and a fresh switch-port name."""
        self._ports += 1
        return f"{next(self._hosts)}/{self.cidr.prefixlen}", f"gw{self._ports}"

    def attach_commands(self, node_netns: str, port: str) -> list[str]:
        """Host-namespace `ip` commands creating the node's wan0 <-> WAN port veth."""
        return [f"link add name wan0 netns {node_netns} type veth peer name {port} netns {self.netns}"]

    def port_commands(self, port: str) -> list[str]:
        return [f"link set {port} master br0", f"link set {port} up"]

    def down(self) -> None:
        netns.delete_netns([self.netns])
        self.created = False
