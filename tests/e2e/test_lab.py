"""The lab brings up real, isolated clusters that match their API objects."""
import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from tests.ansible_run import ansible_env
from tests.lab import netns


def _eth0_addr(ns: str) -> str:
    out = netns.exec_in(ns, ["ip", "-j", "-4", "addr", "show", "dev", "eth0"]).stdout
    return json.loads(out)[0]["addr_info"][0]["local"]


def test_same_pod_cidr_and_real_addresses_in_the_api(lab2):
    for cluster in lab2.clusters.values():
        assert cluster.pod_cidr == "10.243.0.0/16"
        nodes = cluster.kube.core.list_node().items
        assert sorted(n.metadata.name for n in nodes) == sorted(n.name for n in cluster.nodes)
        for node in nodes:
            plan = cluster.node(node.metadata.name)
            internal = [a.address for a in node.status.addresses if a.type == "InternalIP"]
            assert internal == [_eth0_addr(plan.netns)]
        pods = cluster.kube.core.list_namespaced_pod("default").items
        assert len(pods) == 6
        for pod in pods:
            plan = next(p for p in cluster.pods if p.name == pod.metadata.name)
            assert pod.status.phase == "Running"
            assert pod.status.pod_ip == _eth0_addr(plan.netns)
        cm = cluster.kube.core.read_namespaced_config_map("liqo-clusterid-configmap", "liqo")
        assert cm.data["CLUSTER_ID"] == cluster.cluster_id
    assert lab2["a"].cluster_id != lab2["b"].cluster_id


@pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl is not installed")
def test_kubectl_shows_nodes_and_pods_with_addresses(lab2):
    a = lab2["a"]
    out = subprocess.run(["kubectl", "--kubeconfig", a.kubeconfig, "get", "nodes,pods", "-A", "-o", "wide"],
                         capture_output=True, text=True, check=True).stdout
    for node in a.nodes:
        assert node.name in out and node.underlay_ip in out
        for pod in node.pods:
            assert pod.name in out and pod.ip in out


def test_pod_reaches_pod_on_another_node(lab2):
    a = lab2["a"]
    src, dst = a.nodes[0].pods[0], a.nodes[2].pods[1]
    assert a.ping(src.netns, dst.ip)
    assert a.ping(a.nodes[1].pods[0].netns, a.nodes[0].pods[1].ip)


def test_nothing_crosses_between_clusters(lab2):
    a, b = lab2["a"], lab2["b"]
    # Same pod CIDR on both sides: B's pod addresses from A lead to A's own pods, never to B.
    # Underlays are separate: no A node or pod reaches any B node address.
    for target in b.nodes:
        assert not a.ping(a.nodes[1].netns, target.underlay_ip)
        assert not a.ping(a.nodes[0].pods[0].netns, target.underlay_ip)
    # Only the gateway hosts share the WAN.
    assert a.ping(a.gateway_nodes[0].netns, b.gateway_nodes[0].wan_ip.split("/")[0])
    assert not a.ping(a.nodes[1].netns, b.gateway_nodes[0].wan_ip.split("/")[0])


def test_switches_forward_in_one_hop(lab2):
    """Underlay and WAN ports are macvlans on the switch's parent (one hop per frame, tests.lab.switch): the
    switch netns holds only that parent pair, no per-node port."""
    a = lab2["a"]

    def kind(ns: str, ifname: str) -> tuple:
        info = json.loads(netns.exec_in(ns, ["ip", "-d", "-j", "link", "show", "dev", ifname]).stdout)[0]["linkinfo"]
        return info["info_kind"], info.get("info_data", {}).get("mode")

    assert {kind(n.netns, "eth0") for n in a.nodes} == {("macvlan", "bridge")}
    assert kind(a.gateway_nodes[0].netns, "wan0") == ("macvlan", "bridge")
    for ns in (a.switch_netns, lab2.wan.netns):
        links = json.loads(netns.exec_in(ns, ["ip", "-j", "link", "show"]).stdout)
        assert sorted(link["ifname"] for link in links) == ["lo", "sw0", "sw0p"]


def test_playbook_with_netns_connection_sees_the_node_addresses(lab2, tmp_path):
    node = lab2["a"].nodes[1]
    playbook = tmp_path / "facts.yml"
    playbook.write_text(yaml.safe_dump([{
        "hosts": node.name, "gather_facts": True, "gather_subset": ["network"],
        "tasks": [{"ansible.builtin.copy": {
            "content": "{{ ansible_all_ipv4_addresses | to_json }}", "dest": str(tmp_path / "addrs.json")}}]}]))
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"),
                           "-i", lab2.inventory_path, str(playbook)],
                          capture_output=True, text=True, env=ansible_env(), timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    addrs = json.loads((tmp_path / "addrs.json").read_text())
    assert node.underlay_ip in addrs and node.bridge_ip in addrs
    assert lab2["a"].nodes[0].underlay_ip not in addrs  # another node's address is not this node's
