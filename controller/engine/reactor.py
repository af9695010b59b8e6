# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The reactor: what a change becomes. An informer event's object joins or leaves its work key's members, the owners
of a related object or of a Secret are found, and each key is enqueued unless its inputs equal the last successful
apply (the hash skip)."""
from __future__ import annotations

import logging
from typing import Optional

from controller.engine.cluster import member_id
from controller.engine.relations import related_owners, secret_owners
from controller.kubeapi import obj_key
from controller.watchmap import WatchEntry
from controller.workqueue import PRIO_EVENT

log = logging.getLogger("controller.engine")


class Reactor:
    def __init__(self, engine):
        self.engine = engine

    def on_event(self, cs, kind: str, etype: str, obj: dict, old: Optional[dict]) -> None:
        eng = self.engine
        eng.metrics.events.labels(cs.name, kind).inc()
        if kind == "Connection":
            eng.metrics.connection(cs.name, obj, deleted=etype == "DELETED")
        entry = eng.by_kind.get(kind)
        for feature in eng.features:
            feature.on_event(cs, kind, etype, obj, old)
        if entry and entry.playbook and entry.enabled:
            key = entry.work_key(cs.name, obj, eng.node_name)
            mid = member_id(kind, obj)
            with cs.lock:
                members = cs.members.setdefault(key, {})
                # an object the playbook cannot act on yet (a Pod without its IP: member_if) is not a member: its
                # event changes no hash and starts no run (it would hold back the run of its IP)
                if etype == "DELETED" or not entry.is_member(obj):
                    members.pop(mid, None)
                else:
                    members[mid] = (kind, obj_key(obj))
                cs.key_entry.setdefault(key, entry)
            self.consider(cs, key, PRIO_EVENT, f"{etype.lower()} {mid}")
        # owners of a related object / of a Secret
        for owner in eng.entries:
            if not (owner.playbook and owner.enabled):
                continue
            if kind == "Secret" and owner.secrets:
                hits = secret_owners(cs, owner, obj)
            else:
                rels = [r for r in owner.related if r.kind == kind]
                if not rels:
                    continue
                hits = related_owners(cs, owner, rels, obj, old)
            if not hits:
                continue
            with cs.lock:
                cs.epoch += 1
            for o in hits:
                self.consider(cs, owner.work_key(cs.name, o, eng.node_name), PRIO_EVENT,
                              f"related {kind}/{obj_key(obj)}")

    def consider(self, cs, key: str, priority: int, reason: str, force: bool = False) -> bool:
        """Enqueue `key` unless its inputs equal the last successful apply (hash skip)."""
        eng = self.engine
        entry, objs, hashes = eng.inputs.current(cs, key)
        if entry is None:
            return False
        if not force and not eng.inputs.needs(cs, entry, key, objs, hashes):
            if not (not objs and not entry.grouped):
                eng.metrics.skipped.labels(cs.name, entry.kind, "hash").inc()
            return False
        eng.queue.add(key, lock=self.lock_for(cs, entry, key, objs), cluster=cs.name, priority=priority,
                      reason=reason, force=force)
        eng.metrics.queue_depth.set(eng.queue.depth())
        return True

    def lock_for(self, cs, entry: WatchEntry, key: str, objs: dict) -> str:
        if not entry.lock:
            return key
        any_obj = next(iter(objs.values()), {"metadata": {}})
        return entry.lock_key(cs.name, any_obj, self.engine.node_name)
