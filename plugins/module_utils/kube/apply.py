# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Apply or delete a list of Kubernetes objects over the small REST client (kube_client.Kube): server-side
apply, one PATCH per object; change detected by resourceVersion and content; check mode as a server-side dry run;
diffs without apiserver bookkeeping; Secret data never in what is returned. Pure Python (no ansible)."""

from __future__ import annotations

import base64
import copy
import time

from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import KINDS
from ansible_collections.liqo.fabric.plugins.module_utils.kube.rest import ApiError, Unauthorized

REDACTED = "VALUE_REDACTED"
# metadata the apiserver maintains: it changes on every write and says nothing about the object
NOISE = ("managedFields", "resourceVersion", "generation", "uid", "creationTimestamp")
SECRET_FIELDS = ("data", "stringData")


class ApplyError(Exception):
    """Bad input or an object the apiserver refused; the message names the object."""


def api_version(kind):
    """The apiVersion the client uses for `kind` ("v1", "networking.liqo.io/v1beta1"), None when unknown."""
    if kind not in KINDS:
        return None
    prefix = KINDS[kind][0]
    return "v1" if prefix == "/api/v1" else prefix[len("/apis/"):]


def describe(obj):
    """`Kind namespace/name` (or `Kind name` when cluster-scoped, `Kind namespace/*` for a whole kind)."""
    meta = obj.get("metadata") or {}
    name = meta.get("name") or "*"
    return "%s %s" % (obj.get("kind"), "%s/%s" % (meta["namespace"], name) if meta.get("namespace") else name)


def check_definitions(definitions, state):
    """Validated copies of `definitions` (apiVersion filled in, cluster-scoped namespaces dropped). For state
    absent a definition may leave out metadata.name: it then stands for every object of its kind in its
    namespace that carries its metadata.labels."""
    out = []
    for i, d in enumerate(definitions):
        where = "definitions[%d]" % i
        if not isinstance(d, dict):
            raise ApplyError("%s: must be an object (dict), got %s" % (where, type(d).__name__))
        d = copy.deepcopy(d)
        kind = d.get("kind")
        if not kind or not isinstance(kind, str):
            raise ApplyError("%s: kind is required" % where)
        if kind not in KINDS:
            raise ApplyError("%s: kind '%s' is not supported (supported: %s)" % (where, kind, ", ".join(sorted(KINDS))))
        want = api_version(kind)
        if d.get("apiVersion") is None:
            d["apiVersion"] = want
        elif d["apiVersion"] != want:
            raise ApplyError("%s: %s is served as apiVersion '%s', not '%s'" % (where, kind, want, d["apiVersion"]))
        meta = d.get("metadata")
        if not isinstance(meta, dict):
            raise ApplyError("%s: metadata is required" % where)
        namespaced = KINDS[kind][2]
        if namespaced and not meta.get("namespace"):
            raise ApplyError("%s: %s is namespaced: metadata.namespace is required" % (where, kind))
        if not namespaced:
            meta.pop("namespace", None)
        if not meta.get("name") and (state != "absent" or not namespaced):
            raise ApplyError("%s: metadata.name is required%s" % (
                where, "" if state != "absent" else " (a nameless definition only selects namespaced kinds)"))
        if kind == "Secret":
            for field in SECRET_FIELDS:
                if d.get(field) is not None and not isinstance(d[field], dict):
                    raise ApplyError("%s: %s.%s must be a dict" % (where, describe(d), field))
            fold_string_data(d)
        out.append(d)
    return out


def fold_string_data(secret):
    """Moves a Secret's stringData into data (base64), as the apiserver would: applied as is, stringData makes
    every server-side apply a write (the stored object never has it), so nothing would ever be unchanged."""
    string_data = secret.pop("stringData", None)
    if string_data:
        data = dict(secret.get("data") or {})
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        secret["data"] = data
    return secret


def secret_values(definitions):
    """Every Secret value in the definitions (strings), for the caller to keep out of its output."""
    values = set()
    for d in definitions or []:
        if isinstance(d, dict) and d.get("kind") == "Secret":
            for field in SECRET_FIELDS:
                for value in (d.get(field) or {}).values() if isinstance(d.get(field), dict) else ():
                    if value not in (None, ""):
                        values.add(str(value))
    return values


def redact(obj):
    """A copy of obj fit to show: a Secret's data/stringData values replaced, managedFields dropped."""
    if not isinstance(obj, dict):
        return obj
    out = copy.deepcopy(obj)
    (out.get("metadata") or {}).pop("managedFields", None)
    if out.get("kind") == "Secret":
        for field in SECRET_FIELDS:
            if isinstance(out.get(field), dict):
                out[field] = {key: REDACTED for key in out[field]}
        annotations = (out.get("metadata") or {}).get("annotations") or {}
        if "kubectl.kubernetes.io/last-applied-configuration" in annotations:
            annotations["kubectl.kubernetes.io/last-applied-configuration"] = REDACTED
    return out


def _strip(obj):
    """A copy of obj without the apiserver's bookkeeping metadata; {} for None."""
    if obj is None:
        return {}
    out = copy.deepcopy(obj)
    meta = out.get("metadata") or {}
    for key in NOISE:
        meta.pop(key, None)
    return out


def for_diff(obj):
    """obj as a diff shows it: redacted, without the apiserver's bookkeeping metadata; {} for None."""
    return redact(_strip(obj))


def content_changed(before, after):
    """Whether after differs from before in anything but bookkeeping (Secret data included)."""
    return before is None or _strip(before) != _strip(after)


def diff_entry(before, after):
    """One entry of a module's diff list; a Secret's data values that changed show as REDACTED (changed)."""
    obj = after if after is not None else before
    entry = {"before_header": describe(obj), "after_header": describe(obj),
             "before": for_diff(before), "after": for_diff(after)}
    if obj.get("kind") == "Secret" and before is not None and after is not None:
        old = before.get("data") or {}
        for key, value in (after.get("data") or {}).items():
            if key in old and old[key] != value:
                entry["after"]["data"][key] = REDACTED + " (changed)"
    return entry


def _error(obj, exc):
    if isinstance(exc, Unauthorized):
        return exc  # about the credentials, not the object: its own message names the server and kubeconfig
    hint = ""
    if exc.status == 500 and "failed to create typed live object" in exc.message:
        # server-side apply cannot read the stored object with the CRD's schema: it was written by an older schema
        hint = ("; the object in the cluster has a shape its CRD's schema no longer takes: migrate it with "
                "liqo.fabric.migrate_storage (liqo.fabric.install does too, docs/upgrade.md)")
    return ApplyError("%s: %s (HTTP %s)%s" % (describe(obj), exc.message, exc.status, hint))


def apply_all(kube, definitions, check_mode=False, field_manager="liqo-fabric"):
    """Server-side applies each definition in order. Returns (changed, resources, diffs): resources are the
    apiserver's answers (redacted), diffs one entry per changed object. In check mode everything is a
    server-side dry run, so nothing is persisted."""
    changed, resources, diffs = False, [], []
    dry_namespaces = set()  # Namespaces only dry-run created: objects in them cannot be dry-run yet
    for d in definitions:
        meta = d["metadata"]
        try:
            before = kube.get(d["kind"], meta.get("namespace"), meta["name"])
            try:
                after = kube.apply(d, dry_run=check_mode, field_manager=field_manager)
            except ApiError as exc:
                if not (check_mode and exc.status == 404 and (meta.get("namespace") in dry_namespaces
                                                              or kube.assumed_namespace(meta.get("namespace")))):
                    raise
                after = d  # it would be created together with its namespace
        except ApiError as exc:
            raise _error(d, exc)
        if check_mode and before is None and d["kind"] == "Namespace":
            dry_namespaces.add(meta["name"])
        # an unmoved resourceVersion is no write at all (a dry run never moves it); a moved one may be bookkeeping
        # only (managedFields), which is no change of the object
        if before is None:
            now = True
        else:
            moved = check_mode or before["metadata"].get("resourceVersion") != after["metadata"].get("resourceVersion")
            now = moved and content_changed(before, after)
        if now:
            changed = True
            diffs.append(diff_entry(before, after))
        resources.append(redact(after))
    return changed, resources, diffs


def _selector(labels):
    return ",".join("%s=%s" % (k, v) for k, v in sorted((labels or {}).items())) or None


def delete_all(kube, definitions, check_mode=False):
    """Deletes each definition's object (or, for a nameless one, every object of its kind in its namespace with
    its labels) in order; missing ones are fine. Returns (deleted, resources, diffs): `Kind ns/name` of what
    was (or would be) deleted, the apiserver's answers (redacted), one diff entry per deleted object."""
    deleted, resources, diffs = [], [], []
    for d in definitions:
        meta = d["metadata"]
        try:
            if meta.get("name"):
                found = kube.get(d["kind"], meta.get("namespace"), meta["name"])
                targets = [found] if found is not None else []
            else:
                targets = kube.list(d["kind"], meta["namespace"], _selector(meta.get("labels")))
        except ApiError as exc:
            raise _error(d, exc)
        for obj in targets:
            obj.setdefault("kind", d["kind"])
            obj.setdefault("apiVersion", d["apiVersion"])
            m = obj["metadata"]
            answer = obj
            if not check_mode:
                try:
                    answer = kube.delete(d["kind"], m.get("namespace"), m["name"])
                except ApiError as exc:
                    raise _error(obj, exc)
                if answer is None:
                    continue  # someone else deleted it first
            deleted.append(describe(obj))
            diffs.append(diff_entry(obj, None))
            if isinstance(answer, dict) and answer.get("kind") == d["kind"]:
                resources.append(redact(answer))
            else:  # some kinds answer with a Status
                resources.append(redact(obj))
    return deleted, resources, diffs


def _poll(done, timeout, what):
    deadline, interval = time.monotonic() + timeout, 0.05
    while True:
        state = done()
        if state is True:
            return
        if time.monotonic() >= deadline:
            raise ApplyError("%s: still %s after %ss" % (what, state, timeout))
        time.sleep(interval)
        interval = min(interval * 2, 1.0)


def wait_deleted(kube, resources, timeout):
    """Waits until every object in resources is gone (404, or a new object of the same name)."""
    for obj in resources:
        m = obj["metadata"]

        def gone(kind=obj["kind"], namespace=m.get("namespace"), name=m["name"], uid=m.get("uid")):
            cur = kube.get(kind, namespace, name)
            if cur is None or (uid and (cur.get("metadata") or {}).get("uid") != uid):
                return True
            finalizers = (cur.get("metadata") or {}).get("finalizers")
            return "present" + (" (finalizers: %s)" % ", ".join(finalizers) if finalizers else "")
        _poll(gone, timeout, describe(obj))


def has_condition(obj, ctype, status):
    return any(c.get("type") == ctype and str(c.get("status")) == status
               for c in ((obj or {}).get("status") or {}).get("conditions") or [])


def wait_condition(kube, resources, ctype, status, timeout):
    """Waits until every object in resources has condition `ctype` with `status`."""
    for obj in resources:
        m = obj["metadata"]
        if has_condition(obj, ctype, status):
            continue

        def ready(kind=obj["kind"], namespace=m.get("namespace"), name=m["name"]):
            cur = kube.get(kind, namespace, name)
            if cur is None:
                return "missing"
            return True if has_condition(cur, ctype, status) else "without condition %s=%s" % (ctype, status)
        _poll(ready, timeout, describe(obj))
