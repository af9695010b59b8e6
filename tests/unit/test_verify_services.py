"""The Services liqo.fabric.verify probes through (module_utils/verify/services.py): the selector-less NodePort
Service and Endpoints at the remote pod's remapped address, the TCP probes to its ClusterIP and NodePort, the
servers, and the report lines. On real-node clusters: tests/e2e/test_in_cluster.py."""
import pytest

from ansible_collections.liqo.fabric.plugins.module_utils.verify import probes as verify
from ansible_collections.liqo.fabric.plugins.module_utils.verify import services as vs
from tests.unit.test_verify import CONF, pod

LOCAL = [pod("a1", "n1", "10.243.0.2"), pod("a2", "n2", "10.243.1.2")]
REMOTE = [pod("b1", "m1", "10.243.0.2"), pod("b2", "m2", "10.243.1.2")]
NODES = [{"metadata": {"name": "n1"}, "status": {"addresses": [{"type": "InternalIP", "address": "172.30.0.2"}]}},
         {"metadata": {"name": "n2"}, "status": {"addresses": [{"type": "Hostname", "address": "n2"},
                                                               {"type": "InternalIP", "address": "172.30.0.3"}]}}]


def test_the_service_points_at_the_remote_pod_remapped_from_a_pod_off_the_gateway_hosts():
    entry = vs.plan("local", "remote", LOCAL, REMOTE, [CONF], "B", NODES, {"n1"}, {"m1"})
    assert entry["client"] == {"pod": "default/a2", "node": "n2", "address": "10.243.1.2", "node_ip": "172.30.0.3"}
    assert entry["server"]["target"] == "10.7.1.2" and entry["server"]["node"] == "m2"
    service, endpoints = entry["manifests"]
    assert service["kind"] == "Service" and "selector" not in service["spec"] and service["spec"]["type"] == "NodePort"
    assert (service["metadata"]["namespace"], service["metadata"]["name"]) == ("liqo", "liqo-fabric-verify")
    assert [(p["name"], p["port"]) for p in service["spec"]["ports"]] == [("cluster-ip", 5311), ("node-port", 5312)]
    assert endpoints["kind"] == "Endpoints" and endpoints["metadata"]["name"] == service["metadata"]["name"]
    assert endpoints["subsets"] == [{"addresses": [{"ip": "10.7.1.2"}],
                                     "ports": [{"name": "cluster-ip", "port": 5311, "protocol": "TCP"},
                                               {"name": "node-port", "port": 5312, "protocol": "TCP"}]}]
    assert vs.servers(entry) == [{"address": "10.243.1.2", "port": 5311}, {"address": "10.243.1.2", "port": 5312}]


def test_probes_to_the_cluster_ip_and_the_node_port_of_the_client_node():
    entry = vs.plan("local", "remote", LOCAL, REMOTE, [CONF], "B", NODES)
    applied = {"kind": "Service", "spec": {"clusterIP": "10.96.0.44", "ports": [
        {"port": 5311, "nodePort": 31001}, {"port": 5312, "nodePort": 31002}]}}
    cip, nport = vs.probes(entry, applied)
    assert (cip["to_address"], cip["port"], cip["size"]) == ("10.96.0.44", 5311, "TCP")
    assert (nport["to_address"], nport["port"]) == (entry["client"]["node_ip"], 31002)
    assert cip["from_address"] == entry["client"]["address"] and cip["original"] == entry["server"]["address"]
    text = verify.table([dict(cip, ok=True, rtt_ms=None, mbit_per_s=812.4),
                         dict(nport, ok=False, rtt_ms=None, error="TCP to 172.30.0.2:31002: unable to connect")])
    assert text.splitlines() == [
        "PASS  local -> remote  default/a1 (10.243.0.2 on n1) -> Service liqo/liqo-fabric-verify ClusterIP -> "
        "default/b1 10.96.0.44:5311 (10.243.0.2 on m1)  TCP  812 Mbit/s",
        "FAIL  local -> remote  default/a1 (10.243.0.2 on n1) -> Service liqo/liqo-fabric-verify NodePort -> "
        "default/b1 172.30.0.2:31002 (10.243.0.2 on m1)  TCP  TCP to 172.30.0.2:31002: unable to connect",
        "2 probes, 1 passed, 1 failed"]
    with pytest.raises(verify.VerifyError, match="got no clusterIP or nodePort"):
        vs.probes(entry, {"spec": {"clusterIP": "None", "ports": [{"port": 5311}]}})


def test_a_node_without_an_internal_ip_is_named():
    with pytest.raises(verify.VerifyError, match="Node n1 has no InternalIP"):
        vs.plan("local", "remote", LOCAL[:1], REMOTE, [CONF], "B", [{"metadata": {"name": "n1"}, "status": {}}])
