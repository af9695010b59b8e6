# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A cluster's identity as Liqo keeps it: ConfigMap liqo/liqo-clusterid-configmap with CLUSTER_ID (a UUID written
once and never changed: peers know the cluster by it) and CLUSTER_NAME (a friendly name, the one tenant
namespaces and resource names are made from). An existing Liqo install's ConfigMap is taken as it is."""

from __future__ import annotations

import re
import uuid

# a DNS-1123 label short enough that liqo-tenant-<name> is one too (tenant_names makes the names)
from ansible_collections.liqo.fabric.plugins.module_utils.api.tenant_names import MAX_NAME, NAME_RE
from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import (
    CLUSTER_ID_CONFIGMAP, LIQO_NAMESPACE, ApiError)


class IdentityError(Exception):
    """Bad input: the message names the field and the value."""


def check_name(name, field="cluster_name"):
    if not NAME_RE.match(name or ""):
        raise IdentityError("%s: '%s' is not a valid cluster name: lowercase letters, digits and '-', starting and "
                            "ending with a letter or digit, at most %d characters (tenant namespaces are "
                            "liqo-tenant-<name>)" % (field, name, MAX_NAME))
    return name


# kubeconfig cluster names many distributions give every cluster (kubeadm, k3s, minikube, ...): not a name
GENERIC_NAMES = frozenset(("kubernetes", "default", "cluster", "local", "k3s", "minikube", "docker-desktop",
                           "kind", "microk8s-cluster", "microk8s", "rke2"))


def default_name(kubeconfig_cluster, cluster_id):
    """A friendly name from the kubeconfig's name of the cluster (an EKS ARN's last part, GKE's
    gke_project_zone_name with '-'), else (none, or a generic one such as kubeadm's 'kubernetes')
    'cluster-' and the id's first 8 characters."""
    raw = (kubeconfig_cluster or "").rsplit("/", 1)[-1].lower()
    name = re.sub(r"[^a-z0-9-]+", "-", raw).strip("-")[:MAX_NAME].strip("-")
    return name if NAME_RE.match(name) and name not in GENERIC_NAMES else "cluster-" + cluster_id[:8]


def ensure(kube, cluster_name=None, check_mode=False):
    """Creates the identity ConfigMap once; keeps CLUSTER_ID forever, sets CLUSTER_NAME when missing or when
    `cluster_name` asks for another one. Returns {cluster_id, cluster_name, changed, created, before, after}."""
    if cluster_name is not None:
        check_name(cluster_name)
    cm = kube.get("ConfigMap", LIQO_NAMESPACE, CLUSTER_ID_CONFIGMAP)
    before = dict((cm or {}).get("data") or {})
    if cm is not None and before.get("CLUSTER_ID"):
        cluster_id = before["CLUSTER_ID"]
        name = cluster_name or before.get("CLUSTER_NAME") or default_name(kube.conn.config.cluster_name, cluster_id)
        after = dict(before, CLUSTER_NAME=name)
        if after != before and not check_mode:
            kube.patch("ConfigMap", LIQO_NAMESPACE, CLUSTER_ID_CONFIGMAP, {"data": {"CLUSTER_NAME": name}})
        return _result(cluster_id, name, after != before, False, before, after)
    if cm is not None:  # a ConfigMap without CLUSTER_ID is not Liqo's: refuse to guess
        raise IdentityError("cluster identity: ConfigMap %s/%s in the cluster of %s exists without CLUSTER_ID; fix or "
                            "delete it" % (LIQO_NAMESPACE, CLUSTER_ID_CONFIGMAP, kube.where()))
    cluster_id = str(uuid.uuid4())
    name = cluster_name or default_name(kube.conn.config.cluster_name, cluster_id)
    after = {"CLUSTER_ID": cluster_id, "CLUSTER_NAME": name}
    if check_mode:
        return _result(cluster_id, name, True, True, {}, after)
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": CLUSTER_ID_CONFIGMAP, "namespace": LIQO_NAMESPACE,
                         "labels": {"app.kubernetes.io/managed-by": "liqo.fabric"}},
            "data": after}
    try:
        kube.create(body)  # a create, not an apply: two installs at once must not give the cluster two ids
    except ApiError as exc:
        if exc.status != 409:
            raise
        return ensure(kube, cluster_name, check_mode)  # the other install won: keep its id
    return _result(cluster_id, name, True, True, {}, after)


def _result(cluster_id, name, changed, created, before, after):
    return {"cluster_id": cluster_id, "cluster_name": name, "changed": changed, "created": created,
            "before": before, "after": after}
