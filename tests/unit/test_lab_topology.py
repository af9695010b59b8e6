"""The lab's address plan (pure): every node gets its own pod slice, pods get distinct addresses."""
import ipaddress

import pytest

from tests.lab.topology import plan_cluster


def test_nodes_get_disjoint_slices_inside_the_pod_cidr():
    plans = plan_cluster("lfab0000", "a", "10.243.0.0/16", "172.30.0.0/24", nodes=3, pods_per_node=10, gateways=1)
    slices = [ipaddress.ip_network(n.pod_cidr) for n in plans]
    assert [str(s) for s in slices] == ["10.243.0.0/24", "10.243.1.0/24", "10.243.2.0/24"]
    pod_ips = [p.ip for n in plans for p in n.pods]
    assert len(pod_ips) == len(set(pod_ips)) == 30
    for node in plans:
        assert all(ipaddress.ip_address(p.ip) in ipaddress.ip_network(node.pod_cidr) for p in node.pods)
        assert node.bridge_ip not in [p.ip for p in node.pods]
    assert [n.gateway for n in plans] == [True, False, False]
    assert [n.underlay_ip for n in plans] == ["172.30.0.2", "172.30.0.3", "172.30.0.4"]


def test_names_fit_kernel_limits_and_carry_the_prefix():
    plans = plan_cluster("lfabffff", "clus1", "10.243.0.0/16", "172.30.0.0/24", nodes=9, pods_per_node=99, gateways=2)
    for node in plans:
        assert node.netns.startswith("lfabffff-clus1-")
        for pod in node.pods:
            assert pod.netns.startswith("lfabffff-") and len(pod.host_veth) <= 15


@pytest.mark.parametrize("kwargs, field", [
    ({"nodes": 0}, "nodes"),
    ({"gateways": 5}, "gateways"),
    ({"pods_per_node": 300}, "pods_per_node"),
    ({"pod_cidr": "10.243.0.0/23", "nodes": 3}, "pod_cidr"),
])
def test_bad_plans_name_the_field(kwargs, field):
    args = {"prefix": "lfab0000", "cluster": "a", "pod_cidr": "10.243.0.0/16", "underlay_cidr": "172.30.0.0/24",
            "nodes": 2, "pods_per_node": 1, "gateways": 1}
    args.update(kwargs)
    with pytest.raises(ValueError, match=field):
        plan_cluster(**args)
