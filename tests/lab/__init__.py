"""The lab: real, isolated Kubernetes "clusters" on one machine (netns nodes and pods, real apiserver).

    from tests.lab import Lab
    with Lab([{"name": "a"}, {"name": "b"}], pod_cidr="10.243.0.0/16", nodes=3, pods_per_node=2) as lab:
        lab["a"].kubeconfig, lab["a"].nodes, lab.inventory_path

    # real nodes: containerd + kubelet + kube-proxy per node, scheduler + controller manager per cluster;
    # pods run from the images of `make image` (tests.lab.images). docs/lab.md describes both kinds.
    with Lab([{"name": "a"}, {"name": "b"}], nodes=3, real_nodes=True) as lab:
        lab["a"].kube.core.list_node(), lab["a"].apiserver.in_cluster_url, lab["a"].add_node()
"""
from tests.lab.cluster import LabCluster
from tests.lab.lab import Lab
from tests.lab.wan import LabWan

__all__ = ["Lab", "LabCluster", "LabWan"]
