# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a gateway must look like, derived from its CRs: the pure planning step of roles/gateway.

Input: a GatewayServer or GatewayClient, the Configuration and PublicKey of the same remote cluster,
the local cluster id and a few host facts. Output: a plan dict with the WireGuard interface, the NAT
tunnel entry, the policy-routing mark/table, the status to publish and whether the gateway can be built
yet (waiting) or is misconfigured (error, with a reason and a message naming the field).

Addressing inside the tunnel: packets cross it with their *original* addresses; the 1:1 remap happens at
each end (nat_table `tunnels`). Because the remote's original pod CIDR may equal the local one, tunnel
traffic is steered by a fwmark into a per-gateway routing table (route_rule/route_table).
"""

from __future__ import annotations

import hashlib
import ipaddress

from ansible_collections.liqo.fabric.plugins.module_utils.kube_client import REMOTE_CLUSTER_ID_LABEL

KINDS = {"GatewayServer": "Server", "GatewayClient": "Client"}
DEFAULT_MTU = 1340
DEFAULT_PORT = 51820
KEEPALIVE = 25
MTU_ANNOTATION = "networking.liqo.io/mtu"
KEY_SECRET_LABEL = "networking.liqo.io/gateway-keys"
# Point-to-point transit addresses of the tunnel itself (probe target); link-local, never routed.
TRANSIT = {"Server": ("169.254.18.1/30", "169.254.18.2"), "Client": ("169.254.18.2/30", "169.254.18.1")}
MARK_BASE, MARK_SPAN = 20000, 10000          # fwmark == routing table id, per gateway
RULE_PRIORITY = 1800
NODE_PORT_BASE, NODE_PORT_SPAN = 30000, 2768  # Kubernetes' default NodePort range


def gateway_id(cluster_id, namespace, name, kind):
    """Stable id of a gateway on a host: interface names must be unique per host (wireguard-go sockets)."""
    return hashlib.sha256(("%s/%s/%s/%s" % (cluster_id, namespace, kind, name)).encode()).hexdigest()


def interface_name(gid):
    return "lwg" + gid[:8]


def mark_for(gid):
    return MARK_BASE + int(gid[8:16], 16) % MARK_SPAN


def default_node_port(gid):
    return NODE_PORT_BASE + int(gid[16:24], 16) % NODE_PORT_SPAN


def secret_name(kind, name):
    return "wg-%s-%s" % (KINDS[kind].lower(), name)


def _labels(obj):
    return (obj.get("metadata") or {}).get("labels") or {}


def _pick(objs, remote_id, namespace):
    """The object labelled with the remote cluster id, preferring the gateway's namespace."""
    matches = [o for o in objs if _labels(o).get(REMOTE_CLUSTER_ID_LABEL) == remote_id]
    same_ns = [o for o in matches if (o.get("metadata") or {}).get("namespace") == namespace]
    pool = same_ns or matches
    return sorted(pool, key=lambda o: (o["metadata"].get("creationTimestamp") or "", o["metadata"]["name"]))[0] if pool else None


def listen_port(gateway, gid):
    spec = gateway.get("spec") or {}
    endpoint = spec.get("endpoint") or {}
    if gateway["kind"] != "GatewayServer":
        return None
    if endpoint.get("serviceType") == "NodePort":
        return endpoint.get("nodePort") or default_node_port(gid)
    return endpoint.get("port") or DEFAULT_PORT


def plan(gateway, configurations, public_keys, local_cluster_id, endpoint_address, internal_cidr="10.80.0.0/16",
         local_public_key=None, need_endpoint=True):
    """The plan of one gateway (see the module docstring); never raises for bad CR content.
    need_endpoint=False: a server without an endpoint address is not an error (the overlay's view, which
    does not know the gateway host's address)."""
    kind = gateway["kind"]
    meta = gateway.get("metadata") or {}
    spec = gateway.get("spec") or {}
    name, namespace = meta.get("name"), meta.get("namespace")
    role = KINDS[kind]
    gid = gateway_id(local_cluster_id, namespace, name, kind)
    remote_id = _labels(gateway).get(REMOTE_CLUSTER_ID_LABEL)
    mtu = spec.get("mtu") or DEFAULT_MTU
    mark = mark_for(gid)
    out = {
        "kind": kind, "role": role, "name": name, "namespace": namespace, "uid": meta.get("uid"),
        "generation": meta.get("generation"), "remote_cluster_id": remote_id, "id": gid[:16],
        "interface": interface_name(gid), "nat_table": "lfgw_" + gid[:12], "mark": mark, "table": mark,
        "rule_priority": RULE_PRIORITY,
        "mtu": mtu, "listen_port": listen_port(gateway, gid), "transit_address": TRANSIT[role][0],
        "probe_address": TRANSIT[role][1], "secret_name": secret_name(kind, name), "public_key": local_public_key,
        "peer": None, "nat_tunnel": None, "remote": None, "ready": False, "waiting": None, "error": None,
        "connection_name": name,
    }
    status = {"secretRef": {"apiVersion": "v1", "kind": "Secret", "name": out["secret_name"], "namespace": namespace}}
    internal = ipaddress.ip_network(internal_cidr, strict=False)
    status["internalEndpoint"] = {"ip": str(internal.network_address + 1)}
    if role == "Server":
        status["endpoint"] = {"addresses": [endpoint_address] if endpoint_address else [],
                              "port": out["listen_port"], "protocol": "UDP"}
    out["status"] = status

    def fail(reason, message):
        out["error"] = {"reason": reason, "message": message}
        return out

    def wait(reason, message):
        out["waiting"] = {"reason": reason, "message": message}
        return out

    if not remote_id:
        return fail("MissingRemoteClusterID", "metadata.labels[%s]: required, the id of the remote cluster"
                    % REMOTE_CLUSTER_ID_LABEL)
    if role == "Server" and not endpoint_address and need_endpoint:
        return fail("NoEndpointAddress", "the gateway host has no endpoint address (set gateway_endpoint_address)")
    endpoint = None
    if role == "Client":
        ep = spec.get("endpoint") or {}
        addresses, port = ep.get("addresses") or [], ep.get("port")
        if not addresses:
            return fail("InvalidEndpoint", "spec.endpoint.addresses: at least one address of the server is required")
        if not port:
            return fail("InvalidEndpoint", "spec.endpoint.port: the server's port is required")
        endpoint = "%s:%s" % (addresses[0], port)

    conf = _pick(configurations, remote_id, namespace)
    if conf is None:
        return wait("ConfigurationNotFound", "no Configuration labelled %s=%s" % (REMOTE_CLUSTER_ID_LABEL, remote_id))
    remote_spec = (((conf.get("spec") or {}).get("remote") or {}).get("cidr") or {})
    remote_status = ((((conf.get("status") or {}).get("remote") or {}).get("cidr")) or {})
    if not remote_status.get("pod"):
        return wait("WaitingForIPAM", "Configuration %s/%s has no status.remote.cidr.pod yet"
                    % (conf["metadata"].get("namespace"), conf["metadata"]["name"]))
    out["remote"] = {"configuration": conf["metadata"]["name"], "pod_original": remote_spec.get("pod"),
                     "pod_remapped": remote_status.get("pod"), "external_original": remote_spec.get("external"),
                     "external_remapped": remote_status.get("external")}
    out["nat_tunnel"] = {"interface": out["interface"], "mark": mark, "remote_original": remote_spec.get("pod"),
                         "remote_remapped": remote_status.get("pod"), "output": True}

    pk = _pick(public_keys, remote_id, namespace)
    if pk is None:
        return wait("WaitingForPublicKey", "no PublicKey labelled %s=%s" % (REMOTE_CLUSTER_ID_LABEL, remote_id))
    remote_key = (pk.get("spec") or {}).get("publicKey")
    remote_mtu = ((pk.get("metadata") or {}).get("annotations") or {}).get(MTU_ANNOTATION)
    out["peer"] = {"public_key": remote_key, "endpoint": endpoint, "allowed_ips": ["0.0.0.0/0"],
                   "persistent_keepalive": KEEPALIVE if role == "Client" else 0}
    out["ready"] = True
    if remote_mtu and str(remote_mtu) != str(mtu):
        return fail("MTUMismatch", "spec.mtu: %s here but %s on the remote gateway (PublicKey %s, annotation %s);"
                    " the MTU must be equal on both sides" % (mtu, remote_mtu, pk["metadata"]["name"], MTU_ANNOTATION))
    return out


def connection_value(plan_, probe=None):
    """(status.value, condition reason, message) of the Connection for a plan and a probe result."""
    if plan_.get("error"):
        return "Error", plan_["error"]["reason"], plan_["error"]["message"]
    if plan_.get("waiting"):
        return "Connecting", plan_["waiting"]["reason"], plan_["waiting"]["message"]
    if not probe:
        return "Connecting", "NotProbed", "the tunnel was configured but not probed yet"
    if probe.get("connected"):
        return "Connected", "Established", "handshake and probe through the tunnel succeeded"
    return "Error" if probe.get("final") else "Connecting", probe.get("reason") or "ProbeFailed", probe.get("message") or ""


def connection_object(plan_, probe=None, now=None):
    """The Connection (spec and status) this gateway publishes."""
    value, reason, message = connection_value(plan_, probe)
    status = {"value": value}
    if probe and probe.get("latency_ms") is not None and value == "Connected":
        status["latency"] = {"value": "%.3fms" % probe["latency_ms"], "timestamp": now}
    return {
        "apiVersion": "networking.liqo.io/v1beta1",
        "kind": "Connection",
        "metadata": {"name": plan_["connection_name"], "namespace": plan_["namespace"],
                     "labels": {REMOTE_CLUSTER_ID_LABEL: plan_.get("remote_cluster_id") or ""}},
        "spec": {"type": plan_["role"],
                 "gatewayRef": {"apiVersion": "networking.liqo.io/v1beta1", "kind": plan_["kind"],
                                "name": plan_["name"], "namespace": plan_["namespace"], "uid": plan_.get("uid")}},
        "status": status,
    }, reason, message
