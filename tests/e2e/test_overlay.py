"""Every pod of A reaches every pod of B (both 10.243.0.0/16) at its remapped address
and back, through the overlay to the active gateway; MTU/MSS right; nodes and pods that come and go are
followed; gateway failover; disconnect leaves nothing on any node. Tests run in order on one lab."""
import json
import shutil
import threading
import time

import pytest

from tests.e2e import fabric
from tests.e2e.fabric import PeerServer, playbook, seen_source, translate
from tests.lab import netns, tcp

pytestmark = pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl is not installed")
GROUPS = dict(gateway_group="cluster_a_gateway", remote_gateway_group="cluster_b_gateway",
              nodes_group="cluster_a_nodes", remote_nodes_group="cluster_b_nodes")


@pytest.fixture(scope="module")
def lab():
    with fabric.connected_pair(nodes=3, pods_per_node=2, cluster_a={"gateways": 2}, **GROUPS) as lab_:
        yield lab_


def remapped(cluster):
    return fabric.get(cluster, "configurations")[0]["status"]["remote"]["cidr"]["pod"][0]


def overlay(lab, cluster, **extra):
    playbook("reconcile_overlay", lab.inventory_path, nodes_group=f"cluster_{cluster}_nodes", **extra)


def _ping_all(src_cluster, dst_cluster, view):
    failures = []
    for src in src_cluster.pods:
        for dst in dst_cluster.pods:
            addr = translate(dst.ip, dst_cluster.pod_cidr, view)
            if not src_cluster.ping(src.netns, addr, count=1):
                failures.append(f"{src.name}@{src_cluster.name} -> {dst.name}@{dst_cluster.name} ({addr})")
    return failures


def test_every_pod_reaches_every_remote_pod_both_ways(lab):
    a, b = lab["a"], lab["b"]
    assert _ping_all(a, b, remapped(a)) == []
    assert _ping_all(b, a, remapped(b)) == []


def test_tcp_sources_are_remapped_with_host_bits_from_every_node(lab):
    a, b = lab["a"], lab["b"]
    for src in (n.pods[0] for n in a.nodes):
        for dst in (n.pods[1] for n in b.nodes):
            with PeerServer(dst.netns):
                seen = seen_source(src.netns, translate(dst.ip, b.pod_cidr, remapped(a)))
            assert seen == translate(src.ip, a.pod_cidr, remapped(b)), (src.name, dst.name)


def test_node_reaches_remote_pods(lab):
    a, b = lab["a"], lab["b"]
    for node in a.nodes[1:]:
        assert a.ping(node.netns, translate(b.nodes[2].pods[0].ip, b.pod_cidr, remapped(a)))


def test_large_packets_and_a_large_tcp_transfer_pass(lab):
    a, b = lab["a"], lab["b"]
    src, dst = a.nodes[2].pods[0], b.nodes[2].pods[0]
    target = translate(dst.ip, b.pod_cidr, remapped(a))
    # 1,400 bytes of payload: more than the tunnel MTU (1340) allows unfragmented, so the path must
    # signal it (ICMP frag-needed) and the sender fragment, never silently drop
    out = netns.exec_in(src.netns, ["ping", "-n", "-c", "5", "-i", "0.2", "-W", "1", "-s", "1400", target],
                        check=False).stdout
    received = int(out.split(" received")[0].rsplit(" ", 1)[-1])
    assert received >= 4, out
    # 20 MB over TCP: MSS clamping keeps segments inside the tunnel MTU
    size = 20 * 1024 * 1024
    assert tcp.transfer(src.netns, dst.netns, target, 7100, size) == size


def test_masquerade_bypass_keeps_pod_sources(lab):
    """A CNI-like masquerade on a node would hide the pod behind the node; the bypass prevents it."""
    a, b = lab["a"], lab["b"]
    node = a.nodes[2]
    netns.exec_in(node.netns, ["nft", "-f", "-"], input=(
        "table ip cni_masq { chain post { type nat hook postrouting priority srcnat; "
        "ip saddr 10.243.0.0/16 oifname != \"cni0\" masquerade; }; }"))
    try:
        dst = b.nodes[1].pods[0]
        with PeerServer(dst.netns):
            seen = seen_source(node.pods[1].netns, translate(dst.ip, b.pod_cidr, remapped(a)))
        assert seen == translate(node.pods[1].ip, a.pod_cidr, remapped(b))
    finally:
        netns.exec_in(node.netns, ["nft", "delete", "table", "ip", "cni_masq"])


def _gateway_routes(cluster):
    return netns.exec_in(cluster.gateway_nodes[0].netns, ["ip", "route", "show", "table", "18952"]).stdout


def test_new_node_and_pod_are_followed_and_removed(lab):
    a, b = lab["a"], lab["b"]
    node = a.add_node(pods=1)
    pod = a.add_pod(a.nodes[1].name)
    new_ips = [node.pods[0].ip, pod.ip]
    try:
        overlay(lab, "a")
        target = translate(b.nodes[1].pods[0].ip, b.pod_cidr, remapped(a))
        assert a.ping(node.pods[0].netns, target)
        assert a.ping(pod.netns, target)
        assert f"{node.pods[0].ip} via" in _gateway_routes(a) and f"{pod.ip} via" in _gateway_routes(a)
        # the remote side reaches the new pods too
        assert b.ping(b.nodes[2].pods[0].netns, translate(node.pods[0].ip, a.pod_cidr, remapped(b)))
    finally:
        a.remove_pod(pod.name)
        a.remove_node(node.name)
    overlay(lab, "a")
    routes = _gateway_routes(a)
    assert not [ip for ip in new_ips if f"{ip} via" in routes], routes
    links = netns.exec_in(a.gateway_nodes[0].netns, ["ip", "-br", "link"]).stdout
    from ansible_collections.liqo.fabric.plugins.module_utils.overlay.plan import gateway_link_name
    assert gateway_link_name(node.name) not in links


def _task_results(proc, name):
    """{host: result} of the tasks whose name contains `name`, from a json-callback run."""
    out = {}
    for play in json.loads(proc.stdout)["plays"]:
        for task in play["tasks"]:
            if name in task["task"]["name"]:
                out.update(task["hosts"])
    return out


def _record(cluster):
    found = fabric.kubectl(cluster, "-n", "liqo", "get", "configmap", "--ignore-not-found", "-o", "json",
                           "liqo-fabric-overlay-applied")
    return json.loads(found)["data"] if found.strip() else None


def test_gateway_event_skips_nodes_whose_overlay_is_unchanged(lab):
    """node_overlay_skip_unchanged (the controller's gateway events): connect recorded what it applied, so the
    nodes are left alone; a run without it (reconcile_overlay) applies every node, repairs drift and records again;
    a failover changes every node's plan, so nothing is skipped then."""
    a = lab["a"]
    gw = dict(gateway_group="cluster_a_gateway", nodes_group="cluster_a_nodes", node_overlay_skip_unchanged=True)
    record = _record(a)
    assert sorted(record) == sorted(n.name for n in a.nodes) and all(len(v) == 20 for v in record.values())

    proc = playbook("reconcile_gateway", lab.inventory_path, json_output=True, **gw)
    batch = _task_results(proc, fabric.OVERLAY_BATCH_TASK)
    assert len(batch) == 1 and list(batch.values())[0]["applied"] == {}  # the decision ran, once, and chose no node
    assert fabric.overlay_applied(proc) == {}  # no module ran on any node
    assert _record(a) == record

    # drift on a node: reconcile_overlay compares the kernel, repairs it and records every node again
    node = a.nodes[2]
    netns.exec_in(node.netns, ["ip", "route", "flush", "table", "18952"])
    proc = playbook("reconcile_overlay", lab.inventory_path, nodes_group="cluster_a_nodes", json_output=True)
    assert [h for h, r in fabric.overlay_applied(proc).items() if r.get("changed")] == [node.name]
    assert _record(a) == record
    assert a.ping(node.pods[0].netns, translate(lab["b"].nodes[1].pods[0].ip, lab["b"].pod_cidr, remapped(a)))
    # a run the way the controller runs it keeps the record
    playbook("reconcile_gateway", lab.inventory_path, **gw)
    assert _record(a) == record


class Pinger(threading.Thread):
    """Pings every 50 ms; records reply times, to see traffic resume (bench_overlay measures the outage)."""

    def __init__(self, ns, address):
        super().__init__(daemon=True)
        self.ns, self.address, self.replies, self.stop = ns, address, [], threading.Event()

    def run(self):
        while not self.stop.is_set():
            if netns.exec_in(self.ns, ["ping", "-n", "-c", "1", "-W", "0.3", self.address], check=False).returncode == 0:
                self.replies.append(time.monotonic())
            time.sleep(0.05)


def test_gateway_failover_resumes_traffic(lab):
    a, b = lab["a"], lab["b"]
    assert len(a.gateway_nodes) == 2
    standby = a.gateway_nodes[1].name
    pinger = Pinger(a.nodes[2].pods[0].netns, translate(b.nodes[1].pods[0].ip, b.pod_cidr, remapped(a)))
    pinger.start()
    time.sleep(1)
    # one run moves the tunnel and re-points every node (the overlay follows gateway_active_host); run as the
    # controller runs gateway events: a recorded node is skipped only if its plan did not change, and here
    # every node's plan changes
    run = playbook("reconcile_gateway", lab.inventory_path, gateway_group="cluster_a_gateway",
                   nodes_group="cluster_a_nodes", gateway_active_host=standby, gateway_probe_wait=10,
                   node_overlay_skip_unchanged=True)
    fabric.wait_for(lambda: pinger.replies and pinger.replies[-1] > time.monotonic() - 0.5, timeout=30,
                    what="traffic through the new active gateway")
    pinger.stop.set()
    pinger.join()
    # the old active gateway holds no tunnel any more, the new one does
    old_links = netns.exec_in(a.gateway_nodes[0].netns, ["ip", "-br", "link"]).stdout
    new_links = netns.exec_in(a.gateway_nodes[1].netns, ["ip", "-br", "link"]).stdout
    assert "lwg" not in old_links, "the old active gateway kept its tunnel:\n%s\n%s" % (old_links, run.stdout[-8000:])
    assert "lwg" in new_links, "the new active gateway has no tunnel:\n%s\n%s" % (new_links, run.stdout[-8000:])
    assert _ping_all(a, b, remapped(a)) == []
    assert _ping_all(b, a, remapped(b)) == []


def test_disconnect_leaves_nothing_on_any_node(lab):
    a, b = lab["a"], lab["b"]
    playbook("disconnect", lab.inventory_path, kubeconfig=a.kubeconfig, remote_kubeconfig=b.kubeconfig,
             confirm="yes", **GROUPS)
    for cluster in (a, b):
        for node in cluster.nodes:
            links = netns.exec_in(node.netns, ["ip", "-br", "link"]).stdout
            assert "lov" not in links and "lwg" not in links, (node.name, links)
            assert netns.exec_in(node.netns, ["ip", "route", "show", "table", "18952"]).stdout == ""
            rules = netns.exec_in(node.netns, ["ip", "rule"]).stdout
            assert "18952" not in rules and "fwmark" not in rules, (node.name, rules)
            tables = netns.exec_in(node.netns, ["nft", "list", "tables"]).stdout
            assert "liqo_fabric" not in tables and "lfgw_" not in tables, (node.name, tables)
