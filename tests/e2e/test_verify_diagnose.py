"""liqo.fabric.verify, liqo.fabric.benchmark and liqo.fabric.diagnose on two connected lab clusters
(2 nodes x 2 pods each).

verify: every node pair (one pod each; every pod pair with full=true) and every node that is not a gateway host
reach the remote pods at their remapped addresses, small and full-size (MTU) packets, both directions, from the
pods' own network namespaces; a broken node is named and the run exits non-zero.
benchmark: the pod path and the tunnel measured side by side (iperf3, ping), no server left behind.
diagnose: every check passes on a healthy fabric; each fault injected by hand (a flushed NAT table, deleted overlay
routes, an rp_filter turned strict, an MTU changed on one side) is named with its object, cause and fix, the run
exits non-zero, and nothing is repaired by it (it writes nothing). JSON on request for both. The tests run in
order on one lab."""
import json
import re
import shutil

import pytest

from tests.e2e import fabric
from tests.e2e.fabric import kubectl, playbook
from tests.lab import netns

pytestmark = pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl is not installed")
TABLE = "18952"


@pytest.fixture(scope="module")
def lab():
    groups = {"gateway_group": "cluster_a_gateway", "remote_gateway_group": "cluster_b_gateway",
              "nodes_group": "cluster_a_nodes", "remote_nodes_group": "cluster_b_nodes"}
    with fabric.connected_pair(nodes=2, pods_per_node=2, wait_timeout=60, **groups) as lab_:
        lab_.groups = groups
        yield lab_


def verify(lab, **extra):
    return playbook("verify", lab.inventory_path, check=False, kubeconfig=lab["a"].kubeconfig,
                    remote_kubeconfig=lab["b"].kubeconfig, nodes_group=lab.groups["nodes_group"],
                    remote_nodes_group=lab.groups["remote_nodes_group"], **extra)


def probe_lines(proc, status="PASS") -> list:
    return [line for line in proc.stdout.splitlines() if line.startswith(status + " ")]


def test_verify_reaches_every_node_pair_both_ways_small_and_full_size(lab):
    proc = verify(lab)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    passed = probe_lines(proc)
    # per direction: 2 source nodes x (1 pod + the node itself unless gateway host) x 2 remote nodes x 2 sizes
    assert len(passed) == 2 * (2 * 1 * 2 * 2 + 1 * 2 * 2), "\n".join(passed)
    assert not probe_lines(proc, "FAIL")
    skipped = probe_lines(proc, "SKIP")
    assert [s.split()[4:6] for s in skipped] == [["node", "a-node-1:"], ["node", "b-node-1:"]], skipped
    for direction, src, dst in (("local -> remote", "a", "b"), ("remote -> local", "b", "a")):
        for n in (1, 2):
            for m in (1, 2):
                # a pod of node n reaches a pod of remote node m at its remapped address (host bits kept)
                pat = (rf"^PASS  {direction}  default/pod-{n}-1 \(10\.243\.{n - 1}\.2 on {src}-node-{n}\) -> "
                       rf"default/pod-{m}-1 (\d+\.\d+)\.{m - 1}\.2 \(10\.243\.{m - 1}\.2 on {dst}-node-{m}\)  (56|1312) B  rtt ")
                found = [re.match(pat, line) for line in passed if re.match(pat, line)]
                assert len(found) == 2 and found[0].group(1) != "10.243", (direction, n, m)
    assert re.search(r"^\d+ probes, \d+ passed, 0 failed, 2 skipped$", proc.stdout, re.M)


def test_verify_full_covers_every_pod_pair_and_names_a_broken_node(lab):
    full = verify(lab, full=True)
    assert full.returncode == 0, full.stdout[-3000:]
    # per direction: 4 pods x 4 remote pods + 1 non-gateway node x 2 remote nodes, each at 2 sizes
    assert len(probe_lines(full)) == 2 * (4 * 4 + 1 * 2) * 2
    node2 = lab["a"].node("a-node-2")
    netns.run(["ip", "-n", node2.netns, "route", "flush", "table", TABLE])
    try:
        proc = verify(lab, output="json")
        assert proc.returncode != 0
        data = json.loads(re.search(r"^\{.*^\}", proc.stdout, re.M | re.S).group(0))
        involved = [p for p in data["probes"] if "a-node-2" in (p["from_node"], p["node"])]
        # every probe from a-node-2 (its pods and the node itself) or to its pods fails (the answers need the
        # routes too), and nothing else
        assert involved and all(not p["ok"] and p["error"].startswith("no answer") for p in involved), involved
        assert all(p["ok"] for p in data["probes"] if p not in involved)
        assert len(data["skipped"]) == 2
    finally:
        playbook("reconcile_overlay", lab.inventory_path, kubeconfig=lab["a"].kubeconfig, nodes_group="cluster_a_nodes")
    assert verify(lab).returncode == 0


def iperf_servers(lab) -> list:
    """iperf3 processes inside the lab's namespaces."""
    return [pid for n in netns.list_netns() if n.startswith(lab.prefix) for pid in netns.pids_in_netns(n)
            if "iperf3" in open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")]


def test_benchmark_pod_path_and_tunnel_side_by_side(lab):
    proc = playbook("benchmark", lab.inventory_path, check=False, kubeconfig=lab["a"].kubeconfig,
                    remote_kubeconfig=lab["b"].kubeconfig, seconds=1, output="json", **lab.groups)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    figures = json.loads(re.search(r"^\{.*^\}", proc.stdout, re.M | re.S).group(0))
    pod, tunnel = figures["pod_to_pod"], figures["gateway_to_gateway"]
    assert float(pod["mbit_per_s"]) > 0 and float(tunnel["mbit_per_s"]) > 0
    assert 0 < float(pod["rtt_ms"]) and 0 < float(tunnel["rtt_ms"])
    assert abs(float(figures["throughput_ratio"]) - float(pod["mbit_per_s"]) / float(tunnel["mbit_per_s"])) < 0.01
    # the pod path: a pod of the node that is not a gateway host, to the remote one's remapped address
    assert re.fullmatch(r"default/pod-2-1 \(10\.243\.1\.2 on a-node-2\)", pod["from"]), pod
    assert re.fullmatch(r"default/pod-2-1 (\d+\.\d+)\.1\.2 \(10\.243\.1\.2 on b-node-2\)", pod["to"]), pod
    assert tunnel["from"] == "a-node-1 (169.254.18.2)" and tunnel["to"] == "b-node-1 (169.254.18.1)"
    text = playbook("benchmark", lab.inventory_path, check=False, kubeconfig=lab["a"].kubeconfig,
                    remote_kubeconfig=lab["b"].kubeconfig, seconds=1, **lab.groups).stdout
    assert re.search(r"^pod to pod\s+[\d.]+ Mbit/s", text, re.M) and re.search(r"^gateway to gateway\s+[\d.]+ Mbit/s", text, re.M)
    assert re.search(r"^pod path / tunnel: throughput x [\d.]+, RTT [-+][\d.]+ ms$", text, re.M), text
    assert iperf_servers(lab) == []  # each server served its one test and exited


def diagnose(lab, **extra):
    return playbook("diagnose", lab.inventory_path, check=False, kubeconfig=lab["a"].kubeconfig,
                    remote_kubeconfig=lab["b"].kubeconfig, **lab.groups, **extra)


def report(proc) -> list:
    return [line for line in proc.stdout.splitlines() if line.startswith(("PASS ", "FAIL ", "      "))]


def failed(proc) -> list:
    return [line for line in report(proc) if line.startswith("FAIL ")]


def test_healthy_fabric_passes_every_check(lab):
    proc = diagnose(lab)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    lines = report(proc)
    assert not failed(proc), "\n".join(failed(proc))
    text = "\n".join(lines)
    for what in ("CRD installed", "Configuration remapped", "remapped CIDRs do not overlap", "gateway keys present",
                 "peer's PublicKey present", "MTU equal on both sides", "Connection Connected", "apiserver clocks agree",
                 "gateway dataplane matches the plan", "forwarding and rp_filter sysctls", "WireGuard handshake recent",
                 "overlay matches the plan"):
        assert what in text, what
    # both clusters, every node of each, both gateway hosts
    for node in ("a-node-1", "a-node-2", "b-node-1", "b-node-2"):
        assert re.search(rf"^PASS\s+{node} \(\w+\)\s+overlay matches the plan", text, re.M), node
    assert re.search(r"last handshake \d+ s ago, rx \d+ B, tx \d+ B", text)
    assert re.search(r"^\d+ checks, \d+ passed, 0 failed$", proc.stdout, re.M)
    assert "privateKey and publicKey set (not shown)" in text


def test_each_fault_is_named_with_cause_and_fix_and_left_alone(lab):
    a, b = lab["a"], lab["b"]
    gw, node2 = a.node("a-node-1"), a.node("a-node-2")
    nft = netns.run(["ip", "netns", "exec", gw.netns, "nft", "list", "tables"]).stdout.split()
    nat = next(t for t in nft if t.startswith("lfgw_"))
    netns.run(["ip", "netns", "exec", gw.netns, "nft", "flush", "table", "ip", nat])
    netns.run(["ip", "-n", node2.netns, "route", "flush", "table", TABLE])
    netns.run(["ip", "netns", "exec", b.node("b-node-1").netns, "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=1"])
    client = json.loads(kubectl(a, "get", "gatewayclients.networking.liqo.io", "-A", "-o", "json"))["items"][0]
    kubectl(a, "patch", "gatewayclients.networking.liqo.io", "-n", client["metadata"]["namespace"],
            client["metadata"]["name"], "--type=merge", "-p", '{"spec":{"mtu":1300}}')
    try:
        proc = diagnose(lab)
        assert proc.returncode != 0
        bad = "\n".join(failed(proc))
        text = "\n".join(report(proc))
        assert re.search(r"FAIL\s+a-node-1 \(local\)\s+gateway dataplane matches the plan\s+GatewayClient lwg\w+: differs: "
                         r"wireguard, nat",  # wireguard: the MTU changed below
                         bad), bad
        assert re.search(r"FAIL\s+a-node-2 \(local\)\s+overlay matches the plan.*routes missing: ", bad), bad
        assert re.search(r"FAIL\s+b-node-1 \(remote\)\s+forwarding and rp_filter sysctls.*rp_filter", bad), bad
        assert re.search(r"FAIL\s+local\s+MTU equal on both sides\s+GatewayClient .*here 1300, the peer 1340", bad), bad
        assert len(failed(proc)) == 4, bad
        # under each failure: the likely cause and the fix
        assert "cause: the two gateways were given different MTUs" in text
        assert "fix:   ansible-playbook -i INVENTORY liqo.fabric.reconcile_overlay" in text
        assert "fix:   ansible-playbook -i INVENTORY liqo.fabric.reconcile_gateway" in text
        assert "cause: kernel state changed behind the fabric's back (drift)" in text
        assert re.search(r"^\d+ checks, \d+ passed, 4 failed$", proc.stdout, re.M)
        # JSON on request, the same findings
        js = diagnose(lab, output="json")
        checks = json.loads(re.search(r"^\[.*^\]", js.stdout, re.M | re.S).group(0))
        assert len([c for c in checks if not c["ok"]]) == 4
        assert all(c["cause"] and c["fix"] for c in checks if not c["ok"])
        # diagnose repaired nothing
        assert netns.run(["ip", "netns", "exec", gw.netns, "nft", "list", "table", "ip", nat]).stdout.count("dnat") == 0
        assert netns.run(["ip", "-n", node2.netns, "route", "show", "table", TABLE]).stdout.strip() == ""
    finally:
        kubectl(a, "patch", "gatewayclients.networking.liqo.io", "-n", client["metadata"]["namespace"],
                client["metadata"]["name"], "--type=merge", "-p", '{"spec":{"mtu":1340}}')
        netns.run(["ip", "netns", "exec", b.node("b-node-1").netns, "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=2"])
    playbook("reconcile_gateway", lab.inventory_path, kubeconfig=a.kubeconfig, gateway_group="cluster_a_gateway",
             nodes_group="cluster_a_nodes")
    assert diagnose(lab).returncode == 0
