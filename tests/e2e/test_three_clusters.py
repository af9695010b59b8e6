"""Three clusters in the cluster: a, b and c installed with `kubectl apply -k deploy/` on real-node lab clusters
(2 nodes each: a gateway host and one more), a peered with b and with c by kubectl only (the seeds' "manual on
single cluster" flow, in_cluster_lab.connect_pair): a is b's client and c's server, so a runs two gateways. b and c
have the same pod CIDR, nested in a's: a remaps both, each to its own range.

Every pod of a reaches every pod of b and of c and back, at the remapped addresses; then the a-c peering is removed
(kubectl delete of its objects on both sides) under 5 pings/s and one long-lived TCP flow across a-b: not one ping
lost, the flow alive, and nothing of a-c left in the API, on a's nodes or in a's gateway pods. The lab is this
module's own, brought up after the shared real-node lab went down (real_nodes.LATER) and checked for residue once
down, as the shared one is.
"""
from __future__ import annotations

import ipaddress
import json
import re
import time

import pytest

from tests.conftest import require_root
from tests.e2e import real_nodes
from tests.e2e.fabric import wait_for
from tests.e2e.real_nodes import assert_no_residue, kubectl, residue
from tests.lab import Lab, netns
from tests.lab.tcp import Flow

pytest.register_assert_rewrite("tests.e2e.in_cluster_lab")
from tests.e2e.in_cluster_lab import (  # noqa: E402  pylint: disable=wrong-import-position
    active_gateway, connect_pair, connection_to, disconnect_pair, get_json, host_pid, install, pod_ping_flow,
    probe_every_pod_pair, remapped, workload_pods)

POD_CIDRS = {"a": "10.242.0.0/15", "b": "10.243.0.0/16", "c": "10.243.0.0/16"}
# (client cluster, server cluster, the client's Configuration of the server, the server's of the client)
AB = ("a", "b", "dry-paper", "crimson-field")
CA = ("c", "a", "c-sees-a", "a-sees-c")
FLOW_PORT = 5413


def three_clusters() -> Lab:
    return Lab([{"name": n, "pod_cidr": cidr} for n, cidr in POD_CIDRS.items()], nodes=2, real_nodes=True)


@pytest.fixture(scope="module")
def held():
    """This module's lab (real_nodes.SharedLab for its bring-up and residue snapshot), down at the latest at the
    module's end."""
    require_root()
    holder = real_nodes.SharedLab(three_clusters)
    try:
        yield holder
    finally:
        holder.down()


@pytest.fixture(scope="module")
def peered(held):
    lab = held.get()
    install(lab)
    ids = {**connect_pair(lab, *AB)["ids"], **connect_pair(lab, *CA)["ids"]}
    return lab, ids


def remote_pod_cidr(cluster, conf: str) -> str:
    return get_json(cluster, "configurations", conf)["status"]["remote"]["cidr"]["pod"][0]


def on_node(node, *argv) -> str:
    return netns.run(["ip", "netns", "exec", node.netns, *argv]).stdout


def overlay_links(node) -> dict:
    """{name: `ip -d link` line} of the node's overlay links towards gateway pods."""
    out = {}
    for line in on_node(node, "ip", "-d", "-o", "link", "show").splitlines():
        m = re.match(r"^\d+: (lovg[0-9a-f]+)[@:]", line)
        if m:
            out[m.group(1)] = line
    return out


def test_a_remaps_b_and_c_apart_and_runs_a_gateway_for_each(peered):
    lab, ids = peered
    a = lab["a"]
    seen_b, seen_c = remote_pod_cidr(a, AB[2]), remote_pod_cidr(a, CA[3])
    nets = [ipaddress.ip_network(x) for x in (POD_CIDRS["a"], seen_b, seen_c)]
    # b's and c's 10.243.0.0/16 lies in a's 10.242.0.0/15: both remapped, to ranges of their size that differ
    assert nets[1].prefixlen == nets[2].prefixlen == 16
    assert not any(x.overlaps(y) for i, x in enumerate(nets) for y in nets[i + 1:]), nets
    # a's own range is remapped in b and in c too (it holds theirs)
    assert not ipaddress.ip_network(remote_pod_cidr(lab["b"], AB[3])).overlaps(ipaddress.ip_network(POD_CIDRS["b"]))
    assert not ipaddress.ip_network(remote_pod_cidr(lab["c"], CA[2])).overlaps(ipaddress.ip_network(POD_CIDRS["c"]))
    # Connected on all four sides (a peer's health says Error after 3 lost probes: a 2-core machine running the
    # suite's other worker beside 6 kubelets can starve a tunnel that long; it must come back by itself)
    for c, other in (("a", "b"), ("a", "c"), ("b", "a"), ("c", "a")):
        wait_for(lambda c=c, other=other: (connection_to(lab[c], ids[other]).get("status") or {}).get("value") == "Connected",
                 timeout=60, what=f"{c}: the Connection with {other} Connected")
    assert active_gateway(a, "client").metadata.name != active_gateway(a, "server").metadata.name
    # every node of a: a link to each gateway pod (VNIs apart), each remote range routed over its own link
    for node in a.nodes:
        links = overlay_links(node)
        assert len(links) == 2, links
        assert len({re.search(r" id (\d+) ", line).group(1) for line in links.values()}) == 2, links
        routes = on_node(node, "ip", "route", "show", "table", "18952")
        devs = {re.search(rf"^{re.escape(cidr)} via \S+ dev (\S+)", routes, re.M).group(1) for cidr in (seen_b, seen_c)}
        assert devs == set(links), (routes, links)


def test_every_pod_of_a_reaches_every_pod_of_b_and_of_c_and_back(peered):
    lab, _ids = peered
    pairs = 2 * len(lab["a"].nodes) * len(lab["b"].nodes)
    assert probe_every_pod_pair(lab, pair=("a", "b"), confs=AB[2:]) == pairs
    assert probe_every_pod_pair(lab, pair=("a", "c"), confs=(CA[3], CA[2])) == pairs


def test_removing_a_c_leaves_a_b_untouched_and_nothing_of_a_c(peered):
    lab, ids = peered
    a, b, c = lab["a"], lab["b"], lab["c"]
    seen_c = remote_pod_cidr(a, CA[3])
    server_pods = [p.metadata.name for p in a.kube.core.list_namespaced_pod(
        "default", label_selector="networking.liqo.io/gateway-name=server").items]
    src = next(p for p in workload_pods(a) if p.spec.node_name != active_gateway(a, "client").spec.node_name)
    dst = workload_pods(b)[0]
    target = remapped(dst.status.pod_ip, remote_pod_cidr(a, AB[2]), POD_CIDRS["b"])
    links_before = {n.name: overlay_links(n)[_link_of(n, target)] for n in a.nodes}
    states = []
    ping = pod_ping_flow(a, src.metadata.name, target)
    flow = Flow(["nsenter", "-t", str(host_pid(a, src.metadata.name)), "-n"],
                ["nsenter", "-t", str(host_pid(b, dst.metadata.name)), "-n"], target, FLOW_PORT)
    try:
        disconnect_pair(lab, *CA)

        def a_c_gone():
            states.append((connection_to(a, ids["b"]).get("status") or {}).get("value"))
            return not _a_c_left(lab, ids, seen_c, server_pods)

        wait_for(a_c_gone, timeout=180, interval=1, what="nothing of the a-c peering left")
        time.sleep(3)   # pings and the flow go on a moment after the last of it went
        states.append((connection_to(a, ids["b"]).get("status") or {}).get("value"))
    finally:
        sent, lost, losses = ping.stop()
        tcp = flow.stop()
    assert sent >= 25 and not lost, (sent, lost, losses)
    assert not tcp["error"] and tcp["sent"] > 0 and tcp["received"] == tcp["sent"], tcp
    assert set(states) == {"Connected"}, states
    # a-b's links on a's nodes are the ones they were (not recreated, same VNI)
    assert {n.name: overlay_links(n)[_link_of(n, target)] for n in a.nodes} == links_before
    for x, other in (("a", "b"), ("b", "a")):
        assert (connection_to(lab[x], ids[other]).get("status") or {}).get("value") == "Connected"
    assert not get_json(c, "connections")["items"]


def _link_of(node, address: str) -> str:
    """The overlay link `node` sends `address` over (its rules select table 18952)."""
    return re.search(r"\bdev (lovg[0-9a-f]+)", on_node(node, "ip", "route", "get", address)).group(1)


def _a_c_left(lab, ids: dict, seen_c: str, server_pods: list) -> list:
    """What is left of the a-c peering, named: empty once it is all gone."""
    a, c = lab["a"], lab["c"]
    left = []
    for cluster, gw, kind, other in ((a, "server", "gatewayserver", "c"), (c, "client", "gatewayclient", "a")):
        names = kubectl(cluster, "get", f"{kind}s,deployments,services,secrets,connections,publickeies.networking.liqo.io,"
                        "configurations", "-n", "default", "-o", "name").stdout.split()
        left += [f"{cluster.name}: {x}" for x in names
                 if x.split("/")[0].startswith((kind, "connection")) and x.endswith(f"/{gw}")
                 or x.endswith((f"/gw-{gw}", f"/wg-{gw}-{gw}", f"/from-{other}"))
                 or x.split("/")[0].startswith("configuration") and x.endswith(("/" + CA[2], "/" + CA[3]))]
        left += [f"{cluster.name}: pod {p.metadata.name}" for p in cluster.kube.core.list_namespaced_pod(
            "default", label_selector=f"networking.liqo.io/gateway-name={gw}").items]
    ledger = json.loads(get_json(a, "configmap", "-n", "liqo", "liqo-fabric-ipam")["data"]["state.json"])
    left += [f"a: IPAM allocation {x}" for x in ledger["allocations"] if CA[3] in json.dumps(x) or seen_c in json.dumps(x)]
    for node in a.nodes:
        for what, out in (("route", on_node(node, "ip", "route", "show", "table", "18952")),
                          ("rule", on_node(node, "ip", "rule")),
                          ("bypass", on_node(node, "nft", "list", "ruleset"))):
            left += [f"a/{node.name} {what}: {ln.strip()}" for ln in out.splitlines() if seen_c in ln]
        if len(overlay_links(node)) != 1:
            left.append(f"a/{node.name}: links {sorted(overlay_links(node))}")
    for pod in a.kube.core.list_namespaced_pod("default", label_selector="networking.liqo.io/component=gateway").items:
        rules = kubectl(a, "exec", pod.metadata.name, "--", "nft", "list", "ruleset", check=False).stdout
        left += [f"a: pod {pod.metadata.name} nft: {ln.strip()}" for ln in rules.splitlines() if seen_c in ln]
    return left


def test_zero_residue_after_down(peered, held):
    """Takes the lab down and compares with what was there before it came up (as the shared lab's check does)."""
    lab, _ids = peered
    assert residue(lab)["processes"]  # sanity: the snapshot sees the lab while it runs
    held.down()
    assert_no_residue(residue(lab), held.before)
