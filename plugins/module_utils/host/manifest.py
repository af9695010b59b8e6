# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a dataplane run owns on one host, as the controller's drift checks read it back (controller/drift.py).

gateway_dataplane and overlay_dataplane return it as `manifest`; the roles add where the host is (netns or
the local host) and declare every host's manifest with one `set_stats` (`fabric_dataplane`). A manifest:

    {"kind": "gateway" | "overlay",
     "links": [{"name": "lovg1a2b3c4d", "mtu": 1450}],               # present, with this MTU (when set)
     "wireguard": [{"name": "lfab..", "mtu": 1340, "listen_port": 51820,   # mtu None: spec.mtu auto, not checked
                    "peers": [{"public_key": "..", "endpoint": "172.30.0.2:31000"}]}],  # + a live wireguard-go
     "routes": [{"table": 18952, "dst": ["10.71.0.0/16"]}],
     "rules": [{"table": 18952, "line": "1900: from all to 10.72.0.0/16 lookup 18952"}],
     "nft_tables": [{"family": "ip", "name": "liqo_nat_x", "rules": 4}],   # present, at least this many rules
     "sysctls": {"net.ipv4.ip_forward": "1"}}

Pure data, no secrets: public keys, names, addresses. `where()` adds the machine (boot id) and the named
network namespace the module ran in, so the roles declare every host's manifest with one expression and the
controller knows which kernel to read (and says so when it is another machine's).
"""
from __future__ import annotations

import os

from ansible_collections.liqo.fabric.plugins.module_utils.route.policy import normalize_rules, rule_line


def rule_lines(rules, table):
    """`ip rule` lines of rule dicts (the shape route.policy.sync_rules takes), as read_rules renders the kernel's."""
    normalized = normalize_rules(rules, [table])
    return [{"table": int(r.table), "line": rule_line(r)} for fam in normalized.values() for r in fam]


def route_dsts(routes, table):
    dsts = sorted({str(r["dst"]) for r in routes or [] if r.get("dst")})
    return [{"table": int(table), "dst": dsts}] if dsts else []


def gateway(gateways, result, rules_of, routes_of, sysctls):
    """Manifest of a gateway host from gateway_dataplane's input (`gateways`, the plan entries built) and
    result (per-gateway `nat.rules`). `rules_of(gw)`/`routes_of(gw)` give a gateway's rule/route dicts."""
    built = {g.get("interface"): g for g in result.get("gateways") or []}
    out = dict(where(), kind="gateway")
    out.update({"links": [], "wireguard": [], "routes": [], "rules": [], "nft_tables": [],
                "sysctls": dict(sysctls)})
    for gw in gateways or []:
        iface = gw.get("interface")
        if iface not in built or gw.get("error") or built[iface].get("refused"):
            continue
        peer = gw.get("peer") or {}
        # spec.mtu auto: the live path watch changes the MTU (and raises it for each probe): no drift to repair
        out["wireguard"].append({
            "name": iface, "mtu": None if gw.get("mtu_auto") else int(gw["mtu"]), "listen_port": gw.get("listen_port") or None,
            "peers": [{"public_key": peer.get("public_key"), "endpoint": peer.get("endpoint") or None}]})
        out["routes"] += route_dsts(routes_of(gw), gw["table"])
        out["rules"] += rule_lines(rules_of(gw), gw["table"])
        nat = built[iface].get("nat") or {}
        out["nft_tables"].append({"family": "ip", "name": gw["nat_table"], "rules": int(nat.get("rules") or 0)})
    return out


def overlay(node_plan, table, result, nat_table, nat_family="ip"):
    """Manifest of a node's overlay from overlay_dataplane's input (the node's plan) and result."""
    node_plan = node_plan or {}
    out = dict(where(), kind="overlay")
    out.update({
        "links": [{"name": ln["name"], "mtu": ln.get("mtu")} for ln in node_plan.get("links") or []],
        # with the routes to the pods reached over their bridge port (resolved by the dataplane, not planned)
        "routes": route_dsts(list(node_plan.get("routes") or []) + [
            {"dst": "%s/32" % ip} for ip in (((result or {}).get("pod_ports") or {}).get("routed") or {})], table),
        "rules": rule_lines(node_plan.get("rules") or [], table),
        "nft_tables": []})
    rules = int(((result or {}).get("nat") or {}).get("rules") or 0)
    if node_plan.get("bypass"):
        out["nft_tables"].append({"family": nat_family, "name": nat_table, "rules": rules})
    return out


NETNS_DIR = "/var/run/netns"
NETNS_NAME_ENV = "LIQO_FABRIC_NETNS"


def where():
    """{"boot_id", "netns"} of the calling thread: netns is the name under /var/run/netns of its network
    namespace, None for the machine's initial one; another (or, when /proc/1 cannot be read, any) unnamed
    namespace also gets its netns_inode, which the controller compares with its own."""
    out = {"boot_id": None, "netns": None}
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            out["boot_id"] = f.read().strip()
    except OSError:
        pass
    try:
        me = os.stat("/proc/thread-self/ns/net")
    except OSError:
        return out
    try:
        init = os.stat("/proc/1/ns/net")
        if (init.st_dev, init.st_ino) == (me.st_dev, me.st_ino):
            return out
    except OSError:
        pass
    # the name the process was told (netns_fork sets it when it joins a namespace), checked like any other first
    hint = os.environ.get(NETNS_NAME_ENV, "")
    names = [hint] if hint and "/" not in hint else []
    try:
        names += sorted(os.listdir(NETNS_DIR))
    except OSError:
        pass
    for name in names:
        try:
            st = os.stat(os.path.join(NETNS_DIR, name))
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == (me.st_dev, me.st_ino):
            out["netns"] = name
            return out
    out["netns_inode"] = me.st_ino
    return out
