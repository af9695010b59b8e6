# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""liqo.fabric.verify through Services (`-e services=true`, clusters with kube-proxy).

The way Liqo's users reach a remote pod is a Service of their own cluster whose endpoint is the remote pod at its
remapped address (what Liqo's reflection of EndpointSlices makes). For each direction the probe makes such a
Service in the source cluster (selector-less, type NodePort; one Endpoints object with the remote pod's remapped
address), and from a pod of the source cluster opens a TCP connection (iperf3, 1 s) to its ClusterIP and to its
NodePort on the pod's own node: kube-proxy's DNAT (and, for the NodePort, its masquerade) in front of the
fabric's overlay, NAT and tunnel. The servers run in the remote pod's own network namespace, from its node.
The Services are deleted at the end of the run (a rerun replaces one an interrupted run left)."""

from __future__ import annotations

from ansible_collections.liqo.fabric.plugins.module_utils.verify import probes as verify

NAME = "liqo-fabric-verify"
NAMESPACE = "liqo"
PORTS = {"cluster_ip": 5311, "node_port": 5312}
LABELS = {"app.kubernetes.io/managed-by": "liqo.fabric", "liqo.io/fabric-verify": "true"}


def internal_ip(node):
    """The Node's InternalIP (the address its NodePorts answer on), None when it has none."""
    for a in ((node.get("status") or {}).get("addresses") or []):
        if a.get("type") == "InternalIP":
            return a.get("address")
    return None


def manifests(target):
    """The Service and its Endpoints, in the namespace `liqo` of the source cluster, for the remapped `target`."""
    ports = [{"name": k.replace("_", "-"), "port": v, "targetPort": v, "protocol": "TCP"} for k, v in sorted(PORTS.items())]
    meta = {"name": NAME, "namespace": NAMESPACE, "labels": dict(LABELS)}
    return [
        {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": {"type": "NodePort", "ports": ports}},
        {"apiVersion": "v1", "kind": "Endpoints", "metadata": dict(meta, labels=dict(LABELS)),
         "subsets": [{"addresses": [{"ip": target}],
                      "ports": [{"name": p["name"], "port": p["port"], "protocol": "TCP"} for p in ports]}]},
    ]


def plan(cluster, peer, local_pods, remote_pods, configurations, peer_id, local_nodes, local_gateway_nodes=(),
         remote_gateway_nodes=()):
    """What the Service probes of `cluster` toward `peer` need: the client (a pod of `cluster` on a node that is
    not a gateway host when there is one, with its node's InternalIP), the server (a remote pod likewise, with
    `target`, its remapped address) and the manifests. Raises VerifyError when something is missing."""
    pair = verify.benchmark_pair(cluster, local_pods, remote_pods, configurations, peer_id, local_gateway_nodes,
                                 remote_gateway_nodes)
    node = next((n for n in local_nodes if n["metadata"]["name"] == pair["client"]["node"]), None)
    node_ip = internal_ip(node) if node else None
    if not node_ip:
        raise verify.VerifyError("%s: Node %s has no InternalIP address (status.addresses), needed for the NodePort probe"
                                 % (cluster, pair["client"]["node"]))
    pair["client"]["node_ip"] = node_ip
    return {"cluster": cluster, "peer": peer, "namespace": NAMESPACE, "name": NAME, "ports": dict(PORTS),
            "client": pair["client"], "server": pair["server"], "manifests": manifests(pair["server"]["target"])}


def probes(entry, service):
    """The two TCP probes (ClusterIP, NodePort) of one direction for liqo.fabric.pod_probe, shaped like verify's
    probes (its table and report), from the Service as applied (its clusterIP and allocated nodePort)."""
    spec = (service or {}).get("spec") or {}
    node_port = next((p.get("nodePort") for p in spec.get("ports") or [] if p.get("port") == PORTS["node_port"]), None)
    if not spec.get("clusterIP") or not node_port:
        raise verify.VerifyError("%s: Service %s/%s got no clusterIP or nodePort from the apiserver"
                                 % (entry["cluster"], entry["namespace"], entry["name"]))
    client, server = entry["client"], entry["server"]
    base = {"cluster": entry["cluster"], "peer": entry["peer"], "from": client["pod"], "from_address": client["address"],
            "from_node": client["node"], "node": server["node"], "original": server["address"], "size": "TCP"}
    return [dict(base, to="Service %s/%s ClusterIP -> %s" % (entry["namespace"], entry["name"], server["pod"]),
                 to_address=spec["clusterIP"], port=PORTS["cluster_ip"]),
            dict(base, to="Service %s/%s NodePort -> %s" % (entry["namespace"], entry["name"], server["pod"]),
                 to_address=client["node_ip"], port=node_port)]


def servers(entry):
    """The iperf3 servers of one direction: in the remote pod (its own address), one per port."""
    return [{"address": entry["server"]["address"], "port": port} for port in sorted(PORTS.values())]
