"""What liqo.fabric.verify probes (module_utils/verify/probes.py); the playbook on a lab is tests/e2e/test_verify_diagnose.py."""
import pytest

from ansible_collections.liqo.fabric.plugins.module_utils.verify import probes as verify

CONF = {"metadata": {"name": "b", "namespace": "liqo-tenant-b", "labels": {"liqo.io/remote-cluster-id": "B"}},
        "spec": {"remote": {"cidr": {"pod": "10.243.0.0/16"}}}, "status": {"remote": {"cidr": {"pod": "10.7.0.0/16"}}}}


def pod(name, node, ip, phase="Running", host_network=False):
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"nodeName": node, "hostNetwork": host_network},
            "status": {"phase": phase, "podIP": ip}}


def test_remap_keeps_host_bits_and_refuses_foreign_addresses():
    assert verify.remap("10.243.3.7", "10.243.0.0/16", "10.7.0.0/16") == "10.7.3.7"
    with pytest.raises(verify.VerifyError, match="10.244.0.1 is not in the peer's pod CIDR 10.243.0.0/16"):
        verify.remap("10.244.0.1", "10.243.0.0/16", "10.7.0.0/16")


def test_sampled_plan_one_pod_per_node_pair_and_the_nodes_both_sizes():
    local = [pod("a1", "n1", "10.243.0.2"), pod("a1b", "n1", "10.243.0.3"), pod("a2", "n2", "10.243.1.2"),
             pod("pending", "n2", "10.243.1.9", phase="Pending"), pod("hostnet", "n2", "172.30.0.3", host_network=True)]
    remote = [pod("b1", "m1", "10.243.0.2"), pod("b2", "m2", "10.243.1.2"), pod("b2b", "m2", "10.243.1.3")]
    probes, skipped = verify.plan("local", "remote", local, remote, [CONF], "B", 1340, gateway_nodes={"n1"})
    assert sorted(probes) == ["n1", "n2"]
    # n1 is a gateway host: its pod only (2 remote nodes x 2 sizes); n2: its pod and the node itself
    assert len(probes["n1"]) == 4 and len(probes["n2"]) == 8
    assert {p["size"] for p in probes["n2"]} == {56, 1312}
    assert {(p["from"], p["to"], p["to_address"]) for p in probes["n2"]} == {
        ("default/a2", "default/b1", "10.7.0.2"), ("default/a2", "default/b2", "10.7.1.2"),
        ("node n2", "default/b1", "10.7.0.2"), ("node n2", "default/b2", "10.7.1.2")}
    assert skipped == [{"cluster": "local", "peer": "remote", "from": "node n1", "reason": verify.GATEWAY_HOST_SKIP}]
    full, dummy = verify.plan("local", "remote", local, remote, [CONF], "B", 1340, full=True)
    # every pod of n1 (2) to every remote pod (3), both sizes, and the node itself to one pod per remote node
    assert len(full["n1"]) == 2 * 3 * 2 + 2 * 2
    assert len([p for p in full["n1"] if p["from"] != "node n1"]) == 2 * 3 * 2


def test_gateway_pods_are_neither_sources_nor_targets():
    """In-cluster gateway pods (active or warm standby) sort before the workloads of their namespace; they are left
    out with the reason, so each node is probed through a workload pod."""
    gw = pod("gw-client-x", "n1", "10.243.0.5")
    gw["metadata"]["labels"] = {"networking.liqo.io/component": "gateway"}
    remote_gw = dict(pod("gw-server-y", "m1", "10.243.0.4"), metadata={
        "name": "gw-server-y", "namespace": "default", "labels": {"networking.liqo.io/component": "gateway"}})
    probes, skipped = verify.plan("local", "remote", [gw, pod("web", "n1", "10.243.0.2")],
                                  [remote_gw, pod("b1", "m1", "10.243.0.2")], [CONF], "B", 1340)
    assert {(p["from"], p["to"]) for p in probes["n1"]} == {("default/web", "default/b1"), ("node n1", "default/b1")}
    assert skipped == [{"cluster": "local", "peer": "remote", "from": "default/gw-client-x", "reason": verify.GATEWAY_POD_SKIP}]


def test_a_missing_remap_is_named():
    with pytest.raises(verify.VerifyError, match="no Configuration labelled liqo.io/remote-cluster-id=C"):
        verify.plan("local", "remote", [], [], [CONF], "C", 1340)
    unmapped = dict(CONF, status={})
    with pytest.raises(verify.VerifyError, match="has no remapped pod CIDR"):
        verify.plan("local", "remote", [], [], [unmapped], "B", 1340)


def test_the_report():
    ok = {"cluster": "local", "peer": "remote", "from": "default/a", "from_address": "10.243.0.2", "from_node": "n1",
          "to": "default/b", "to_address": "10.7.0.2", "original": "10.243.0.2", "node": "m1", "size": 56, "ok": True,
          "rtt_ms": 0.5}
    bad = dict(ok, ok=False, rtt_ms=None, error="no answer (100% loss)", size=1312)
    text = verify.table([ok, bad], [{"cluster": "local", "peer": "remote", "from": "node n1", "reason": "why"}])
    assert text.splitlines() == [
        "SKIP  local -> remote  node n1: why",
        "PASS  local -> remote  default/a (10.243.0.2 on n1) -> default/b 10.7.0.2 (10.243.0.2 on m1)  56 B  rtt 0.50 ms",
        "FAIL  local -> remote  default/a (10.243.0.2 on n1) -> default/b 10.7.0.2 (10.243.0.2 on m1)  1312 B  no answer (100% loss)",
        "2 probes, 1 passed, 1 failed, 1 skipped"]


def test_benchmark_pair_prefers_nodes_that_are_not_gateway_hosts():
    local = [pod("a1", "n1", "10.243.0.2"), pod("a2", "n2", "10.243.1.2")]
    remote = [pod("b1", "m1", "10.243.0.2"), pod("b2", "m2", "10.243.1.2")]
    pair = verify.benchmark_pair("local", local, remote, [CONF], "B", {"n1"}, {"m1"})
    assert pair == {"client": {"pod": "default/a2", "node": "n2", "address": "10.243.1.2"},
                    "server": {"pod": "default/b2", "node": "m2", "address": "10.243.1.2", "target": "10.7.1.2"}}
    only_gateways = verify.benchmark_pair("local", local[:1], remote[:1], [CONF], "B", {"n1"}, {"m1"})
    assert only_gateways["client"]["node"] == "n1"  # no other node: the gateway host's pod
    with pytest.raises(verify.VerifyError, match="no Running pod with its own address on the remote cluster"):
        verify.benchmark_pair("local", local, [], [CONF], "B")


def test_benchmark_report():
    text = verify.benchmark_table({
        "pod_to_pod": {"from": "p", "to": "q", "mbit_per_s": "900.0", "retransmits": "0", "rtt_ms": "0.5"},
        "gateway_to_gateway": {"from": "g", "to": "h", "mbit_per_s": 1000.0, "retransmits": 3, "rtt_ms": 0.4},
        "throughput_ratio": "0.9", "rtt_difference_ms": 0.1})
    lines = text.splitlines()
    assert lines[1].split() == ["pod", "to", "pod", "900.0", "Mbit/s", "0", "0.500", "ms", "p", "->", "q"]
    assert lines[2].split()[3:6] == ["1000.0", "Mbit/s", "3"]
    assert lines[3] == "pod path / tunnel: throughput x 0.900, RTT +0.100 ms"
