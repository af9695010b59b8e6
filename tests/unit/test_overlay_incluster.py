"""The in-cluster overlay plan (module_utils/overlay/incluster.py): node and gateway-pod sides agree on links,
VNIs and addresses computed from what both read, and the plans pass overlay_dataplane's validation."""
from __future__ import annotations

import pytest

from ansible_collections.liqo.fabric.plugins.module_utils.overlay import dataplane as od
from ansible_collections.liqo.fabric.plugins.module_utils.overlay import incluster as oi


def node(i, cidr=None):
    return {"metadata": {"name": f"a-node-{i}"}, "spec": {"podCIDR": cidr or f"10.243.{i}.0/24"},
            "status": {"addresses": [{"type": "InternalIP", "address": f"10.1.0.{i + 1}"}]}}


NODES = [node(i) for i in range(3)]
FACTS = {"gateway": "default/client", "pod": {"name": "gw-client-x", "ip": "10.243.0.5", "node": "a-node-0"},
         "remote_cidrs": ["10.71.0.0/16"], "internal_cidr": "10.80.0.0/16", "local_pod_cidrs": ["10.243.0.0/16"], "mtu": 1300}


def pod(name, phase="Running", ip="10.243.0.9", created="2026-01-01T00:00:00Z", labels=None, deleting=False):
    meta = {"name": name, "creationTimestamp": created, "labels": labels or {}}
    if deleting:
        meta["deletionTimestamp"] = created
    return {"metadata": meta, "status": {"phase": phase, "podIP": ip}, "spec": {"nodeName": "a-node-0"}}


def test_both_ends_of_every_link_agree():
    gw = oi.plan_gateway(NODES, FACTS, "gw-client-x", ["lwg1"])
    by_remote = {ln["remotes"][0]: ln for ln in gw["links"]}
    for n in NODES:
        mine = oi.plan_node(n, FACTS)
        (link,) = mine["links"]
        other = by_remote[n["status"]["addresses"][0]["address"]]
        assert link["remotes"] == [FACTS["pod"]["ip"]] and other["local"] == FACTS["pod"]["ip"]
        assert link["vni"] == other["vni"]
        assert link["mtu"] == other["mtu"] == 1300   # the tunnel's: the node refuses what the tunnel cannot carry
        assert other["addresses"] == ["10.80.0.1/32"]
        # the gateway routes the node's pod CIDR back to the node's internal address
        assert {"dst": n["spec"]["podCIDR"], "via": link["addresses"][0][:-3], "dev": other["name"], "onlink": True} \
            in gw["routes"]
        assert {"priority": 1900, "to": "10.71.0.0/16", "table": 18952} in mine["rules"]
        assert mine["bypass"] == [{"saddr": "10.243.0.0/16", "daddr": "10.71.0.0/16"}]
        od.validate(mine, 18952, "present")
    assert len({ln["vni"] for ln in gw["links"]}) == len(NODES)
    assert {"priority": 1700, "iif": "lwg1", "table": 18952} in gw["rules"]
    od.validate(gw, 18952, "present")


@pytest.mark.parametrize("change", [{"gateway": None, "pod": None, "remote_cidrs": []}, {"remote_cidrs": []}])
def test_nothing_to_lead_to_means_an_empty_overlay(change):
    facts = dict(FACTS, **change)
    assert oi.plan_node(NODES[1], facts) == {"links": [], "routes": [], "rules": [], "bypass": []}


def test_a_gateway_between_two_pods_blackholes_its_remote_cidrs():
    """No link while no pod is active, but the remote CIDRs never fall to the node's default route (and its
    masquerade): the rules and the bypass stay, the routes drop."""
    held = oi.plan_node(NODES[1], dict(FACTS, pod=None))
    up = oi.plan_node(NODES[1], FACTS)
    assert held["links"] == [] and held["routes"] == [{"dst": "10.71.0.0/16", "type": "blackhole"}]
    assert held["rules"] == up["rules"] and held["bypass"] == up["bypass"]
    od.validate(held, 18952, "present")


def test_a_warm_standby_builds_its_own_end_and_the_nodes_still_point_to_the_active_pod():
    facts = dict(FACTS, pods={"gw-client-x": "10.243.0.5", "gw-client-y": "10.243.1.7"})
    standby = oi.plan_gateway(NODES, facts, "gw-client-y", ["lwg1"])
    active = oi.plan_gateway(NODES, facts, "gw-client-x", ["lwg1"])
    assert [ln["local"] for ln in standby["links"]] == ["10.243.1.7"] * len(NODES)
    assert [dict(ln, local=None) for ln in standby["links"]] == [dict(ln, local=None) for ln in active["links"]]
    assert standby["routes"] == active["routes"] and standby["rules"] == active["rules"]
    assert all(oi.plan_node(n, facts)["links"][0]["remotes"] == ["10.243.0.5"] for n in NODES)
    od.validate(standby, 18952, "present")


def test_a_pod_not_live_holds_no_overlay():
    """Not among the gateway's live pods (being deleted, not running yet): nothing, whatever it held is removed."""
    facts = dict(FACTS, pods={"gw-client-x": "10.243.0.5"})
    assert oi.plan_gateway(NODES, facts, "gw-client-y", ["lwg1"])["links"] == []
    assert oi.plan_gateway(NODES, FACTS, "gw-client-y", ["lwg1"])["links"] == []


def test_node_addresses_are_unique_and_stable():
    addrs = [oi.node_slot(node(0, f"10.243.{i}.0/24"), "10.80.0.0/16")[1] for i in range(256)]
    assert len(set(addrs)) == 256 and "10.80.0.1" not in addrs and "10.80.0.0" not in addrs
    assert oi.node_slot({"metadata": {"name": "x"}, "spec": {}}, "10.80.0.0/16") is None


def test_active_pod():
    pods = [pod("old", created="2026-01-01T00:00:00Z"), pod("new", created="2026-01-02T00:00:00Z"),
            pod("pending", phase="Pending"), pod("going", deleting=True, created="2025-01-01T00:00:00Z")]
    assert oi.active_pod(pods)["metadata"]["name"] == "old"
    pods.append(pod("leader", created="2026-01-03T00:00:00Z", labels={oi.ACTIVE_LABEL: "true"}))
    assert oi.active_pod(pods)["metadata"]["name"] == "leader"
    assert oi.active_pod([pod("p", phase="Pending")]) is None


def test_a_refused_spec_mtu_leaves_the_live_links_mtu_as_it_is():
    """A gateway's spec.mtu the plan refuses (InvalidMTU: the gateway runs on as last built) gives no MTU to the links
    (the kernel's: a live link keeps its own) on the nodes and in the gateway pod; a valid one is the links'."""
    class Kube:
        def __init__(self, mtu):
            self.gw = {"metadata": {"namespace": "default", "name": "client"}, "spec": {"mtu": mtu}}

        def list(self, kind, namespace=None, selector=None):
            return {"GatewayClient": [self.gw], "Pod": [pod("gw-client-x", ip="10.243.0.5")]}.get(kind, [])

        def get(self, kind, namespace, name):
            return None
    assert oi.gather(Kube(1300))["mtu"] == 1300
    facts = dict(FACTS, mtu=oi.gather(Kube(500))["mtu"])
    assert facts["mtu"] is None
    assert [ln["mtu"] for ln in oi.plan_node(NODES[1], facts)["links"]] == [None]
    assert {ln["mtu"] for ln in oi.plan_gateway(NODES, facts, "gw-client-x", ["lwg1"])["links"]} == {None}
    od.validate(oi.plan_node(NODES[1], facts), 18952, "present")
    assert [ln["mtu"] for ln in oi.plan_node(NODES[1], dict(FACTS, mtu=1300))["links"]] == [1300]
    assert [ln["mtu"] for ln in oi.plan_node(NODES[1], facts, mtu=1200)["links"]] == [1200]   # the role's wins


def test_the_gateway_pods_node_reaches_it_over_its_bridge_port():
    """Only the node the active pod runs on asks for the pod port (and its rule, ahead of the others); another
    node, a switched-off node agent and a gateway between two pods do not."""
    here = oi.plan_node(NODES[0], FACTS)
    assert here["pod_ports"] == [{"ip": "10.243.0.5"}]
    assert here["rules"][0] == {"priority": 1640, "to": "10.243.0.5/32", "table": 18952}
    od.validate(here, 18952, "present")
    elsewhere = oi.plan_node(NODES[1], FACTS)
    assert "pod_ports" not in elsewhere and all(r["priority"] != 1640 for r in elsewhere["rules"])
    off = oi.plan_node(NODES[0], FACTS, pod_port_route=False)
    assert "pod_ports" not in off and off["rules"] == here["rules"][1:]
    assert "pod_ports" not in oi.plan_node(NODES[0], dict(FACTS, pod=None))


@pytest.mark.parametrize("ports,msg", [
    ("10.243.0.5", "pod_ports: '10.243.0.5' is not a list"),
    ([{"ip": "10.243.0.5"}, {"ip": "10.243.0.5"}], "pod_ports: duplicate ip 10.243.0.5"),
    ([{"ip": None}], "pod_ports[0].ip: None is not an IP address"),
])
def test_bad_pod_ports_are_refused_before_the_kernel(ports, msg):
    with pytest.raises(od.ValidationError) as e:
        od.validate({"pod_ports": ports}, 18952, "present")
    assert str(e.value) == msg


def gateway(name, created, kind="GatewayClient", deleting=False, remote_id=None):
    meta = {"namespace": "default", "name": name, "creationTimestamp": created,
            "labels": {oi.REMOTE_CLUSTER_ID_LABEL: remote_id or f"id-{name}"}}
    if deleting:
        meta["deletionTimestamp"] = created
    return {"kind": kind, "metadata": meta, "spec": {"mtu": 1340}}


def test_vni_offsets_a_lone_gateway_keeps_its_vnis_and_others_come_and_go_without_moving_it():
    first = gateway("client", "2026-01-01T00:00:00Z")
    later = [gateway(f"gw-{i}", f"2026-01-02T00:00:{i:02d}Z") for i in range(20)]
    assert oi.vni_offsets([first]) == {"client": 0}
    offsets = oi.vni_offsets([first] + later)
    assert offsets["client"] == 0 and len(set(offsets.values())) == 21
    assert all(0 < o < oi.VNI_OFFSETS for o in offsets.values() if o)
    # one of the later ones removed (or being deleted): nobody else moves
    assert oi.vni_offsets([first] + later[:5] + later[6:]) == {k: v for k, v in offsets.items() if k != "gw-5"}
    assert oi.vni_offsets([first] + later[:5] + [gateway("gw-5", "2026-01-02T00:00:05Z", deleting=True)]
                          + later[6:]) == {k: v for k, v in offsets.items() if k != "gw-5"}
    # a GatewayServer beside (created earlier in the same second): the name breaks the tie, the same on every side
    server = gateway("a-server", "2026-01-01T00:00:00Z", kind="GatewayServer")
    assert oi.vni_offsets([first, server]) == oi.vni_offsets([server, first]) == {
        "a-server": 0, "client": oi.vni_offsets([server, first])["client"]}
    assert oi.link_vni(2) == 4098 and oi.link_vni(65534, 254) == 4096 + 65534 + 254 * 65536
    with pytest.raises(oi.OverlayPlanError, match="vni: "):
        oi.link_vni(70000, 1)


class TwoGateways:
    """The API a node agent and the gateway pods read: two GatewayClients of one namespace towards two remotes,
    their active pods on node 0, each remote's Configuration with its remapped pod CIDR."""

    def __init__(self, pods=True):
        self.gws = [gateway("client", "2026-01-01T00:00:00Z", remote_id="b"),
                    gateway("client-c", "2026-01-02T00:00:00Z", remote_id="c")]
        self.pods = {"client": [pod("gw-client-x", ip="10.243.0.5")] if pods else [],
                     "client-c": [pod("gw-client-c-x", ip="10.243.0.6")]}
        self.confs = [{"metadata": {"labels": {oi.REMOTE_CLUSTER_ID_LABEL: rid}},
                       "status": {"remote": {"cidr": {"pod": [cidr]}}}} for rid, cidr in (("b", "10.71.0.0/16"),
                                                                                          ("c", "10.72.0.0/16"))]

    def list(self, kind, namespace=None, selector=None):
        if kind == "Pod":
            return self.pods[selector.rsplit("=", 1)[1]]
        return {"GatewayClient": self.gws, "Configuration": self.confs}.get(kind, [])

    def get(self, kind, namespace, name):
        if kind == "ConfigMap":
            return {"data": {"podCIDR": "10.243.0.0/16", "internalCIDR": "10.80.0.0/16"}}
        return next((g for g in self.gws if g["metadata"]["name"] == name), None)


def test_a_node_routes_every_gateways_remote_cidrs_over_its_own_link_and_both_ends_agree():
    kube = TwoGateways()
    facts = oi.gather(kube)
    assert [g["gateway"] for g in facts["gateways"]] == ["default/client", "default/client-c"]
    for n in NODES:
        mine = oi.plan_node(n, facts)
        od.validate(mine, 18952, "present")
        links = {ln["name"]: ln for ln in mine["links"]}
        assert len(links) == 2 and len({ln["vni"] for ln in links.values()}) == 2
        for name, cidr, ip in (("client", "10.71.0.0/16", "10.243.0.5"), ("client-c", "10.72.0.0/16", "10.243.0.6")):
            dev = oi.node_link_name(f"default/{name}")
            assert links[dev]["remotes"] == [ip]
            assert {"dst": cidr, "via": "10.80.0.1", "dev": dev, "onlink": True, "src": n["spec"]["podCIDR"][:-4] + "1"} \
                in mine["routes"]
            assert {"priority": 1900, "to": cidr, "table": 18952} in mine["rules"]
            assert {"saddr": "10.243.0.0/16", "daddr": cidr} in mine["bypass"]
            # the gateway pod's end of the same link: the same VNI
            own = oi.gather(kube, {"kind": "GatewayClient", "namespace": "default", "name": name})
            pod_plan = oi.plan_gateway(NODES, own, own["pod"]["name"], ["lwg1"])
            other = next(ln for ln in pod_plan["links"] if ln["remotes"] == [n["status"]["addresses"][0]["address"]])
            assert other["vni"] == links[dev]["vni"] and other["local"] == ip
        # the lone gateway's VNIs are those it had alone
        assert links[oi.node_link_name("default/client")]["vni"] == oi.VNI_BASE + oi.node_slot(n, "10.80.0.0/16")[0]
    here = oi.plan_node(NODES[0], facts)
    assert here["pod_ports"] == [{"ip": "10.243.0.5"}, {"ip": "10.243.0.6"}]
    assert [r["to"] for r in here["rules"][:2]] == ["10.243.0.5/32", "10.243.0.6/32"]
    # one gateway gone (its CR deleted): the other's link, routes and rules exactly as they were
    alone = TwoGateways()
    alone.gws = alone.gws[:1]
    kept = oi.plan_node(NODES[1], oi.gather(alone))
    both = oi.plan_node(NODES[1], facts)
    dev = oi.node_link_name("default/client")
    assert kept["links"] == [ln for ln in both["links"] if ln["name"] == dev]
    assert kept["routes"] == [r for r in both["routes"] if r.get("dev") == dev]
    assert kept["rules"] == [r for r in both["rules"] if r["to"] != "10.72.0.0/16"]


def test_a_gateway_between_two_pods_blackholes_its_own_cidrs_only():
    facts = oi.gather(TwoGateways(pods=False))
    plan = oi.plan_node(NODES[1], facts)
    od.validate(plan, 18952, "present")
    assert {"dst": "10.71.0.0/16", "type": "blackhole"} in plan["routes"]
    assert [ln["remotes"] for ln in plan["links"]] == [["10.243.0.6"]]
    assert {"dst": "10.80.0.1/32", "dev": oi.node_link_name("default/client-c"), "scope": "link"} in plan["routes"]
