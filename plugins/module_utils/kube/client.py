# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes API access shared by the modules and the controller: the fabric's verbs over kube_rest (one
client for both), CRs of networking.liqo.io, conditions. Standard library and PyYAML only."""

from __future__ import annotations

import copy
import datetime
import traceback

from ansible_collections.liqo.fabric.plugins.module_utils.api.tenant_names import cluster_label
from ansible_collections.liqo.fabric.plugins.module_utils.kube.rest import (
    ApiError, Connection, KubeConfigError, Unauthorized, Unreachable)

ApiException = ApiError  # the name the API-side module_utils use

# The argument spec matching doc fragment liqo.fabric.kube.
KUBE_ARG_SPEC = {"kubeconfig": {"type": "path"}, "context": {"type": "str"},
                 "assume": {"type": "list", "elements": "dict"}}
# The argument spec matching doc fragment liqo.fabric.remote_kube (a module that reads both ends of a connection).
REMOTE_KUBE_ARG_SPEC = {"remote_kubeconfig": {"type": "path", "required": True}}

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
REMOTE_CLUSTER_ID_LABEL = "liqo.io/remote-cluster-id"
GATEWAY_RESOURCE_LABEL = "networking.liqo.io/gateway-resource"
CLUSTER_ID_CONFIGMAP = "liqo-clusterid-configmap"
LIQO_NAMESPACE = "liqo"


class KubeError(Exception):
    """A Kubernetes access problem, with a message meant for the user."""


# kind -> (API prefix, plural, namespaced)
KINDS = {
    "ConfigMap": ("/api/v1", "configmaps", True), "Secret": ("/api/v1", "secrets", True),
    "Namespace": ("/api/v1", "namespaces", False), "Service": ("/api/v1", "services", True),
    "Pod": ("/api/v1", "pods", True), "Node": ("/api/v1", "nodes", False), "Event": ("/api/v1", "events", True),
    "ServiceAccount": ("/api/v1", "serviceaccounts", True), "Endpoints": ("/api/v1", "endpoints", True),
    "Deployment": ("/apis/apps/v1", "deployments", True), "DaemonSet": ("/apis/apps/v1", "daemonsets", True),
    "Lease": ("/apis/coordination.k8s.io/v1", "leases", True),
    "CustomResourceDefinition": ("/apis/apiextensions.k8s.io/v1", "customresourcedefinitions", False),
}
KINDS.update({kind: ("/apis/%s/%s" % (GROUP, VERSION), plural, True) for kind, plural in PLURALS.items()})


class Kube:
    """The fabric's view of one cluster over the small REST client (kube_rest): the verbs the modules and
    the controller need on the kinds they touch."""

    def __init__(self, kubeconfig=None, context=None):
        self.kubeconfig, self.context = kubeconfig, context
        self._assumed = {}  # check mode: (kind, namespace, name) -> object, or None for a planned deletion
        try:
            self.conn = Connection.load(kubeconfig, context)
        except KubeConfigError as exc:
            raise KubeError(str(exc))

    def close(self):
        self.conn.close()

    # --- paths and verbs ------------------------------------------------------------------------
    @staticmethod
    def path(kind, namespace=None, name=None, subresource=None):
        try:
            prefix, plural, namespaced = KINDS[kind]
        except KeyError:
            raise KubeError("kind: '%s' is not one this client knows (%s)" % (kind, ", ".join(sorted(KINDS))))
        out = prefix
        if namespaced and namespace:
            out += "/namespaces/" + namespace
        out += "/" + plural
        if name:
            out += "/" + name
        if subresource:
            out += "/" + subresource
        return out

    def request(self, method, path, query=None, body=None, content_type="application/json"):
        return self.conn.request(method, path, query, body, content_type)

    # --- check mode: what earlier steps of the run would have written ----------------------------
    def assume(self, objects):
        """Reads see `objects` as if they were in the cluster (a check-mode run carries what its earlier steps
        would have written, plugin_utils/check_plan.py); one with ``absent: true`` as deleted. Writes are not
        affected: in check mode the modules write nothing."""
        for obj in objects or []:
            meta = obj.get("metadata") or {}
            key = (obj.get("kind"), meta.get("namespace") if KINDS.get(obj.get("kind"), (0, 0, True))[2] else None,
                   meta.get("name"))
            self._assumed[key] = None if obj.get("absent") else {k: v for k, v in obj.items() if k != "absent"}

    def assumed_namespace(self, name):
        """Whether a Namespace exists only in the check-mode plan (objects in it cannot be dry-run applied)."""
        return self._assumed.get(("Namespace", None, name)) is not None

    @staticmethod
    def _matches(obj, label_selector):
        labels = (obj.get("metadata") or {}).get("labels") or {}
        for term in (label_selector or "").split(","):
            if term.strip():
                key, dummy, value = term.partition("=")
                if labels.get(key.strip()) != value.strip():
                    return False
        return True

    def get(self, kind, namespace, name):
        """The object, or None when it does not exist."""
        key = (kind, namespace if KINDS.get(kind, (0, 0, True))[2] else None, name)
        if key in self._assumed:
            found = self._assumed[key]
            return copy.deepcopy(found) if found is not None else None
        try:
            return self.request("GET", self.path(kind, namespace, name))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def list(self, kind, namespace=None, label_selector=None):
        query = {"labelSelector": label_selector} if label_selector else None
        items = self.request("GET", self.path(kind, namespace), query).get("items", [])
        for item in items:
            item.setdefault("kind", kind)
        if self._assumed:
            mine = {key: obj for key, obj in self._assumed.items()
                    if key[0] == kind and (namespace is None or key[1] == namespace)}
            named = {(kind, (i["metadata"].get("namespace") if KINDS.get(kind, (0, 0, True))[2] else None),
                      i["metadata"]["name"]): i for i in items}
            named.update(mine)
            items = [copy.deepcopy(obj) for obj in named.values()
                     if obj is not None and self._matches(obj, label_selector)]
        return items

    def create(self, obj, dry_run=False):
        meta = obj["metadata"]
        return self.request("POST", self.path(obj["kind"], meta.get("namespace")), {"dryRun": "All"} if dry_run else None,
                            obj)

    def replace(self, obj):
        """PUT guarded by obj's metadata.resourceVersion: ApiError 409 when someone wrote first."""
        meta = obj["metadata"]
        return self.request("PUT", self.path(obj["kind"], meta.get("namespace"), meta["name"]), body=obj)

    def replace_status(self, obj):
        meta = obj["metadata"]
        return self.request("PUT", self.path(obj["kind"], meta.get("namespace"), meta["name"], "status"), body=obj)

    def patch(self, kind, namespace, name, patch, subresource=None):
        return self.request("PATCH", self.path(kind, namespace, name, subresource), body=patch,
                            content_type="application/merge-patch+json")

    def delete(self, kind, namespace, name):
        """The apiserver's answer (the object, or a Status for some kinds), None when it did not exist."""
        try:
            return self.request("DELETE", self.path(kind, namespace, name))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def apply(self, obj, dry_run=False, field_manager="liqo-fabric"):
        """Server-side apply (one PATCH creates or updates); with dry_run nothing is persisted."""
        meta = obj["metadata"]
        path = self.path(obj["kind"], meta.get("namespace"), meta["name"]) if obj["kind"] in KINDS else None
        if path is None:
            raise KubeError("kind: '%s' cannot be applied by this client" % obj["kind"])
        query = [("fieldManager", field_manager), ("force", "true")] + ([("dryRun", "All")] if dry_run else [])
        return self.request("PATCH", path, query, obj, content_type="application/apply-patch+yaml")

    def where(self):
        """Which kubeconfig and context this client uses, for messages."""
        return self.conn.config.where()

    def cluster_identity(self):
        """(CLUSTER_ID, CLUSTER_NAME) of ConfigMap liqo/liqo-clusterid-configmap; the name as a DNS label
        (tenant_names.cluster_label: from the id when the ConfigMap has no CLUSTER_NAME)."""
        cm = self.get("ConfigMap", LIQO_NAMESPACE, CLUSTER_ID_CONFIGMAP)
        if cm is None:
            raise KubeError("cluster identity: ConfigMap %s/%s not found in the cluster of %s (run liqo.fabric.install)"
                            % (LIQO_NAMESPACE, CLUSTER_ID_CONFIGMAP, self.where()))
        data = cm.get("data") or {}
        if not data.get("CLUSTER_ID"):
            raise KubeError("cluster identity: ConfigMap %s/%s in the cluster of %s has no CLUSTER_ID"
                            % (LIQO_NAMESPACE, CLUSTER_ID_CONFIGMAP, self.where()))
        return data["CLUSTER_ID"], cluster_label(data.get("CLUSTER_NAME"), data["CLUSTER_ID"])

    def cluster_id(self):
        return self.cluster_identity()[0]


def with_kube(module, work, user_errors=()):
    """work(kube) on a client for the module's kubeconfig/context, closed afterwards. A kubeconfig or API
    problem, or one of `user_errors` (bad input found by the logic), fails the module with its message."""
    if module.params.get("assume") and not module.check_mode:
        module.fail_json(msg="assume: only in check mode (the objects a check-mode run carries from step to step)")
    failures = (KubeError, Unreachable, Unauthorized) + tuple(user_errors)
    try:
        kube = Kube(module.params["kubeconfig"], module.params["context"])
        kube.assume(module.params.get("assume"))
        try:
            return work(kube)
        finally:
            kube.close()
    except failures as exc:
        module.fail_json(msg=str(exc))
    except ApiError as exc:
        module.fail_json(msg="Kubernetes API error: %s" % exc, exception=traceback.format_exc())
    return None  # not reached: fail_json exits


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
