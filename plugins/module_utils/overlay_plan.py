# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The in-cluster overlay: what every node and gateway host must hold so that any pod reaches the remote
clusters through the active gateway and the replies come back the same way. Pure planning.

- Every node gets an internal address from the internal CIDR (kept in the Node annotation
  `networking.liqo.io/internal-ip`, so it never changes and never collides); `.1` stays free.
- One overlay link per (node, gateway host) pair: on the node `lovg<hash(gateway)>`, on the gateway host
  `lovn<hash(node)>`; VNI = 65536 * index of the gateway host + index of the node's internal address, so
  no two links share a VNI. Each side carries its own internal address (/32, routes are onlink).
- Nodes: table 18952 sends the remote (remapped) CIDRs to the active gateway's internal address over the
  link to it, with the node's pod-gateway address as source (so node traffic looks like pod traffic);
  rules `to <remote CIDR> lookup 18952` select it for cross-cluster traffic only.
- The active gateway host: no route for the remote CIDRs (its own traffic goes straight into the tunnel);
  table 18952 holds one /32 route per pod on another node through that node's link, selected by
  `iif <tunnel>` rules: traffic out of the tunnel returns over the overlay, the way it came.
"""

from __future__ import annotations

import dataclasses
import hashlib
import ipaddress
import json

INTERNAL_IP_ANNOTATION = "networking.liqo.io/internal-ip"
TABLE = 18952
NODE_RULE_PRIORITY = 1900
INTERNAL_RULE_PRIORITY = 1650
TUNNEL_RULE_PRIORITY = 1700
DEFAULT_MTU = 1450  # a 1500 underlay minus the VXLAN/Geneve header; above the tunnel MTU (1340)


def _short(name):
    return hashlib.sha256(name.encode()).hexdigest()[:8]


def node_link_name(gateway_host):
    """The link on a node towards a gateway host."""
    return "lovg" + _short(gateway_host)


def gateway_link_name(node):
    """The link on a gateway host towards a node."""
    return "lovn" + _short(node)


def _internal_ip(node):
    for addr in (node.get("status") or {}).get("addresses") or []:
        if addr.get("type") == "InternalIP":
            return addr.get("address")
    return None


def assign_internal_ips(nodes, internal_cidr):
    """{node name: internal IP} keeping valid unique annotations, allocating the lowest free address
    (from .2) to the others, in name order. Returns (assignment, {name: new ip} to annotate)."""
    net = ipaddress.ip_network(internal_cidr)
    taken, assigned, new = set(), {}, {}
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        ip = ((node["metadata"].get("annotations") or {}).get(INTERNAL_IP_ANNOTATION))
        try:
            addr = ipaddress.ip_address(ip) if ip else None
        except ValueError:
            addr = None
        if addr is not None and addr in net and addr not in taken and int(addr) - int(net.network_address) >= 2 \
                and addr != net.broadcast_address:
            taken.add(addr)
            assigned[node["metadata"]["name"]] = str(addr)
    candidate = int(net.network_address) + 2
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        name = node["metadata"]["name"]
        if name in assigned:
            continue
        while ipaddress.ip_address(candidate) in taken:
            candidate += 1
        addr = ipaddress.ip_address(candidate)
        if addr not in net or addr == net.broadcast_address:
            raise ValueError("internal_cidr: %s has no free address left for node %s" % (internal_cidr, name))
        taken.add(addr)
        assigned[name] = new[name] = str(addr)
    return assigned, new


@dataclasses.dataclass(frozen=True)
class Link:
    """One overlay link of a host: a Geneve/VXLAN device with one remote."""
    name: str
    type: str
    vni: int
    remote: str      # the other end's underlay address
    local: str
    mtu: int
    address: str     # this host's internal address
    peer: str        # the other end's internal address: routed through this link (see _peer_routes), not in the result

    def to_result(self) -> dict:
        return {"name": self.name, "type": self.type, "vni": self.vni, "remotes": [self.remote], "local": self.local,
                "mtu": self.mtu, "addresses": ["%s/32" % self.address]}


@dataclasses.dataclass(frozen=True)
class HostPlan:
    """What one node or gateway host must hold: overlay_dataplane's `node`. Routes, rules and bypass entries are
    in the form overlay_dataplane takes them."""
    internal_ip: str
    links: tuple = ()
    routes: tuple = ()
    rules: tuple = ()
    bypass: tuple = ()
    role: str = "node"   # gateway: the active gateway host

    def to_result(self) -> dict:
        return {"internal_ip": self.internal_ip, "links": [link.to_result() for link in self.links],
                "routes": [dict(r) for r in self.routes], "rules": [dict(r) for r in self.rules],
                "bypass": [dict(b) for b in self.bypass], "role": self.role}


@dataclasses.dataclass(frozen=True)
class OverlayPlan:
    assign: dict                  # node -> internal IP
    annotate: dict                # node -> internal IP allocated now (to record in the Node's annotation)
    hosts: dict                   # node -> HostPlan
    active_gateway: str | None
    gateway_hosts: list

    def to_result(self) -> dict:
        """The overlay_plan module's result (its `hosts[<node>]` are overlay_dataplane's input)."""
        return {"assign": self.assign, "annotate": self.annotate,
                "hosts": {name: host.to_result() for name, host in self.hosts.items()},
                "active_gateway": self.active_gateway, "gateway_hosts": self.gateway_hosts}


@dataclasses.dataclass(frozen=True)
class _Mesh:
    """The links between every node and every gateway host."""
    nodes: list            # names, sorted
    gateway_hosts: list    # names, sorted
    assign: dict           # node -> internal IP
    underlay: dict         # node -> its InternalIP
    base: int              # the internal CIDR's network address
    link_type: str
    mtu: int

    def vni(self, gateway, node):
        return 65536 * (self.gateway_hosts.index(gateway) + 1) + (int(ipaddress.ip_address(self.assign[node])) - self.base)

    def link(self, name, gateway, node, here, there) -> Link:
        """The link between `gateway` and `node` on `here` (one of them) towards `there` (the other)."""
        return Link(name, self.link_type, self.vni(gateway, node), self.underlay[there], self.underlay[here], self.mtu,
                    self.assign[here], self.assign[there])

    def links_of(self, name) -> list:
        """Towards every gateway host (as a node), then, on a gateway host (active or standby), towards every node."""
        links = [self.link(node_link_name(gw), gw, name, name, gw) for gw in self.gateway_hosts if gw != name]
        if name in self.gateway_hosts:
            links += [self.link(gateway_link_name(other), name, other, name, other) for other in self.nodes if other != name]
        return links


def _pod_ips_by_node(pods):
    out = {}
    for pod in pods:
        status, spec = pod.get("status") or {}, pod.get("spec") or {}
        if spec.get("nodeName") and status.get("podIP") and status.get("phase") == "Running" \
                and status.get("podIP") != status.get("hostIP"):  # hostNetwork pods ride the node's routes
            out.setdefault(spec["nodeName"], []).append(status["podIP"])
    return out


def _return_routes(name, nodes, pods_by_node, assign):
    """The active gateway host: one /32 route per pod on another node through that node's link."""
    return [{"dst": "%s/32" % ip, "via": assign[other], "dev": gateway_link_name(other), "onlink": True}
            for other in sorted(pods_by_node) if other != name and other in nodes
            for ip in sorted(pods_by_node[other], key=ipaddress.ip_address)]


def _remote_routes(node, remote_cidrs, active_gateway, assign):
    """A node: the remote CIDRs through the link to the active gateway, from the node's pod-gateway address."""
    src = _pod_gateway_address(node)
    routes = []
    for cidr in sorted(remote_cidrs):
        route = {"dst": cidr, "via": assign[active_gateway], "dev": node_link_name(active_gateway), "onlink": True}
        if src:
            route["src"] = src
        routes.append(route)
    return routes


def _peer_routes(links, on_active_gateway):
    """The peers' internal addresses through their links, selected for that range only: without them
    reverse-path filtering (and ARP, which it also checks) refuses what comes over the overlay.
    Two gateway hosts are joined by two links (each is the other's node); the one in use is the active
    gateway's node-facing link on the active host, the link towards the active gateway elsewhere."""
    first = "lovn" if on_active_gateway else "lovg"
    peers = {}
    for link in sorted(links, key=lambda x: not x.name.startswith(first)):
        peers.setdefault(link.peer, link.name)
    return [{"dst": "%s/32" % ip, "dev": dev, "scope": "link"}
            for ip, dev in sorted(peers.items(), key=lambda kv: ipaddress.ip_address(kv[0]))]


def plan(nodes, pods, gateway_hosts, active_gateway, remote_cidrs, tunnel_interfaces, internal_cidr,
         link_type="auto", mtu=DEFAULT_MTU, masquerade_bypass=True, local_pod_cidrs=()) -> OverlayPlan:
    """Per-host desired state (to_result(): {"assign": {...}, "annotate": {...}, "hosts": {node: {...}}, ...}).

    `gateway_hosts`: names of the nodes that can host the gateway (sorted; active first is not required);
    `active_gateway`: the one in charge now (must be one of them); `remote_cidrs`: remapped pod CIDRs of all
    peered clusters; `tunnel_interfaces`: the WireGuard interfaces on the active gateway host."""
    by_name = {n["metadata"]["name"]: n for n in nodes}
    gateway_hosts = sorted(g for g in gateway_hosts if g in by_name)
    if not active_gateway:
        gateway_hosts = []  # nothing to reach: no links, routes or rules anywhere
    if active_gateway and active_gateway not in gateway_hosts:
        raise ValueError("active_gateway: %r is not one of the gateway hosts %s" % (active_gateway, gateway_hosts))
    assign, annotate = assign_internal_ips(nodes, internal_cidr)
    underlay = {name: _internal_ip(n) for name, n in by_name.items()}
    missing = sorted(name for name, ip in underlay.items() if not ip)
    if missing:
        raise ValueError("nodes %s: no InternalIP in status.addresses" % ", ".join(missing))
    mesh = _Mesh(sorted(by_name), gateway_hosts, assign, underlay, int(ipaddress.ip_network(internal_cidr).network_address),
                 link_type, mtu)
    pods_by_node = _pod_ips_by_node(pods)
    hosts = {}
    for name in mesh.nodes:
        links = mesh.links_of(name)
        routes, rules, bypass = [], [], []
        if name == active_gateway:
            routes = _return_routes(name, by_name, pods_by_node, assign)
            rules = [{"priority": TUNNEL_RULE_PRIORITY, "iif": t, "table": TABLE} for t in sorted(tunnel_interfaces)]
        elif active_gateway:
            routes = _remote_routes(by_name[name], remote_cidrs, active_gateway, assign)
            rules = [{"priority": NODE_RULE_PRIORITY, "to": cidr, "table": TABLE} for cidr in sorted(remote_cidrs)]
            if masquerade_bypass:
                bypass = [{"saddr": p, "daddr": cidr} for p in local_pod_cidrs for cidr in sorted(remote_cidrs)]
        if links:
            routes = _peer_routes(links, name == active_gateway) + routes
            rules = [{"priority": INTERNAL_RULE_PRIORITY, "to": internal_cidr, "table": TABLE}] + rules
        hosts[name] = HostPlan(assign[name], tuple(links), tuple(routes), tuple(rules), tuple(bypass),
                               "gateway" if name == active_gateway else "node")
    return OverlayPlan(assign, annotate, hosts, active_gateway, gateway_hosts)


def _pod_gateway_address(node):
    """The node's own address in its pod range (the first host of spec.podCIDR, where bridge CNIs put it):
    the source of the node's cross-cluster traffic, so the remote side sees a (remapped) pod address."""
    cidr = (node.get("spec") or {}).get("podCIDR")
    if not cidr:
        return None
    net = ipaddress.ip_network(cidr, strict=False)
    return str(net.network_address + 1) if net.num_addresses > 2 else None


def host_digest(host, table=TABLE):
    """Short, stable digest of one node's desired overlay state (its plan entry and the routing table).

    The node_overlay role records it after an apply (a ConfigMap) so that a gateway event that leaves a node's
    state as it was can skip that node (`node_overlay_skip_unchanged`)."""
    text = json.dumps({"host": host, "table": table}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def pending_hosts(planned, hosts, skip_unchanged=True):
    """The inventory hosts whose overlay must be applied, in the order given.

    `planned`: the overlay_plan module's result (`digests`: planned digest per Node, `applied`: the digest recorded
    after each Node's last apply); `hosts`: [[inventory host, Node name or '' for the host's own name], ...].
    A host is left out only when `skip_unchanged` and its Node's planned digest is the recorded one; a host that is
    not a Node of the plan stays in, so the apply names it as not a Node of the cluster."""
    digests = planned.get("digests") or {}
    recorded = planned.get("applied") or {}
    out = []
    for host, node in hosts:
        node = node or host
        if not skip_unchanged or node not in digests or recorded.get(node) != digests[node]:
            out.append(host)
    return out


def record_after(planned, applied, attempted):
    """The record (Node name -> digest) to keep after a run: the Nodes applied now (`applied`, Node names whose
    apply succeeded) and the ones that were already recorded with their planned digest and that this run did not
    try (`attempted`: Node names it tried, successfully or not). A Node whose apply failed, or whose record is
    stale, has no entry: the next run applies it."""
    digests = planned.get("digests") or {}
    recorded = planned.get("applied") or {}
    applied, attempted = set(applied), set(attempted) | set(applied)
    return {node: digest for node, digest in sorted(digests.items())
            if node in applied or (node not in attempted and recorded.get(node) == digest)}
