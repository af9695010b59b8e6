"""An emulated L2 switch: the lab's underlays and its WAN.

Each attached netns gets a macvlan (bridge mode) on one parent link that lives in the switch's own netns.
Frames between two ports go straight from one macvlan to the other, one hop, where a Linux bridge between
veth pairs costs three (veth, bridge, veth). A real switch costs the nodes no CPU at all, so the emulation
should cost them as little as it can: the pod path crosses three switches (underlay, WAN, underlay), a
gateway-to-gateway path only one, and the benchmarks compare the two.

The parent is a veth pair with both ends up, because macvlan needs a parent with a carrier and this kernel
has no dummy links. Broadcasts (ARP) reach every port. A port dies with its netns; every port dies with the
switch's netns.
"""
from __future__ import annotations

PARENT = "sw0"


def up_commands() -> list[str]:
    """`ip` commands, run inside the switch's netns, that create the switch."""
    return ["link set lo up", f"link add {PARENT} type veth peer name {PARENT}p",
            f"link set {PARENT} up", f"link set {PARENT}p up"]


def attach_commands(node_netns: str, ifname: str) -> list[str]:
    """`ip` commands, run inside the switch's netns, that give `node_netns` a port named `ifname` (left down:
    the node configures and raises it)."""
    return [f"link add name {ifname} link {PARENT} netns {node_netns} type macvlan mode bridge"]
