# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A gateway inside the cluster: the controller's side and the gateway pod's side of one
GatewayServer/GatewayClient, on the same plan as the agentless path (module_utils.gateway.plan).

- controller: the plan's errors (bad CR content, a template that does not render or is rejected), the key
  Secret (created once) and the template's Deployment/Service applied (server-side apply) with an owner
  reference to the gateway, so they go with it; a change that would roll the Deployment waits while the node
  agents roll (module_utils.gateway.rollout).
- gateway pod: the plan seen from inside the pod. WireGuard listens on the port the Service targets (the
  template's `targetPort`) and the remote reaches it through the Service, so a GatewayServer publishes the
  Service's address: NodePort -> the address of the node the pod runs on and the allocated nodePort;
  LoadBalancer -> the load balancer's address and the Service port.
"""

from __future__ import annotations

import base64
import time

from ansible_collections.liqo.fabric.plugins.module_utils.gateway.api import (
    MANIFEST_REASONS, _owner_ref, ensure_key_secret, hold_built, key_error, list_gateways, manifest_problem,
    render_manifests, user_keys)
from ansible_collections.liqo.fabric.plugins.module_utils.gateway import rollout
from ansible_collections.liqo.fabric.plugins.module_utils.gateway.keys import GatewayKeyError
from ansible_collections.liqo.fabric.plugins.module_utils.gateway.plan import KINDS, plan
from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import ApiException, KubeError

FIELD_MANAGER = "liqo-fabric-controller"


def _gateway(kube, kind, namespace, name):
    if kind not in KINDS:
        raise KubeError("kind: '%s' must be one of %s" % (kind, ", ".join(KINDS)))
    gw = kube.get(kind, namespace, name)
    if gw is not None:
        gw.setdefault("kind", kind)
    return gw


def _plan(kube, gw, endpoint_address, internal_cidr, need_endpoint):
    """The agentless plan of one gateway, with its namespace's Configurations and PublicKeys only (what the
    gateway's ServiceAccount may read)."""
    ns = gw["metadata"]["namespace"]
    return plan(gw, kube.list("Configuration", ns), kube.list("PublicKey", ns), kube.cluster_id(), endpoint_address,
                internal_cidr, need_endpoint=need_endpoint, namespace_gateways=list_gateways(kube, ns)).to_result()


def _agents_rolling(kube):
    """rollout.agents_rolling() of the cluster's node-agent DaemonSets; '' when they cannot be read (an RBAC
    without DaemonSets: nothing to wait for that this controller could see)."""
    try:
        return rollout.agents_rolling(kube.list("DaemonSet", None, label_selector=rollout.AGENT_SELECTOR))
    except (ApiException, KubeError):
        return ""


def _hold(kube, obj, cur, check_mode):
    """Whether the Deployment `obj` waits for the node agents' roll (module_utils.gateway.rollout): its reason, or
    ''. A hold's start is recorded on the live Deployment; a Deployment applied after a hold loses that mark."""
    rolling = _agents_rolling(kube) if cur is not None else ""
    decision = "apply"
    if rolling:   # the dry-run apply only when a hold is possible
        decision = rollout.decide(cur, kube.apply(obj, dry_run=True, field_manager=FIELD_MANAGER), rolling)
    where = (obj["kind"], obj["metadata"].get("namespace"), obj["metadata"]["name"])
    if decision == "hold":
        if rollout.held_since(cur) is None and not check_mode:
            kube.patch(*where, patch={"metadata": {"annotations": {rollout.HELD_SINCE: "%.0f" % time.time()}}})
        return "node agents rolling (%s)" % rolling
    if cur is not None and rollout.held_since(cur) is not None and not check_mode:
        kube.patch(*where, patch={"metadata": {"annotations": {rollout.HELD_SINCE: None}}})
    return ""


def controller_side(kube, kind, namespace, name, internal_cidr, check_mode=False):
    """Key Secret and the template's manifests of one gateway. Returns {plan, applied: [names], held: {name:
    reason}, changed, error}: error = {reason, message} of a bad gateway (nothing is applied for it), else None;
    held: the Deployment whose roll waits for the node agents' (left as it is)."""
    gw = _gateway(kube, kind, namespace, name)
    if gw is None or gw["metadata"].get("deletionTimestamp"):
        return {"plan": None, "applied": [], "changed": False, "error": None}
    p = _plan(kube, gw, None, internal_cidr, need_endpoint=False)
    if p["error"] and p["error"]["reason"] != "MTUMismatch":   # an MTU mismatch is the Connection's to report
        return {"plan": p, "applied": [], "changed": False, "error": p["error"]}
    problem = manifest_problem(kube, gw, p)
    if problem:
        return {"plan": p, "applied": [], "changed": False, "error": {"reason": problem[0], "message": problem[1]}}
    try:
        p["public_key"], _private, created = ensure_key_secret(kube, gw, p["secret_name"], check_mode)
    except GatewayKeyError as exc:
        key_error(p, exc)
        return {"plan": p, "applied": [], "changed": False, "error": p["error"]}
    objs, error = render_manifests(kube, gw, p)
    if error:
        return {"plan": p, "applied": [], "changed": created, "error": {"reason": MANIFEST_REASONS[0], "message": error}}
    applied, held, changed = [], {}, created
    for obj in objs:
        obj.setdefault("metadata", {})["ownerReferences"] = [_owner_ref(gw)]
        cur = kube.get(obj["kind"], obj["metadata"].get("namespace"), obj["metadata"]["name"])
        ref = "%s/%s" % (obj["kind"], obj["metadata"]["name"])
        try:
            why = _hold(kube, obj, cur, check_mode) if obj["kind"] == "Deployment" else ""
            if why:
                held[ref] = why
                continue
            new = kube.apply(obj, dry_run=check_mode, field_manager=FIELD_MANAGER)
        except ApiException as exc:
            return {"plan": p, "applied": applied, "held": held, "changed": changed, "error": {
                "reason": MANIFEST_REASONS[1], "message": "%s %s: rejected by the apiserver (%s): %s" % (
                    obj["kind"], obj["metadata"]["name"], exc.status, getattr(exc, "message", exc.reason))}}
        if cur is None or (cur["metadata"].get("resourceVersion") != (new or {}).get("metadata", {}).get("resourceVersion")):
            changed = True
        applied.append(ref)
    return {"plan": p, "applied": applied, "held": held, "changed": changed, "error": None}


def _owned(kube, kind, gw):
    """The objects of `kind` in the gateway's namespace that the controller applied for it (owner reference)."""
    uid = gw["metadata"].get("uid")
    return [o for o in kube.list(kind, gw["metadata"]["namespace"])
            if any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or [])]


def controller_teardown(kube, kind, namespace, name, check_mode=False):
    """Deletes the Deployment/Service the gateway's template rendered (found by the owner reference)."""
    gw = _gateway(kube, kind, namespace, name)
    if gw is None:
        return []
    deleted = []
    for k in ("Deployment", "Service"):
        for obj in _owned(kube, k, gw):
            if not check_mode:
                kube.delete(k, namespace, obj["metadata"]["name"])
            deleted.append("%s/%s" % (k, obj["metadata"]["name"]))
    return deleted


def _service_endpoint(kube, gw, p, host_ip):
    """(listen port in the pod, published endpoint or None, waiting message or None) for a GatewayServer."""
    svc = next(iter(_owned(kube, "Service", gw)), None)
    if svc is None:
        return p["listen_port"], None, "no Service of the gateway yet (the controller applies its template's)"
    ports = (svc.get("spec") or {}).get("ports") or []
    port = next((x for x in ports if (x.get("protocol") or "TCP") == "UDP"), ports[0] if ports else {})
    target = port.get("targetPort") or port.get("port")
    if not isinstance(target, int):
        return p["listen_port"], None, "Service %s: targetPort %r must be a number" % (svc["metadata"]["name"], target)
    stype = (svc.get("spec") or {}).get("type") or "ClusterIP"
    if stype == "NodePort":
        if not port.get("nodePort") or not host_ip:
            return target, None, "Service %s has no nodePort or the pod no node address yet" % svc["metadata"]["name"]
        return target, {"addresses": [host_ip], "port": port["nodePort"], "protocol": "UDP"}, None
    if stype == "LoadBalancer":
        ingress = ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
        addresses = [i.get("ip") or i.get("hostname") for i in ingress if i.get("ip") or i.get("hostname")]
        if not addresses:
            return target, None, "Service %s has no load balancer address yet" % svc["metadata"]["name"]
        return target, {"addresses": addresses, "port": port["port"], "protocol": "UDP"}, None
    return target, {"addresses": [svc["spec"].get("clusterIP")], "port": port["port"], "protocol": "UDP"}, None


ADDRESS_ANNOTATION = "liqo.io/gateway-address"


def node_address(kube, node_name):
    """The address a remote gateway reaches a node at: its `liqo.io/gateway-address` annotation (a gateway host
    whose public address the kubelet does not report, as in the lab), else its ExternalIP, else its InternalIP."""
    node = kube.get("Node", None, node_name) if node_name else None
    if node is None:
        return None
    annotated = ((node.get("metadata") or {}).get("annotations") or {}).get(ADDRESS_ANNOTATION)
    if annotated:
        return annotated
    addresses = (node.get("status") or {}).get("addresses") or []
    for kind in ("ExternalIP", "InternalIP"):
        found = [a["address"] for a in addresses if a.get("type") == kind]
        if found:
            return found[0]
    return None


def pod_side(kube, kind, namespace, name, node_name, internal_cidr, standby=False):
    """The plan of the pod's own gateway and its private key: ([plan], {interface: private key}).
    The key Secret is the controller's: a pod that finds none waits. `standby`: the plan of a warm standby pod
    (see standby_plan)."""
    host_ip = node_address(kube, node_name) if kind == "GatewayServer" else None
    gw = _gateway(kube, kind, namespace, name)
    if gw is None:
        raise KubeError("%s %s/%s: not found (the gateway pod outlived its gateway)" % (kind, namespace, name))
    p = _plan(kube, gw, host_ip, internal_cidr, need_endpoint=False)
    if kind == "GatewayServer":
        p["listen_port"], endpoint, waiting = _service_endpoint(kube, gw, p, host_ip)
        if endpoint:
            p["status"]["endpoint"] = endpoint
        else:
            p["status"].pop("endpoint", None)
            if not p["error"]:
                p["waiting"], p["ready"] = {"reason": "WaitingForService", "message": waiting}, False
    keys = {}
    if p["user_secret"]:
        try:
            p["public_key"], keys[p["interface"]] = user_keys(kube, gw)
        except GatewayKeyError as exc:
            key_error(p, exc)
        hold_built(kube, [p])
        return [standby_plan(p) if standby else p], keys
    secret = kube.get("Secret", namespace, p["secret_name"])
    data = (secret or {}).get("data") or {}
    if "privateKey" in data and "publicKey" in data:
        p["public_key"] = base64.b64decode(data["publicKey"]).decode()
        keys[p["interface"]] = base64.b64decode(data["privateKey"]).decode()
    elif not p["error"]:
        p["waiting"], p["ready"] = {"reason": "WaitingForKeys", "message": "Secret %s/%s has no keys yet (the controller "
                                    "creates it)" % (namespace, p["secret_name"])}, False
    hold_built(kube, [p])   # a refused change of a gateway built before: its pod keeps the tunnel and the overlay
    return [standby_plan(p) if standby else p], keys


def standby_plan(p):
    """A warm standby builds the whole tunnel, so that taking over is a label and one endpoint away, but it must
    never reach the peer: two live pods with one key would make the peer's endpoint flap. A client's peer gets
    no endpoint and no keepalive (it can send nothing; the active run sets both, and turning the keepalive on
    sends the first handshake at once). A server's peer has no endpoint anyway, and its Service selects the
    active pod only, so nothing reaches the standby."""
    p["standby"] = True
    if p.get("peer"):
        p["peer"] = dict(p["peer"], endpoint=None, persistent_keepalive=0)
    return p
