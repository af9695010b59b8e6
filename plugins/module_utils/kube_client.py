# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes API access shared by the modules and the controller: clients, CRs of networking.liqo.io,
conditions. Pure Python on top of the official `kubernetes` client (guarded import)."""

from __future__ import annotations

import datetime
import json
import os
import traceback

try:
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config
    from kubernetes.client.rest import ApiException
    KUBERNETES_IMPORT_ERROR = None
except ImportError:  # pragma: no cover - reported by the modules
    k8s_client = k8s_config = None
    ApiException = Exception
    KUBERNETES_IMPORT_ERROR = traceback.format_exc()

GROUP = "networking.liqo.io"
VERSION = "v1beta1"
PLURALS = {
    "Configuration": "configurations",
    "GatewayServer": "gatewayservers",
    "GatewayClient": "gatewayclients",
    "Connection": "connections",
    "PublicKey": "publickeies",  # sic: the plural Liqo registers
    "WgGatewayServerTemplate": "wggatewayservertemplates",
    "WgGatewayClientTemplate": "wggatewayclienttemplates",
}
CORE_PLURALS = {"Service": "services", "Deployment": "deployments", "ConfigMap": "configmaps", "Secret": "secrets",
                "DaemonSet": "daemonsets", "ServiceAccount": "serviceaccounts"}
REMOTE_CLUSTER_ID_LABEL = "liqo.io/remote-cluster-id"
GATEWAY_RESOURCE_LABEL = "networking.liqo.io/gateway-resource"
CLUSTER_ID_CONFIGMAP = "liqo-clusterid-configmap"
LIQO_NAMESPACE = "liqo"


class KubeError(Exception):
    """A Kubernetes access problem, with a message meant for the user."""


def api_client(kubeconfig=None, context=None):
    """ApiClient from a kubeconfig file, or the in-cluster service account when kubeconfig is None."""
    if k8s_client is None:
        raise KubeError("the Python library 'kubernetes' is required")
    if kubeconfig:
        path = os.path.expanduser(kubeconfig)
        if not os.path.isfile(path):
            raise KubeError("kubeconfig: '%s' does not exist or is not a file" % kubeconfig)
        try:
            return k8s_config.new_client_from_config(config_file=path, context=context)
        except Exception as exc:  # the library raises many types for a broken file
            raise KubeError("kubeconfig: '%s' cannot be used: %s" % (kubeconfig, exc))
    try:
        k8s_config.load_incluster_config()
    except k8s_config.ConfigException as exc:
        raise KubeError("kubeconfig: not given and not running in a cluster (%s)" % exc)
    return k8s_client.ApiClient()


class Kube:
    """Thin accessor for the fabric's CRs and the few core objects it reads."""

    def __init__(self, kubeconfig=None, context=None, api=None):
        self.api = api or api_client(kubeconfig, context)
        self.custom = k8s_client.CustomObjectsApi(self.api)
        self.core = k8s_client.CoreV1Api(self.api)

    def close(self):
        self.api.close()

    # --- custom resources -----------------------------------------------------------------------
    def list(self, kind, namespace=None, label_selector=None):
        plural = PLURALS[kind]
        if namespace:
            out = self.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, plural,
                                                            label_selector=label_selector or "")
        else:
            out = self.custom.list_cluster_custom_object(GROUP, VERSION, plural, label_selector=label_selector or "")
        return out.get("items", [])

    def get(self, kind, namespace, name):
        try:
            return self.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURALS[kind], name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def apply(self, obj, dry_run=False, field_manager="liqo-fabric"):
        """Server-side apply of any namespaced object (one PATCH creates or updates it). Returns the
        object the apiserver answered with; with dry_run the apiserver validates and persists nothing."""
        api_version, kind = obj["apiVersion"], obj["kind"]
        base = "/api/%s" % api_version if "/" not in api_version else "/apis/%s" % api_version
        plural = CORE_PLURALS.get(kind) or PLURALS.get(kind) or kind.lower() + "s"
        meta = obj["metadata"]
        path = "%s/namespaces/%s/%s/%s" % (base, meta["namespace"], plural, meta["name"])
        query = [("fieldManager", field_manager), ("force", "true")]
        if dry_run:
            query.append(("dryRun", "All"))
        return self.request("PATCH", path, query, obj, content_type="application/apply-patch+yaml")

    def request(self, method, path, query=None, body=None, content_type="application/json"):
        """A raw API call through the client's connection pool and auth; returns the decoded JSON body."""
        method, url, headers, body, post = self.api.param_serialize(
            method, path, query_params=query or [], body=body, auth_settings=["BearerToken"],
            header_params={"Content-Type": content_type, "Accept": "application/json"})
        resp = self.api.call_api(method, url, header_params=headers, body=body, post_params=post)
        resp.read()
        if not 200 <= resp.status < 300:
            raise ApiException(http_resp=resp)
        return json.loads(resp.data) if resp.data else None

    def replace_status(self, obj):
        """Writes obj's status guarded by its metadata.resourceVersion (409 when someone wrote first)."""
        meta = obj["metadata"]
        return self.custom.replace_namespaced_custom_object_status(
            GROUP, VERSION, meta["namespace"], PLURALS[obj["kind"]], meta["name"], obj)

    def cluster_id(self):
        try:
            cm = self.core.read_namespaced_config_map(CLUSTER_ID_CONFIGMAP, LIQO_NAMESPACE)
        except ApiException as exc:
            if exc.status == 404:
                raise KubeError("cluster identity: ConfigMap %s/%s not found" % (LIQO_NAMESPACE, CLUSTER_ID_CONFIGMAP))
            raise
        cid = (cm.data or {}).get("CLUSTER_ID")
        if not cid:
            raise KubeError("cluster identity: ConfigMap %s/%s has no CLUSTER_ID" % (LIQO_NAMESPACE, CLUSTER_ID_CONFIGMAP))
        return cid


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def set_condition(conditions, ctype, status, reason, message, generation=None):
    """Returns a new conditions list with `ctype` set; lastTransitionTime changes only when status does.

    Also returns whether anything (status, reason, message, observedGeneration) changed."""
    conditions = [dict(c) for c in (conditions or [])]
    new = {"type": ctype, "status": status, "reason": reason, "message": message}
    if generation is not None:
        new["observedGeneration"] = generation
    for i, cur in enumerate(conditions):
        if cur.get("type") != ctype:
            continue
        same = all(cur.get(k) == v for k, v in new.items())
        new["lastTransitionTime"] = cur.get("lastTransitionTime") if cur.get("status") == status else now_rfc3339()
        if not new["lastTransitionTime"]:
            new["lastTransitionTime"] = now_rfc3339()
        conditions[i] = new
        return conditions, not same
    new["lastTransitionTime"] = now_rfc3339()
    conditions.append(new)
    return conditions, True
