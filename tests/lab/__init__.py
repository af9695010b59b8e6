"""The lab: real, isolated Kubernetes "clusters" on one machine (netns nodes and pods, real apiserver).

    from tests.lab import Lab
    with Lab([{"name": "a"}, {"name": "b"}], pod_cidr="10.243.0.0/16", nodes=3, pods_per_node=2) as lab:
        lab["a"].kubeconfig, lab["a"].nodes, lab.inventory_path
"""
from tests.lab.cluster import LabCluster
from tests.lab.lab import Lab
from tests.lab.wan import LabWan

__all__ = ["Lab", "LabCluster", "LabWan"]
