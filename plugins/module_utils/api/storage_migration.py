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

An object the storage version's schema refuses (422: a shape an older schema of that same version accepted, such as
a Configuration's CIDR string before v1beta1 took Liqo's lists) is read and rewritten through another served version
of a CRD whose conversion changes shapes (strategy Webhook): the conversion stores it in the valid shape, and it
reads the same in that version. Such objects are found in every CRD with a Webhook conversion, pending or not, by a
dry-run PUT of each (nothing written), so a second run finds none and writes nothing.

Everything is read before anything is written: a CRD whose objects cannot be listed (the conversion webhook down,
no permission) fails the migration before the first write. A rewrite that loses a race (409) reads the object
again and rewrites that; an object deleted meanwhile is skipped. An object no served version takes stops the
migration naming the object and the apiserver's message; that CRD's ``storedVersions`` stays as it was (the objects
rewritten before it are unchanged: a rewrite changes no field).

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


def _put_as_read(api, crd, version, obj, dry_run=False):
    """PUT of `obj` (as read in `version`) through `version` (with dry_run, validated and not persisted); a lost race
    reads it again. The object as written, or None when it was deleted meanwhile."""
    meta = obj["metadata"]
    path = objects_path(crd, version, meta.get("namespace"), meta["name"])
    for attempt in range(RETRIES):
        try:
            return api.request("PUT", path, {"dryRun": "All"} if dry_run else None, obj)
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


def _refused(crd, obj, version, exc):
    return MigrationError("%s %s: rewrite through %s refused (%s keeps storedVersions %s): %s"
                          % (crd["spec"]["names"]["kind"], _object_name(obj), version, crd["metadata"]["name"],
                             stored_versions(crd), exc))


def rewrite(api, crd, obj, dry_run=False, through_storage=True):
    """Rewrites one object (read in the storage version) so that etcd holds it in the storage version, valid there.

    Through the storage version first (unless `through_storage` is false: the caller knows it refuses the object);
    an object refused there (422: a shape an older schema of that version accepted) is read and written through
    another served version, whose conversion stores the valid shape. Returns the version it was (with dry_run:
    would be) written through, or None when it was deleted meanwhile."""
    storage = storage_version(crd)
    if through_storage:
        try:
            return storage if _put_as_read(api, crd, storage, obj, dry_run) is not None else None
        except ApiError as exc:
            if exc.status != 422:
                raise _refused(crd, obj, storage, exc)
            refusal = exc
    else:
        refusal = "refused by the %s schema" % storage
    meta = obj["metadata"]
    for version in convertible_versions(crd):
        if version == storage:
            continue
        try:
            other = api.request("GET", objects_path(crd, version, meta.get("namespace"), meta["name"]))
            return version if _put_as_read(api, crd, version, other, dry_run) is not None else None
        except ApiError as exc:
            if exc.status == 404:
                return None
            if exc.status != 422:
                raise _refused(crd, obj, version, exc)
    raise _refused(crd, obj, "any served version" if convertible_versions(crd) else storage, refusal)


def convertible_versions(crd):
    """The served versions of a CRD whose conversion changes an object's shape (strategy Webhook), else []: only
    through one of those can an object refused by the storage version's schema be written in a valid shape."""
    spec = crd.get("spec") or {}
    if ((spec.get("conversion") or {}).get("strategy") or "None") != "Webhook":
        return []
    return [v["name"] for v in spec.get("versions") or [] if v.get("served")]


def refused_by_storage(api, crd, obj):
    """Whether the storage version's schema refuses the object as it is stored (a dry-run PUT: nothing written)."""
    try:
        _put_as_read(api, crd, storage_version(crd), obj, dry_run=True)
    except ApiError as exc:
        if exc.status == 422:
            return True
        raise _refused(crd, obj, storage_version(crd), exc)
    return False


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
    """Migrates the group's CRDs (or those of `names`): those whose storedVersions lists more than the storage
    version get every object rewritten and storedVersions trimmed; in those whose conversion changes shapes, the
    objects the storage version's schema refuses (an older schema of that version took them) are rewritten through
    another version (`repaired`).

    Returns one entry per CRD: name, storage_version, stored_versions_before, stored_versions (after; as it
    would be in check mode), objects (rewritten, or to rewrite in check mode), repaired (of those, or alone: the
    ones written through another version) and changed."""
    crds = select_crds(api, group, names)
    work = [(crd, read_objects(api, crd, storage_version(crd)) if pending(crd) or convertible_versions(crd) else [])
            for crd in crds]
    report = []
    for crd, items in work:
        storage = storage_version(crd)
        entry = {"name": crd["metadata"]["name"], "storage_version": storage,
                 "stored_versions_before": stored_versions(crd), "stored_versions": stored_versions(crd),
                 "objects": 0, "repaired": 0, "changed": pending(crd)}
        if entry["changed"]:
            through = [rewrite(api, crd, obj, dry_run=check_mode) for obj in items]
        else:   # only the objects the storage version refuses
            through = [rewrite(api, crd, obj, dry_run=check_mode, through_storage=False)
                       for obj in items if refused_by_storage(api, crd, obj)]
        through = [v for v in through if v is not None]
        entry["objects"], entry["repaired"] = len(through), sum(1 for v in through if v != storage)
        entry["changed"] = entry["changed"] or entry["repaired"] > 0
        if pending(crd):
            entry["stored_versions"] = [storage] if check_mode else stored_versions(trim(api, crd))
        report.append(entry)
    return report


def diff(report):
    """`--diff` of a migration: storedVersions of each changed CRD before and after."""
    changed = [e for e in report if e["changed"]]
    return {"before": {e["name"]: e["stored_versions_before"] for e in changed},
            "after": {e["name"]: e["stored_versions"] for e in changed}}
