# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A work key's inputs: its members' objects from the caches and their input hashes (the role version, the watch
map's `inputs`, the referenced Secrets' digests, the related objects' inputs), what is remembered of a successful
run, and whether the key needs work (the hash skip)."""
from __future__ import annotations

from typing import Dict

from controller import hashing
from controller.engine.relations import secret_names
from controller.kubeapi import obj_key
from controller.watchmap import WatchEntry, get_field

MEMO_MAX = 200000   # memoized hashes per cluster before the memo is dropped


def applied_repr(entry: WatchEntry, hashes: Dict[str, str]) -> dict:
    """What is remembered of a successful run: per member (entries with status, so each object's
    outcome can be told apart) or one digest for the group (Nodes/Pods: thousands of members)."""
    if entry.status or not entry.grouped:
        return dict(hashes)
    return {"*": hashing.digest(sorted(hashes.items()))}


class Inputs:
    def __init__(self, engine):
        self.engine = engine

    def member_hash(self, cs, entry: WatchEntry, obj: dict) -> str:
        meta = obj.get("metadata") or {}
        memo_key = (entry.kind, meta.get("uid"), meta.get("resourceVersion"), cs.epoch)
        h = cs.hash_memo.get(memo_key)
        if h is not None:
            return h
        parts = [self.engine.role_version, hashing.project(obj, entry.inputs)]
        ns = meta.get("namespace")
        if entry.secrets:
            sec = cs.informers.get("Secret")
            parts.append([(n, (sec.cache.get(f"{ns}/{n}") or {}).get("digest") if sec else None)
                          for n in secret_names(entry, obj)])
        for r in entry.related:
            inf = cs.informers.get(r.kind)
            if inf is None:
                continue
            if r.all or r.namespace:
                rel = sorted((obj_key(o), hashing.project(o, r.inputs)) for o in list(inf.cache.values())
                             if r.all or (o.get("metadata") or {}).get("namespace") == ns)
            elif r.labels:
                want = {lb: (meta.get("labels") or {}).get(lb) for lb in r.labels}
                rel = sorted((obj_key(o), hashing.project(o, r.inputs)) for o in list(inf.cache.values())
                             if (o.get("metadata") or {}).get("namespace") == ns and all(
                                 v is not None and ((o.get("metadata") or {}).get("labels") or {}).get(lb) == v
                                 for lb, v in want.items()))
            else:
                ref = get_field(obj, r.ref)
                rel = None
                if isinstance(ref, dict) and ref.get("name"):
                    o = inf.cache.get(f"{ref.get('namespace') or ns}/{ref['name']}")
                    rel = hashing.project(o, r.inputs) if o else None
            parts.append([r.kind, rel])
        h = hashing.digest(parts)
        if len(cs.hash_memo) > MEMO_MAX:
            cs.hash_memo.clear()
        cs.hash_memo[memo_key] = h
        return h

    def current(self, cs, key: str) -> tuple:
        """(entry, {member id: object}, {member id: hash}) for a work key, from the caches."""
        with cs.lock:
            entry = cs.key_entry.get(key)
            members = dict(cs.members.get(key) or {})
        objs, hashes = {}, {}
        if entry is None:
            return None, objs, hashes
        for mid, (kind, ck) in members.items():
            o = cs.obj(kind, ck)
            if o is None:
                continue
            objs[mid] = o
            hashes[mid] = self.member_hash(cs, self.engine.by_kind[kind], o)
        return entry, objs, hashes

    @staticmethod
    def needs(cs, entry: WatchEntry, key: str, objs: dict, hashes: dict) -> str:
        """Why this key needs work ('' = nothing to do)."""
        if entry.finalizer:
            for o in objs.values():
                fins = (o.get("metadata") or {}).get("finalizers") or []
                if (o.get("metadata") or {}).get("deletionTimestamp"):
                    if entry.finalizer in fins:
                        return "deleting"
                elif entry.finalizer not in fins:
                    return "finalizer"
        if not objs and not entry.grouped:
            return ""
        live = {m: h for m, h in hashes.items() if not (objs[m].get("metadata") or {}).get("deletionTimestamp")}
        if not live and not entry.grouped:
            return ""
        applied = cs.applied.get(key)
        if applied is None:
            return "new" if live or entry.grouped else ""
        return "" if applied == applied_repr(entry, live) else "changed"
