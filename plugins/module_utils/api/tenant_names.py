# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Names of what the fabric makes per remote cluster, from the cluster's friendly name (Liqo's way): the tenant
namespace `liqo-tenant-<name>` and, inside it, the Configuration, gateway, PublicKey and Connection `<name>`.
The cluster id (a UUID) stays the identity, in the `liqo.io/remote-cluster-id` labels.

Pure Python (no Ansible, no API): the caller passes the namespaces that exist.

- The name is CLUSTER_NAME made a DNS-1123 label of at most 51 characters (so `liqo-tenant-<name>`, 63, is one
  too); a cluster without CLUSTER_NAME is named from its id (`cluster-<first 8>` for a UUID).
- A namespace labelled with the cluster's id is its tenant namespace, whatever its name: names stay what the
  first connect made when CLUSTER_NAME changes later. A namespace `liqo-tenant-<id>` (what liqo.fabric made
  before it used names) is the cluster's too, so disconnect, reset and a new connect find connections made then.
- Two peers with the same name: the second gets `liqo-tenant-<name>-<6 hex of sha256(id)>`; if that is taken
  too (by an unlabelled namespace, or a hash clash), TenantNameError names both clusters.
- Resource names are the tenant namespace's name without `liqo-tenant-`: the same for every peer of a name, and
  a connection made with UUID names keeps them.
"""

from __future__ import annotations

import hashlib
import re

TENANT_PREFIX = "liqo-tenant-"
REMOTE_CLUSTER_ID_LABEL = "liqo.io/remote-cluster-id"
MAX_NAME = 63 - len(TENANT_PREFIX)   # 51
SUFFIX_LEN = 6
NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,%d}[a-z0-9])?$" % (MAX_NAME - 2))
UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


class TenantNameError(Exception):
    """No tenant namespace can be chosen: the message names both clusters."""


def _label(text, limit=MAX_NAME):
    """text made a DNS-1123 label of at most `limit` characters ('' when nothing of it is left)."""
    return re.sub(r"[^a-z0-9]+", "-", (text or "").lower()).strip("-")[:limit].strip("-")


def id_hash(cluster_id, length=SUFFIX_LEN):
    return hashlib.sha256((cluster_id or "").encode()).hexdigest()[:length]


def cluster_label(cluster_name, cluster_id):
    """The friendly name as the fabric uses it in names. A valid name (a DNS label of at most 51 characters) is
    kept as it is; another one is lowercased, every run of other characters becomes '-', cut to 51. Without a
    name (an old install, or a Liqo whose ConfigMap has only CLUSTER_ID): a UUID id gives 'cluster-<first 8>',
    another id (Liqo 1.x ids are names already) is made a label the same way."""
    if cluster_name and NAME_RE.match(cluster_name):
        return cluster_name
    name = _label(cluster_name)
    if name:
        return name
    cluster_id = (cluster_id or "").strip()
    if UUID_RE.match(cluster_id.lower()):
        return "cluster-" + cluster_id.lower()[:8]
    return _label(cluster_id) or "cluster-" + id_hash(cluster_id, 8)


def tenant_namespaces(namespaces):
    """From Namespace objects, the ones naming can bump into: {name: its remote-cluster-id label or ''} for
    every namespace named liqo-tenant-*."""
    out = {}
    for ns in namespaces or []:
        meta = ns.get("metadata") or {}
        if (meta.get("name") or "").startswith(TENANT_PREFIX):
            out[meta["name"]] = (meta.get("labels") or {}).get(REMOTE_CLUSTER_ID_LABEL) or ""
    return out


def tenant_namespace(existing, remote_cluster_id, remote_cluster_name):
    """The tenant namespace of the remote cluster in a cluster whose namespaces are `existing`
    ({name: remote-cluster-id label or ''}, see tenant_namespaces)."""
    if not remote_cluster_id:
        raise TenantNameError("tenant namespace: the remote cluster has no cluster id")
    existing = existing or {}
    labelled = sorted(n for n, rid in existing.items() if rid == remote_cluster_id and n.startswith(TENANT_PREFIX))
    # the one connect made before (a Liqo peering's too: Liqo labels its tenant namespaces so)
    if labelled:
        plain = [n for n in labelled if n == TENANT_PREFIX + cluster_label(remote_cluster_name, remote_cluster_id)]
        return (plain or labelled)[0]
    legacy = TENANT_PREFIX + remote_cluster_id
    if existing.get(legacy) == "":  # made by liqo.fabric before names, never labelled
        return legacy
    name = cluster_label(remote_cluster_name, remote_cluster_id)
    first = TENANT_PREFIX + name
    if first not in existing:
        return first
    second = "%s%s-%s" % (TENANT_PREFIX, name[:MAX_NAME - SUFFIX_LEN - 1].rstrip("-"), id_hash(remote_cluster_id))
    if second not in existing:
        return second
    raise TenantNameError(
        "tenant namespace for cluster '%s' (id %s): %s and %s are both taken (%s); give one of the clusters "
        "another name (liqo.fabric.install -e cluster_name=NAME on it) or delete the namespace that is no longer used"
        % (remote_cluster_name or name, remote_cluster_id, first, second,
           "; ".join("%s by %s" % (n, ("cluster id " + existing[n]) if existing[n] else "a namespace not labelled "
                                   + REMOTE_CLUSTER_ID_LABEL) for n in (first, second))))


def resource_name(namespace):
    """The name of the objects in a tenant namespace: the namespace's name without liqo-tenant-."""
    if not (namespace or "").startswith(TENANT_PREFIX) or len(namespace) == len(TENANT_PREFIX):
        raise TenantNameError("'%s' is not a tenant namespace (%s<name>)" % (namespace, TENANT_PREFIX))
    return namespace[len(TENANT_PREFIX):]


def tenant(existing, remote_cluster_id, remote_cluster_name):
    """{namespace, name}: the tenant namespace of the remote cluster and the name of the objects in it."""
    namespace = tenant_namespace(existing, remote_cluster_id, remote_cluster_name)
    return {"namespace": namespace, "name": resource_name(namespace)}
