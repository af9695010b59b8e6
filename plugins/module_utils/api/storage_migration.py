# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Storage version migration of the networking.liqo.io CRDs.

A CRD whose ``status.storedVersions`` lists more than its storage version may have objects in etcd written in an
older version (for example ``v1alpha1``, the storage version of an earlier install). Such a CRD is migrated by
rewriting every one of its objects through the storage version (a PUT of the object as read: the apiserver
encodes it in the storage version, so etcd gets new bytes although nothing in the object changed), then setting
``status.storedVersions`` (the CRD's ``/status`` subresource) to the storage version alone. Once trimmed, a CRD is
done: a second run reads the CRDs, finds nothing pending and writes nothing.

Everything is read before anything is written: a CRD whose objects cannot be listed (the conversion webhook down,
no permission) fails the migration before the first write. A rewrite that loses a race (409) reads the object
again and rewrites that; an object deleted meanwhile is skipped. An object the apiserver refuses (422: it no
longer validates in the storage version) stops the migration naming the object and the apiserver's message; that
CRD's ``storedVersions`` stays as it was (the objects rewritten before it are unchanged: a rewrite changes no
field).

Pure Python, no Ansible imports: ``api`` is anything with ``request(method, path, query, body, content_type)``
(``kube.client.Kube``, the controller's ``ClusterAPI``).
"""
from __future__ import annotations

import copy

from ansible_collections.liqo.fabric.plugins.module_utils.kube.rest import ApiError

GROUP = "networking.liqo.io"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
PAGE = 500        # objects per list request
RETRIES = 5       # reads and rewrites of one object that lost a race (409) before giving up


class MigrationError(Exception):
    """The migration cannot go on; the message names the CRD, the object or the input and the value."""


def storage_version(crd):
    """The name of the CRD's version marked ``storage: true``."""
    for version in (crd.get("spec") or {}).get("versions") or []:
        if version.get("storage"):
            return version["name"]
    raise MigrationError("%s: no version is marked storage" % crd["metadata"]["name"])


def stored_versions(crd):
    return list((crd.get("status") or {}).get("storedVersions") or [])


def pending(crd):
    """Whether objects of the CRD may be stored in another version than its storage version."""
    return stored_versions(crd) != [storage_version(crd)]


def objects_path(crd, version, namespace=None, name=None, subresource=None):
    spec = crd["spec"]
    out = "/apis/%s/%s" % (spec["group"], version)
    if spec.get("scope") == "Namespaced" and namespace:
        out += "/namespaces/" + namespace
    out += "/" + spec["names"]["plural"]
    if name:
        out += "/" + name
    if subresource:
        out += "/" + subresource
    return out


def select_crds(api, group=GROUP, names=None):
    """The group's CRDs (one list of every CRD), or those of `names` (one read each: a caller allowed to read only
    those CRDs, like the in-cluster controller, needs no list); a name that is not a CRD of the group is refused."""
    if not names:
        return sorted((crd for crd in _list(api, CRDS) if (crd.get("spec") or {}).get("group") == group),
                      key=lambda crd: crd["metadata"]["name"])
    out = []
    for i, name in enumerate(names):
        try:
            crd = api.request("GET", "%s/%s" % (CRDS, name))
        except ApiError as exc:
            if exc.status != 404:
                raise
            crd = None
        if crd is None or (crd.get("spec") or {}).get("group") != group:
            raise MigrationError("crds[%d]: '%s' is not a CustomResourceDefinition of group %s in the cluster"
                                 % (i, name, group))
        if crd not in out:
            out.append(crd)
    return sorted(out, key=lambda crd: crd["metadata"]["name"])


def _list(api, path, query=None):
    """Every item of a list, page by page."""
    items, cont = [], None
    while True:
        q = dict(query or {}, limit=str(PAGE))
        if cont:
            q["continue"] = cont
        page = api.request("GET", path, q)
        items.extend(page.get("items") or [])
        cont = (page.get("metadata") or {}).get("continue")
        if not cont:
            return items


def read_objects(api, crd, version):
    """Every object of the CRD as served in `version`, with apiVersion and kind set."""
    name = crd["metadata"]["name"]
    try:
        items = _list(api, objects_path(crd, version))
    except ApiError as exc:
        raise MigrationError("%s: cannot list its objects in %s (nothing was written): %s" % (name, version, exc))
    for item in items:
        item["apiVersion"] = "%s/%s" % (crd["spec"]["group"], version)
        item["kind"] = crd["spec"]["names"]["kind"]
    return items


def _object_name(obj):
    meta = obj.get("metadata") or {}
    return "%s/%s" % (meta["namespace"], meta["name"]) if meta.get("namespace") else meta["name"]


def _put_as_read(api, crd, version, obj):
    """PUT of `obj` (as read in `version`) through `version`; a lost race reads it again. The object as written,
    or None when it was deleted meanwhile."""
    meta = obj["metadata"]
    path = objects_path(crd, version, meta.get("namespace"), meta["name"])
    for attempt in range(RETRIES):
        try:
            return api.request("PUT", path, None, obj)
        except ApiError as exc:
            if exc.status == 404:
                return None
            if exc.status != 409 or attempt == RETRIES - 1:
                raise
        try:
            obj = api.request("GET", path)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
    return None  # not reached: the last attempt returns or raises


def rewrite(api, crd, obj):
    """Rewrites one object (read in the storage version) through the storage version, so that etcd holds it in that
    version. True when written, False when it was deleted meanwhile."""
    storage = storage_version(crd)
    try:
        return _put_as_read(api, crd, storage, obj) is not None
    except ApiError as exc:
        raise MigrationError("%s %s: rewrite through %s refused (%s keeps storedVersions %s): %s"
                             % (crd["spec"]["names"]["kind"], _object_name(obj), storage, crd["metadata"]["name"],
                                stored_versions(crd), exc))


def trim(api, crd):
    """Sets the CRD's status.storedVersions to its storage version alone (PUT of /status guarded by the
    resourceVersion of a fresh read); refused when the storage version changed since `crd` was read."""
    name, storage = crd["metadata"]["name"], storage_version(crd)
    for attempt in range(RETRIES):
        current = api.request("GET", "%s/%s" % (CRDS, name))
        if storage_version(current) != storage:
            raise MigrationError("%s: the storage version changed during the migration (%s, now %s): run it again"
                                 % (name, storage, storage_version(current)))
        if stored_versions(current) == [storage]:
            return current
        body = copy.deepcopy(current)
        body.setdefault("status", {})["storedVersions"] = [storage]
        try:
            return api.request("PUT", "%s/%s/status" % (CRDS, name), None, body)
        except ApiError as exc:
            if exc.status != 409 or attempt == RETRIES - 1:
                raise MigrationError("%s: status.storedVersions not trimmed to [%s]: %s" % (name, storage, exc))
    return None  # not reached


def migrate(api, group=GROUP, names=None, check_mode=False):
    """Migrates the group's CRDs (or those of `names`) whose storedVersions lists more than the storage version.

    Returns one entry per CRD: name, storage_version, stored_versions_before, stored_versions (after; as it
    would be in check mode), objects (rewritten, or to rewrite in check mode) and changed."""
    crds = select_crds(api, group, names)
    work = [(crd, read_objects(api, crd, storage_version(crd)) if pending(crd) else []) for crd in crds]
    report = []
    for crd, items in work:
        storage = storage_version(crd)
        entry = {"name": crd["metadata"]["name"], "storage_version": storage,
                 "stored_versions_before": stored_versions(crd), "stored_versions": stored_versions(crd),
                 "objects": 0, "changed": pending(crd)}
        if entry["changed"] and check_mode:
            entry["objects"], entry["stored_versions"] = len(items), [storage]
        elif entry["changed"]:
            entry["objects"] = sum(1 for obj in items if rewrite(api, crd, obj))
            entry["stored_versions"] = stored_versions(trim(api, crd))
        report.append(entry)
    return report


def diff(report):
    """`--diff` of a migration: storedVersions of each changed CRD before and after."""
    changed = [e for e in report if e["changed"]]
    return {"before": {e["name"]: e["stored_versions_before"] for e in changed},
            "after": {e["name"]: e["stored_versions"] for e in changed}}
