"""Registers the lab's reality in its apiserver: Nodes, Pods (with status), the cluster-id ConfigMap.

Nobody runs a kubelet in the lab, so the lab writes pod status itself, matching the netns it made.
"""
from __future__ import annotations

import concurrent.futures
import datetime
import uuid

from kubernetes import client, config

from tests.lab.topology import NodePlan, PodPlan

GATEWAY_LABEL = "liqo.io/gateway-host"
CLUSTER_ID_CONFIGMAP = "liqo-clusterid-configmap"
LIQO_NAMESPACE = "liqo"
POD_NAMESPACE = "default"


def api_client(kubeconfig: str) -> client.ApiClient:
    return config.new_client_from_config(config_file=kubeconfig)


def node_object(node: NodePlan) -> dict:
    labels = {"kubernetes.io/hostname": node.name, "kubernetes.io/os": "linux"}
    if node.gateway:
        labels[GATEWAY_LABEL] = "true"
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": node.name, "labels": labels,
                     "annotations": {"lab.liqo.io/netns": node.netns}},
        "spec": {"podCIDR": node.pod_cidr, "podCIDRs": [node.pod_cidr]},
        "status": {
            "addresses": [{"type": "InternalIP", "address": node.underlay_ip},
                          {"type": "Hostname", "address": node.name}],
            "conditions": [{"type": "Ready", "status": "True", "reason": "LabNodeReady",
                            "message": "lab node (network namespace)"}],
        },
    }


def pod_object(pod: PodPlan, node: NodePlan) -> dict:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": pod.name, "namespace": POD_NAMESPACE, "labels": {"app": "lab"},
                     "annotations": {"lab.liqo.io/netns": pod.netns}},
        "spec": {"nodeName": node.name, "containers": [{"name": "app", "image": "lab.invalid/pod:1"}]},
    }


def pod_status(pod: PodPlan, node: NodePlan) -> dict:
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"status": {
        "phase": "Running", "podIP": pod.ip, "podIPs": [{"ip": pod.ip}], "hostIP": node.underlay_ip,
        "conditions": [{"type": "Ready", "status": "True"}, {"type": "ContainersReady", "status": "True"}],
        "containerStatuses": [{"name": "app", "image": "lab.invalid/pod:1", "imageID": "", "ready": True,
                               "restartCount": 0, "started": True,
                               "state": {"running": {"startedAt": now}}}],
    }}


class LabKube:
    def __init__(self, kubeconfig: str):
        self.api = api_client(kubeconfig)
        self.core = client.CoreV1Api(self.api)

    def ensure_cluster_id(self, cluster_id: str | None = None) -> str:
        cluster_id = cluster_id or str(uuid.uuid4())
        self.core.create_namespace({"metadata": {"name": LIQO_NAMESPACE}})
        self.core.create_namespaced_config_map(LIQO_NAMESPACE, {
            "metadata": {"name": CLUSTER_ID_CONFIGMAP}, "data": {"CLUSTER_ID": cluster_id}})
        return cluster_id

    def register_nodes(self, nodes: list[NodePlan]) -> None:
        self._parallel([lambda n=n: self.core.create_node(node_object(n)) for n in nodes])

    def register_pods(self, nodes: list[NodePlan]) -> None:
        def one(pod, node):
            self.core.create_namespaced_pod(POD_NAMESPACE, pod_object(pod, node))
            self.core.patch_namespaced_pod_status(pod.name, POD_NAMESPACE, pod_status(pod, node))
        self._parallel([lambda p=p, n=n: one(p, n) for n in nodes for p in n.pods])

    def delete_node(self, name: str) -> None:
        self.core.delete_node(name)

    def delete_pod(self, name: str) -> None:
        self.core.delete_namespaced_pod(name, POD_NAMESPACE, grace_period_seconds=0)

    @staticmethod
    def _parallel(calls, workers: int = 8) -> None:
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            for fut in [pool.submit(c) for c in calls]:
                fut.result()

    def close(self) -> None:
        self.api.close()
