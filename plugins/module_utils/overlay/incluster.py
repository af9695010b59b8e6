# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The overlay of the in-cluster fabric: from every node to the active gateway pod, planned for one host at a
time (the node agent plans its own node, the gateway pod itself), in the shape `overlay_dataplane` applies
(`links`, `routes`, `rules`, `bypass`).

Unlike the agentless overlay (overlay/plan.py, between nodes and gateway hosts), one end of every link is the
gateway pod's IP (the seeds: "the endpoints of these tunnels are node and pod IPs"), and nothing is written in
the API, so every party computes the same addresses from what it reads:

- a node's internal address comes from its `spec.podCIDR` (the slot of that slice, from `.2`): stable and
  unique as long as the pod CIDRs are; the gateway pod's internal address is the first of the internal CIDR
  (the `internalEndpoint` its gateway publishes);
- the link between a node and the gateway pod is `lovg<hash(gateway)>` on the node and `lovn<hash(node)>` in
  the pod, VNI 4096 + the node's slot + 65536 * the gateway's offset (0 for a cluster's lone gateway; a node has
  a link to every gateway, and VXLAN tells the links of one port apart by VNI only: `vni_offsets`);
- a node: table 18952 sends the remote (remapped) CIDRs to the gateway's internal address over its link,
  rules `to <remote CIDR>` select it, and the masquerade bypass keeps the pods' sources; the gateway pod's own
  node is a node like the others, so both directions of its pods' traffic go through the overlay (symmetric);
- the node the active gateway pod runs on: table 18952 also reaches that pod over its own bridge port, selected
  by a rule `to <pod IP>` (overlay/pod_port.py: a CNI bridge would cut every encapsulated super-packet of the
  other nodes' links into MTU-sized packets);
- the gateway pod: table 18952 sends each node's pod CIDR back over that node's link, selected by `iif
  <tunnel>` rules: what comes out of the tunnel returns the way it came;
- the links' MTU is the tunnel's (the gateway's spec.mtu), not the underlay's: a packet too big for the tunnel
  is refused on the source's own node, whose conntrack knows the flow, so the "fragmentation needed" reaches the
  pod. Refused in the gateway pod, that ICMP error would cross the gateway pod's node outside the overlay, where
  the flow is unknown, and kube-proxy drops it as INVALID: a full-size packet from another node would never get
  its answer.
"""

from __future__ import annotations

import hashlib
import ipaddress

from ansible_collections.liqo.fabric.plugins.module_utils.gateway.plan import gateway_mtu

GATEWAY_COMPONENT_LABEL = "networking.liqo.io/component"
GATEWAY_NAME_LABEL = "networking.liqo.io/gateway-name"
ACTIVE_LABEL = "networking.liqo.io/active"
REMOTE_CLUSTER_ID_LABEL = "liqo.io/remote-cluster-id"
GATEWAY_KINDS = ("GatewayServer", "GatewayClient")
TABLE = 18952
POD_PORT_RULE_PRIORITY = 1640
INTERNAL_RULE_PRIORITY = 1650
TUNNEL_RULE_PRIORITY = 1700
NODE_RULE_PRIORITY = 1900
VNI_BASE = 4096
VNI_BAND = 1 << 16   # a gateway's VNIs: VNI_BASE + slot + its offset * VNI_BAND
VNI_OFFSETS = 255
VNI_MAX = (1 << 24) - 1
DEFAULT_MTU = 1340  # the tunnel's (a gateway without spec.mtu)


class OverlayPlanError(ValueError):
    """Bad input or state: the message names what and the value."""


def _short(name):
    return hashlib.sha256(name.encode()).hexdigest()[:8]


def node_link_name(gateway):
    """The link on a node towards a gateway pod (`gateway`: namespace/name of its GatewayServer/Client)."""
    return "lovg" + _short("pod:" + gateway)


def gateway_link_name(node):
    """The link in the gateway pod towards a node."""
    return "lovn" + _short(node)


def node_slot(node, internal_cidr):
    """Slot of a node (from 2) and its internal address, from its spec.podCIDR; None without one."""
    cidr = (node.get("spec") or {}).get("podCIDR")
    if not cidr:
        return None
    net = ipaddress.ip_network(cidr, strict=False)
    internal = ipaddress.ip_network(internal_cidr, strict=False)
    span = internal.num_addresses - 3  # network, .1 (the gateway) and broadcast excluded
    if span < 1:
        raise OverlayPlanError("internal_cidr: %s is too small for nodes" % internal_cidr)
    slot = 2 + (int(net.network_address) >> (32 - net.prefixlen)) % span
    return slot, str(internal.network_address + slot)


def gateway_internal_ip(internal_cidr):
    return str(ipaddress.ip_network(internal_cidr, strict=False).network_address + 1)


def _underlay(node):
    for addr in (node.get("status") or {}).get("addresses") or []:
        if addr.get("type") == "InternalIP":
            return addr.get("address")
    raise OverlayPlanError("node %s: no InternalIP in status.addresses" % node["metadata"]["name"])


def _pod_gateway_address(node):
    cidr = (node.get("spec") or {}).get("podCIDR")
    net = ipaddress.ip_network(cidr, strict=False)
    return str(net.network_address + 1) if net.num_addresses > 2 else None


def _live(pods):
    """Running with an IP, not being deleted."""
    return [p for p in pods if (p.get("status") or {}).get("phase") == "Running" and (p.get("status") or {}).get("podIP")
            and not p["metadata"].get("deletionTimestamp")]


def active_pod(pods):
    """The active gateway pod among a gateway's pods: running with an IP, not being deleted; the one labelled
    active (active/standby) if any, else the oldest."""
    live = _live(pods)
    labelled = [p for p in live if (p["metadata"].get("labels") or {}).get(ACTIVE_LABEL) == "true"]
    live = labelled or live
    live.sort(key=lambda p: (p["metadata"].get("creationTimestamp") or "", p["metadata"]["name"]))
    return live[0] if live else None


def _created(gw):
    return (gw["metadata"].get("creationTimestamp") or "", gw["metadata"]["name"], gw.get("kind") or "")


def vni_offsets(namespace_gateways):
    """{name: offset} of the live gateways of one namespace (GatewayServer and GatewayClient objects, not being
    deleted). A node holds one link per gateway, and VXLAN tells the links of one UDP port apart by their VNI
    alone: each gateway's links take VNI_BASE + the node's slot + its offset * VNI_BAND. The oldest gateway
    (creationTimestamp, then name) has offset 0, the VNIs of a lone gateway; every later one 1 + a hash of its name
    (mod VNI_OFFSETS - 1), the next free one on a clash with an older gateway. Computed from the namespace's
    gateways alone, which both ends of a link read: adding a gateway, or removing one that is not the oldest,
    changes no other gateway's offset (unless two hashes clashed)."""
    live = sorted((g for g in namespace_gateways if not g["metadata"].get("deletionTimestamp")), key=_created)
    offsets, taken = {}, set()
    for i, gw in enumerate(live):
        name = gw["metadata"]["name"]
        if name in offsets:
            continue   # a GatewayServer and a GatewayClient of one name: one Deployment, one set of links
        offset = 0 if i == 0 else 1 + int(_short("vni:" + name), 16) % (VNI_OFFSETS - 1)
        while offset in taken:
            offset = 1 + offset % (VNI_OFFSETS - 1)
        offsets[name] = offset
        taken.add(offset)
    return offsets


def link_vni(slot, offset=0):
    """The VNI of the link between a node (its slot) and a gateway pod (the gateway's offset)."""
    vni = VNI_BASE + slot + offset * VNI_BAND
    if offset and slot >= VNI_BAND or vni > VNI_MAX:
        raise OverlayPlanError("vni: %d (slot %d, gateway offset %d) is above %d: the internal CIDR has too many "
                               "slots for several gateways" % (vni, slot, offset, VNI_MAX))
    return vni


def _remote_cidrs(kube, gw):
    remote_id = (gw["obj"]["metadata"].get("labels") or {}).get(REMOTE_CLUSTER_ID_LABEL)
    remote = []
    for conf in kube.list("Configuration", gw["namespace"]):
        if (conf["metadata"].get("labels") or {}).get(REMOTE_CLUSTER_ID_LABEL) == remote_id:
            cidr = (((conf.get("status") or {}).get("remote") or {}).get("cidr") or {}).get("pod")
            remote += cidr if isinstance(cidr, list) else [cidr] if cidr else []
    return sorted(set(remote), key=lambda c: ipaddress.ip_network(c, strict=False))


def _gateway_facts(kube, gw, offsets, own_pods):
    """One gateway's part of the facts: its active pod, the remote CIDRs it leads to, its MTU and VNI offset."""
    pods = kube.list("Pod", gw["namespace"], "%s=gateway,%s=%s" % (GATEWAY_COMPONENT_LABEL, GATEWAY_NAME_LABEL, gw["name"]))
    pod = active_pod(pods)
    return {"gateway": "%s/%s" % (gw["namespace"], gw["name"]), "gateway_kind": gw["kind"],
            "pod": {"name": pod["metadata"]["name"], "ip": pod["status"]["podIP"], "node": pod["spec"].get("nodeName")}
            if pod else None,
            # a gateway pod's view: every live pod of its gateway, so a warm standby builds its own end too
            "pods": {p["metadata"]["name"]: p["status"]["podIP"] for p in _live(pods)} if own_pods else {},
            "remote_cidrs": _remote_cidrs(kube, gw),
            # None: the gateway's spec.mtu is refused (InvalidMTU): it runs on as last built, and so do the links
            "mtu": gateway_mtu(gw["obj"]),
            "vni_offset": offsets.get(gw["name"], 0)}


def gather(kube, gateway=None):
    """What a plan needs from the API: the network ConfigMap and, per gateway ({kind, namespace, name}), its
    active pod (or None), the remote CIDRs it leads to, its MTU and VNI offset. `gateway`: the one of a gateway
    pod (its facts at the top level); None (a node agent): every gateway of the cluster not being deleted, in
    `gateways` (by namespace and name), the first with an active pod at the top level (else the first)."""
    if gateway:
        found = [dict(gateway, obj=kube.get(gateway["kind"], gateway["namespace"], gateway["name"]))]
    else:
        found = [{"kind": kind, "namespace": g["metadata"]["namespace"], "name": g["metadata"]["name"], "obj": g}
                 for kind in GATEWAY_KINDS for g in kube.list(kind)]
    found = [g for g in found if g["obj"] and not g["obj"]["metadata"].get("deletionTimestamp")]
    found.sort(key=lambda g: (g["namespace"], g["name"], g["kind"]))
    offsets = {}
    for ns in sorted({g["namespace"] for g in found}):
        if gateway:
            in_ns = [dict(g, kind=g.get("kind") or k) for k in GATEWAY_KINDS for g in kube.list(k, ns)]
        else:
            in_ns = [dict(g["obj"], kind=g["kind"]) for g in found if g["namespace"] == ns]
        offsets[ns] = vni_offsets(in_ns)
    gateways = [_gateway_facts(kube, g, offsets[g["namespace"]], bool(gateway)) for g in found]
    net = (kube.get("ConfigMap", "liqo", "liqo-fabric-network") or {}).get("data") or {}
    top = next((g for g in gateways if g["pod"]), gateways[0] if gateways else None) or {
        "gateway": None, "gateway_kind": None, "pod": None, "pods": {}, "remote_cidrs": [], "mtu": DEFAULT_MTU,
        "vni_offset": 0}
    return dict(top, gateways=gateways, internal_cidr=net.get("internalCIDR") or "10.80.0.0/16",
                local_pod_cidrs=[c.strip() for c in (net.get("podCIDR") or "").split(",") if c.strip()])


def link_mtu(mtu, facts):
    """The links' MTU: the role's `mtu`, else the tunnel's; None (the kernel's: a live link keeps the MTU it has)
    while the gateway's spec.mtu is refused (facts' `mtu` None)."""
    if mtu:
        return mtu
    return facts.get("mtu", DEFAULT_MTU)


def _link(name, vni, remote, local, address, link_type, mtu):
    return {"name": name, "type": link_type, "vni": vni, "remotes": [remote], "local": local, "mtu": mtu,
            "addresses": ["%s/32" % address]}


def plan_node(node, facts, link_type="vxlan", mtu=None, masquerade_bypass=True, pod_port_route=True):
    """The overlay of one node towards the active pod of every gateway in `facts["gateways"]` (facts without
    `gateways`: the one gateway at their top level); {} parts when there is no gateway or no remote CIDR: all
    removed. Each gateway has its own link (`lovg<hash>`, VNI offset by the gateway's) and table 18952 sends its
    remote CIDRs over it; a remote CIDR already led to by a gateway before it (namespace, name) is left to that
    one. A gateway between two pods (the active one gone, the next not yet up) keeps its rules
    and bypass with blackhole routes: packets for the remote CIDRs are dropped instead of leaving by the node's
    default route, where the masquerade would rewrite them and conntrack would keep that for as long as the flow
    lives: a flow started before a takeover would never recover.
    `mtu` None: the tunnel's (see the module docstring). `pod_port_route`: on an active gateway pod's node, reach
    that pod over its own bridge port (`pod_ports` and its rule)."""
    host = {"links": [], "routes": [], "rules": [], "bypass": []}
    slot = node_slot(node, facts["internal_cidr"])
    gateways = facts["gateways"] if "gateways" in facts else [facts]
    gateways = [g for g in gateways if g.get("gateway") and g.get("remote_cidrs")]
    if not gateways or slot is None:
        return host
    gw_ip = gateway_internal_ip(facts["internal_cidr"])
    src = _pod_gateway_address(node)
    seen, ports = set(), []
    host["rules"] = [{"priority": INTERNAL_RULE_PRIORITY, "to": facts["internal_cidr"], "table": TABLE}]
    for gw in gateways:
        cidrs = [c for c in gw["remote_cidrs"] if c not in seen]
        seen.update(cidrs)
        host["rules"] += [{"priority": NODE_RULE_PRIORITY, "to": cidr, "table": TABLE} for cidr in cidrs]
        if masquerade_bypass:
            host["bypass"] += [{"saddr": p, "daddr": c} for p in facts["local_pod_cidrs"] for c in cidrs]
        if not gw["pod"]:
            host["routes"] += [{"dst": cidr, "type": "blackhole"} for cidr in cidrs]
            continue
        dev = node_link_name(gw["gateway"])
        if any(ln["name"] == dev for ln in host["links"]):
            continue   # a GatewayServer and a GatewayClient of one name: one Deployment, one link
        host["links"].append(_link(dev, link_vni(slot[0], gw.get("vni_offset", 0)), gw["pod"]["ip"], _underlay(node),
                                   slot[1], link_type, link_mtu(mtu, gw)))
        if not any(r["dst"] == "%s/32" % gw_ip for r in host["routes"]):
            # every gateway pod has the internal endpoint: the first link reaches it
            host["routes"].append({"dst": "%s/32" % gw_ip, "dev": dev, "scope": "link"})
        for cidr in cidrs:
            route = {"dst": cidr, "via": gw_ip, "dev": dev, "onlink": True}
            if src:
                route["src"] = src
            host["routes"].append(route)
        if pod_port_route and gw["pod"].get("node") == node["metadata"]["name"] and gw["pod"]["ip"] not in ports:
            ports.append(gw["pod"]["ip"])
    if ports:
        host["pod_ports"] = [{"ip": ip} for ip in ports]
        host["rules"][:0] = [{"priority": POD_PORT_RULE_PRIORITY, "to": "%s/32" % ip, "table": TABLE} for ip in ports]
    return host


def plan_gateway(nodes, facts, pod_name, tunnel_interfaces, link_type="vxlan", mtu=None):
    """The overlay inside the gateway pod `pod_name`: a link to every node with a pod CIDR, their pod CIDRs
    routed back over them for what comes out of the tunnels. The active pod and a warm standby (a live pod of the
    gateway: the nodes' links point to the active one only, so the standby's carry nothing until it takes over)
    build it; empty for a pod being deleted or not (yet) running."""
    host = {"links": [], "routes": [], "rules": [], "bypass": []}
    mtu = link_mtu(mtu, facts)
    if facts["pod"] and facts["pod"]["name"] == pod_name:
        own_ip = facts["pod"]["ip"]
    else:
        own_ip = (facts.get("pods") or {}).get(pod_name)
    if not own_ip:
        return host
    gw_ip = gateway_internal_ip(facts["internal_cidr"])
    peers, back = [], []
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        slot = node_slot(node, facts["internal_cidr"])
        if slot is None:
            continue
        dev = gateway_link_name(node["metadata"]["name"])
        host["links"].append(_link(dev, link_vni(slot[0], facts.get("vni_offset", 0)), _underlay(node), own_ip, gw_ip,
                                   link_type, mtu))
        peers.append({"dst": "%s/32" % slot[1], "dev": dev, "scope": "link"})
        back.append({"dst": str(ipaddress.ip_network(node["spec"]["podCIDR"], strict=False)), "via": slot[1],
                     "dev": dev, "onlink": True})
    host["routes"] = peers + back
    host["rules"] = [{"priority": INTERNAL_RULE_PRIORITY, "to": facts["internal_cidr"], "table": TABLE}] + [
        {"priority": TUNNEL_RULE_PRIORITY, "iif": t, "table": TABLE} for t in sorted(tunnel_interfaces)]
    return host
