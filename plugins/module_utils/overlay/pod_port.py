# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A pod of this host reached over its own bridge port: the node end of the in-cluster overlay, on the node
where the active gateway pod runs.

Every node's overlay link ends at the gateway pod's IP. Behind a CNI bridge (the bridge plugin, flannel's cni0),
this node routes those encapsulated packets out of the bridge device, and a Linux bridge offers no segmentation
of encapsulated packets (its `hw_enc_features` are empty): each VXLAN/Geneve super-packet is cut into MTU-sized
packets in software there, and the gateway pod receives, decapsulates and NATs every one of them. Routed straight
to the pod's port (the node side of its veth), the super-packet crosses whole, as it does between two hosts.

For each pod IP asked for, `resolve` finds what the kernel already knows: the IP's neighbour on a bridge (its MAC;
a neighbour not known yet is resolved by the kernel with NTF_USE, outside check mode) and the bridge port that MAC
was learned on. What follows from it:
- a route `<ip>/32 dev <port>` (source: the bridge's own address in the pod's subnet, as before), for the overlay
  table; a rule `to <ip>/32` selecting that table is the plan's (overlay/incluster.py);
- a permanent neighbour `<ip> lladdr <mac>` on the port, marked with PROTOCOL. It is needed: the pod's ARP replies
  to the port's MAC reach the bridge device, never the port's own neighbour table.
A pod that is not behind a bridge (a point-to-point veth, a routed CNI) is already reached the short way: nothing
is added. One that cannot be resolved yet is skipped (a warning): its packets keep the bridge path until a later
run. The port is the pod's: when the pod goes, the kernel drops the route and the neighbour with it.
"""
from __future__ import annotations

import ipaddress
import socket
import time
import traceback
from typing import Dict, List, Optional

try:
    from pyroute2 import IPRoute
    from pyroute2.netlink.exceptions import NetlinkError
    from pyroute2.netlink.rtnl.ndmsg import NTF_USE
    PYROUTE2_IMPORT_ERROR = None
except ImportError:
    IPRoute = None
    NetlinkError = OSError
    NTF_USE = 0x01
    PYROUTE2_IMPORT_ERROR = traceback.format_exc()

# the neighbours this module owns (NDA_PROTOCOL; 0-4 are the kernel's, iproute2 names a few above)
PROTOCOL = 0xF5
NUD_PERMANENT = 0x80
NUD_VALID = 0x02 | 0x04 | 0x08 | 0x10 | 0x40 | 0x80  # reachable, stale, delay, probe, noarp, permanent
RESOLVE_WAIT = 0.5  # seconds for an unknown neighbour to resolve (an ARP round trip on one node)


class ValidationError(ValueError):
    """Bad input found before any change. str() names the field and the value."""


class PodPortError(RuntimeError):
    """The kernel refused a change."""


def normalize(entries, field: str = "pod_ports") -> List[str]:
    """The IPv4 addresses of `entries` ([{"ip": ...}]), validated."""
    out = []
    for i, entry in enumerate(entries or []):
        where = f"{field}[{i}]"
        if not isinstance(entry, dict):
            raise ValidationError(f"{where}: {entry!r} is not a dict")
        unknown = sorted(set(entry) - {"ip"})
        if unknown:
            raise ValidationError(f"{where}: unknown key(s) {', '.join(unknown)} (expected ip)")
        try:
            ip = ipaddress.ip_address(str(entry.get("ip")))
        except ValueError:
            raise ValidationError(f"{where}.ip: {entry.get('ip')!r} is not an IP address") from None
        if ip.version != 4:
            raise ValidationError(f"{where}.ip: {ip} is not an IPv4 address")
        out.append(str(ip))
    dupes = sorted({x for x in out if out.count(x) > 1})
    if dupes:
        raise ValidationError(f"{field}: duplicate ip {', '.join(dupes)}")
    return out


def _bridges(links) -> Dict[int, str]:
    out = {}
    for link in links:
        info = link.get_attr("IFLA_LINKINFO")
        if info is not None and info.get_attr("IFLA_INFO_KIND") == "bridge":
            out[link["index"]] = link.get_attr("IFLA_IFNAME")
    return out


def _bridge_address(ipr, bridge: int, ip: str) -> Optional[str]:
    """The bridge's own IPv4 address on the subnet that holds `ip`."""
    for addr in ipr.get_addr(family=socket.AF_INET, index=bridge):
        net = ipaddress.ip_network("%s/%d" % (addr.get_attr("IFA_ADDRESS"), addr["prefixlen"]), strict=False)
        if ipaddress.ip_address(ip) in net:
            return addr.get_attr("IFA_ADDRESS")
    return None


def _neighbour(ipr, ip: str, bridges: Dict[int, str]):
    """(bridge index, MAC) of a valid neighbour entry of `ip` on a bridge, else None."""
    for n in ipr.get_neighbours(family=socket.AF_INET, dst=ip):
        if n["ifindex"] in bridges and n["state"] & NUD_VALID and n.get_attr("NDA_LLADDR"):
            return n["ifindex"], n.get_attr("NDA_LLADDR")
    return None


def _port(ipr, bridge: int, mac: str) -> Optional[int]:
    """The port of `bridge` the address `mac` was learned on."""
    for entry in ipr.fdb("dump"):
        if entry.get_attr("NDA_MASTER") == bridge and (entry.get_attr("NDA_LLADDR") or "").lower() == mac.lower() \
                and entry["ifindex"] != bridge:
            return entry["ifindex"]
    return None


def _covering_bridges(ipr, ip: str, bridges: Dict[int, str]) -> List[int]:
    return [idx for idx in bridges if _bridge_address(ipr, idx, ip)]


def resolve(ipr, ips: List[str], check: bool = False) -> dict:
    """{"found": {ip: {port, port_index, mac, bridge, src}}, "pending": {ip: why}} for `ips`. A neighbour not known
    yet is asked for (NTF_USE) and waited for up to RESOLVE_WAIT, except in check mode (which writes nothing).
    An IP on no bridge subnet of this host is neither: nothing to do for it."""
    links = ipr.get_links()   # one dump: the bridges and every port's name
    bridges = _bridges(links)
    out = {"found": {}, "pending": {}}
    if not bridges:
        return out
    names = {link["index"]: link.get_attr("IFLA_IFNAME") for link in links}
    for ip in ips:
        covering = _covering_bridges(ipr, ip, bridges)
        if not covering:
            continue   # not behind a bridge of this host
        neigh = _neighbour(ipr, ip, bridges)
        if neigh is None and not check:
            for idx in covering:
                try:
                    ipr.neigh("replace", dst=ip, ifindex=idx, flags=NTF_USE)
                except NetlinkError:
                    pass
            deadline = time.monotonic() + RESOLVE_WAIT
            while neigh is None and time.monotonic() < deadline:
                time.sleep(0.01)
                neigh = _neighbour(ipr, ip, bridges)
        if neigh is None:
            out["pending"][ip] = f"no neighbour entry for {ip} on {', '.join(bridges[i] for i in covering)}"
            continue
        bridge, mac = neigh
        port = _port(ipr, bridge, mac)
        if port is None:
            out["pending"][ip] = f"{mac} ({ip}) is on no port of {bridges[bridge]}"
            continue
        out["found"][ip] = {"port": names.get(port), "port_index": port, "mac": mac, "bridge": bridges[bridge],
                            "src": _bridge_address(ipr, bridge, ip)}
    return out


def routes(found: Dict[str, dict]) -> List[dict]:
    """The overlay table's routes to the resolved pods (route.policy's route dicts)."""
    out = []
    for ip, port in sorted(found.items()):
        route = {"dst": f"{ip}/32", "dev": port["port"], "scope": "link"}
        if port.get("src"):
            route["src"] = port["src"]
        out.append(route)
    return out


def _owned(ipr) -> Dict[tuple, dict]:
    out = {}
    for n in ipr.get_neighbours(family=socket.AF_INET):
        if n.get_attr("NDA_PROTOCOL") == PROTOCOL:
            mac = (n.get_attr("NDA_LLADDR") or "").lower()
            out[(n.get_attr("NDA_DST"), n["ifindex"])] = {"mac": mac, "permanent": bool(n["state"] & NUD_PERMANENT)}
    return out


def neighbour_line(ip: str, port: str, mac: str) -> str:
    return f"{ip} dev {port} lladdr {mac} permanent"


def sync_neighbours(ipr, found: Dict[str, dict], check: bool = False) -> dict:
    """Makes this host's owned neighbours exactly the permanent entries of `found` (resolve()'s). Returns changed,
    added, removed (lines), writes, before/after (lines)."""
    names = {link["index"]: link.get_attr("IFLA_IFNAME") for link in ipr.get_links()}
    have = _owned(ipr)
    want = {(ip, p["port_index"]): p["mac"].lower() for ip, p in found.items()}
    add = [k for k, mac in want.items() if k not in have or have[k]["mac"] != mac or not have[k]["permanent"]]
    remove = [k for k in have if k not in want]

    def line(key, mac):
        return neighbour_line(key[0], names.get(key[1], str(key[1])), mac)
    result = {"changed": bool(add or remove), "writes": 0,
              "added": [line(k, want[k]) for k in sorted(add)], "removed": [line(k, have[k]["mac"]) for k in sorted(remove)],
              "before": sorted(line(k, v["mac"]) for k, v in have.items()),
              "after": sorted(line(k, mac) for k, mac in want.items())}
    if check:
        return result
    try:
        for key in remove:
            ipr.neigh("del", dst=key[0], ifindex=key[1])
            result["writes"] += 1
        for key in add:
            ipr.neigh("replace", dst=key[0], ifindex=key[1], lladdr=want[key], state=NUD_PERMANENT,
                      NDA_PROTOCOL=PROTOCOL)
            result["writes"] += 1
    except NetlinkError as e:
        raise PodPortError(f"neighbour {key[0]} on {names.get(key[1], key[1])}: {e}") from e
    return result


def open_ipr():
    if IPRoute is None:
        raise PodPortError("pyroute2 is required")
    return IPRoute()
