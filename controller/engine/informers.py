# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The informers of a cluster: which kinds the watch map makes the engine watch, where (the mode's namespaces and
selectors) and what their caches keep: Secrets as a digest only, Nodes and Pods slimmed to the fields the watch map
reads (docs/scale.md)."""
from __future__ import annotations

from typing import List, Optional

from controller import hashing
from controller.kubeapi import Informer, NamespacedInformers
from controller.watchmap import RESOURCES, WatchEntry

# metadata every cached object keeps (keys, hashes' memo, finalizers, deletion, related-object labels)
_META_KEPT = ("name", "namespace", "uid", "resourceVersion", "generation", "labels", "deletionTimestamp", "finalizers")
# kinds with one cached object per node or pod: only the fields the watch map reads are kept
SLIM_KINDS = ("Node", "Pod")


def secret_transform(obj: dict) -> dict:
    """Secrets are cached as a digest only: their data never stays in the controller's memory."""
    meta = obj.get("metadata") or {}
    return {"kind": "Secret", "apiVersion": "v1",
            "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace"),
                         "resourceVersion": meta.get("resourceVersion"), "uid": meta.get("uid")},
            "digest": hashing.secret_digest(obj)}


def slim_transform(paths: List[str]):
    """A cache transform keeping metadata's keys (_META_KEPT) and the fields at `paths` (dotted) only: a real
    Node's images and conditions, a Pod's containers and status are most of its size and read by nothing here."""
    paths = sorted({p for p in paths if p})

    def transform(obj: dict) -> dict:
        meta = obj.get("metadata") or {}
        out = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
               "metadata": {k: meta[k] for k in _META_KEPT if k in meta}}
        for path in paths:
            parts = path.split(".")
            cur, dst = obj, out
            for i, part in enumerate(parts):
                if not isinstance(cur, dict) or part not in cur:
                    break
                cur = cur[part]
                if i == len(parts) - 1:
                    dst[part] = cur
                else:
                    dst = dst.setdefault(part, {})
                    if not isinstance(dst, dict):
                        break
        return out
    return transform


def kinds(entries: List[WatchEntry]) -> List[str]:
    """Every kind watched: the entries', their related kinds', and Secrets when an enabled entry references some."""
    out = [e.kind for e in entries]
    for e in entries:
        out += [r.kind for r in e.related]
        if e.secrets and e.enabled:
            out.append("Secret")
    return list(dict.fromkeys(out))


def label_selector(entries: List[WatchEntry], kind: str) -> Optional[str]:
    """The watch map's label_selector of the kind's entry in this mode (e.g. the gateway pods)."""
    return next((e.label_selector for e in entries if e.kind == kind and e.label_selector), None)


def read_fields(entries: List[WatchEntry], kind: str) -> List[str]:
    """The fields of `kind`'s objects the watch map reads: inputs and Secret references of its entries,
    inputs of the related entries naming it, references from other entries' objects are on those."""
    paths: List[str] = []
    for e in entries:
        if e.kind == kind:
            paths += list(e.inputs) + list(e.secrets) + [r.ref for r in e.related if r.ref] + [p for p, _v in e.member_if]
        paths += [p for r in e.related if r.kind == kind for p in r.inputs]
    return paths


def make(engine, cs, kind: str):
    """The informer of `kind` in cluster `cs` (one per served namespace when the mode scopes the kind), feeding the
    engine's reactor."""
    res = RESOURCES[kind]
    mode = engine.mode_spec
    scoped = res.namespaced and mode.namespaces and mode.scoped(kind)
    transform = secret_transform if kind == "Secret" else (
        slim_transform(read_fields(engine.entries, kind)) if kind in SLIM_KINDS else None)
    labels = label_selector(engine.entries, kind)

    def one(namespace):
        return Informer(cs.api, res, lambda k, t, o, old, c=cs: engine.reactor.on_event(c, k, t, o, old), engine.stop,
                        transform=transform, watch_timeout=engine.watch_timeout,
                        field_selector=mode.field_selector(kind, labels), namespace=namespace, label_selector=labels)
    return NamespacedInformers([one(ns) for ns in mode.namespaces]) if scoped else one(None)
