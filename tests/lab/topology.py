"""Address plan of a lab cluster: which node and pod gets which name and address. Pure, no side effects."""
from __future__ import annotations

import dataclasses
import ipaddress


@dataclasses.dataclass
class PodPlan:
    name: str          # Kubernetes Pod name
    netns: str
    ip: str            # pod address
    host_veth: str     # node-side veth name


@dataclasses.dataclass
class NodePlan:
    name: str              # Kubernetes Node name
    netns: str
    index: int
    underlay_ip: str       # InternalIP, on eth0
    pod_cidr: str          # this node's slice of the cluster pod CIDR
    bridge_ip: str         # pods' default gateway (first address of the slice)
    gateway: bool = False  # attached to the WAN
    wan_ip: str = ""
    pods: list[PodPlan] = dataclasses.field(default_factory=list)


def plan_cluster(prefix: str, cluster: str, pod_cidr: str, underlay_cidr: str, nodes: int,
                 pods_per_node: int, gateways: int, node_prefixlen: int = 24) -> list[NodePlan]:
    """Node i gets the i-th /24 (by default) of the pod CIDR; its pods take .2, .3, ... of that slice.

    The first `gateways` nodes are gateway hosts (the WAN addresses are given by the Lab)."""
    pod_net = ipaddress.ip_network(pod_cidr)
    underlay = ipaddress.ip_network(underlay_cidr)
    if nodes < 1:
        raise ValueError(f"nodes: must be at least 1, got {nodes}")
    if not 0 <= gateways <= nodes:
        raise ValueError(f"gateways: must be between 0 and nodes ({nodes}), got {gateways}")
    slices = pod_net.subnets(new_prefix=node_prefixlen)
    hosts = underlay.hosts()
    next(hosts)  # .1 is left for a future router on the underlay
    plans = []
    for i in range(nodes):
        try:
            node_net = next(slices)
        except StopIteration:
            raise ValueError(f"pod_cidr: {pod_cidr} has no room for {nodes} /{node_prefixlen} node slices") from None
        if pods_per_node > node_net.num_addresses - 3:
            raise ValueError(f"pods_per_node: {pods_per_node} does not fit in /{node_prefixlen}")
        addrs = list(node_net.hosts())
        node = NodePlan(name=f"{cluster}-node-{i + 1}", netns=f"{prefix}-{cluster}-n{i + 1}", index=i,
                        underlay_ip=str(next(hosts)), pod_cidr=str(node_net),
                        bridge_ip=str(addrs[0]), gateway=i < gateways)
        for j in range(pods_per_node):
            node.pods.append(PodPlan(name=f"pod-{i + 1}-{j + 1}", netns=f"{prefix}-{cluster}-n{i + 1}p{j + 1}",
                                     ip=str(addrs[j + 1]), host_veth=f"veth{j + 1}"))
        plans.append(node)
    return plans
