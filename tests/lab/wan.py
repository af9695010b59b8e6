"""The WAN between lab clusters, in its own netns. By default a switch (tests.lab.switch): gateways attach to it with
a port named wan0 and share one subnet. Routed (LabWan(routed=True)): the netns is a router instead, each gateway on
its own /30 link (a veth, wan0 on the gateway's side), so a path MTU can be set on the router (set_path): a route
MTU on every link, with the ICMP "fragmentation needed" the router sends (icmp=True) or silently dropped (a PMTU
black hole, icmp=False)."""
from __future__ import annotations

import ipaddress

from tests.lab import netns, switch

BLACK_HOLE_TABLE = "lab_pmtu_black_hole"


class LabWan:
    def __init__(self, prefix: str, cidr: str = "192.168.254.0/24", routed: bool = False):
        self.prefix = prefix
        self.cidr = ipaddress.ip_network(cidr)
        self.netns = f"{prefix}-wan"
        self.routed = routed
        self._hosts = self.cidr.hosts()
        self._links = self.cidr.subnets(new_prefix=30)
        self.router_links: dict[str, tuple[str, str]] = {}   # node wan address -> (router's link, router's address)
        self.created = False

    def up(self) -> None:
        if self.created:
            return
        netns.create_netns([self.netns])
        if self.routed:
            netns.ip_batch(["link set lo up"], netns=self.netns)
            netns.sysctl_in(self.netns, {"net.ipv4.ip_forward": "1"})
        else:
            netns.ip_batch(switch.up_commands(), netns=self.netns)
        self.created = True

    def allocate(self) -> str:
        """Next free WAN address, with its prefix length (routed: the gateway's end of its own /30 link)."""
        if not self.routed:
            return f"{next(self._hosts)}/{self.cidr.prefixlen}"
        link = next(self._links)
        router, node = list(link.hosts())
        self.router_links[str(node)] = (f"r{len(self.router_links) + 1}", str(router))
        return f"{node}/30"

    def attach_commands(self, node_netns: str, wan_ip: str = "") -> list[str]:
        """`ip` commands, run inside the WAN's netns, giving the node its port wan0 (routed: the router's end of
        the node's link configured and up)."""
        if not self.routed:
            return switch.attach_commands(node_netns, "wan0")
        link, router = self.router_links[wan_ip.split("/")[0]]
        return [f"link add name {link} type veth peer name wan0 netns {node_netns}",
                f"addr add {router}/30 dev {link}", f"link set {link} up"]

    def node_commands(self, wan_ip: str) -> list[str]:
        """`ip` commands, run inside the node's netns after wan0 is up: routed, the rest of the WAN via the router."""
        if not self.routed:
            return []
        return [f"route add {self.cidr} via {self.router_links[wan_ip.split('/')[0]][1]} dev wan0"]

    def set_path(self, mtu: int, icmp: bool = True) -> None:
        """Routed: the path MTU between the gateways (the MTU of every route of the router; 1500 lifts it) and whether
        the router says so with an ICMP "fragmentation needed" (False: a black hole, the ICMP dropped)."""
        if not self.routed:
            raise ValueError("set_path: the WAN is a switch (LabWan(routed=True) has a router)")
        cmds = []
        for node, (link, router) in self.router_links.items():
            net = ipaddress.ip_network(f"{node}/30", strict=False)
            cmds.append(f"route replace {net} dev {link} proto kernel scope link src {router} mtu lock {mtu}")
        netns.ip_batch(cmds, netns=self.netns)
        netns.exec_in(self.netns, ["nft", "delete", "table", "inet", BLACK_HOLE_TABLE], check=False)
        if not icmp:
            netns.exec_in(self.netns, ["nft", "-f", "-"], input=(
                f"table inet {BLACK_HOLE_TABLE} {{\n chain out {{\n  type filter hook output priority 0; policy accept;\n"
                "  icmp type destination-unreachable icmp code 4 drop\n }\n}\n"))  # 4: fragmentation needed

    def down(self) -> None:
        netns.delete_netns([self.netns])
        self.created = False
