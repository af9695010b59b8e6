# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Finalizers (per-object keys only): added on create; on delete the entry's finalizer playbook runs with
`fabric_deleting: true`, then the finalizer is removed. A failed teardown keeps it, sets Degraded (TeardownFailed)
and retries."""
from __future__ import annotations

import os

from controller import manifest as mf
from controller.engine.cluster import member_id
from controller.engine.record import supersede
from controller.kubeapi import ApiError
from controller.watchmap import RESOURCES, WatchEntry
from controller.workqueue import Item


def merge_patch(cs, res, namespace, name, body) -> dict:
    return cs.api.request("PATCH", res.path(namespace, name), body=body, content_type="application/merge-patch+json")


class Finalizers:
    def __init__(self, engine):
        self.engine = engine

    @staticmethod
    def patch(cs, entry: WatchEntry, obj: dict, add: bool) -> None:
        """Adds or removes the entry's finalizer on `obj` (a conflict re-reads the object and tries again)."""
        res = RESOURCES[entry.kind]
        meta = obj["metadata"]
        for _attempt in range(8):
            fins = list(meta.get("finalizers") or [])
            if add == (entry.finalizer in fins):
                return
            fins = fins + [entry.finalizer] if add else [f for f in fins if f != entry.finalizer]
            body = {"metadata": {"finalizers": fins, "resourceVersion": meta.get("resourceVersion")}}
            try:
                merge_patch(cs, res, meta.get("namespace"), meta["name"], body)
                return
            except ApiError as exc:
                if exc.status == 404:
                    return
                if exc.status != 409:
                    raise
            fresh = cs.api.get(res, meta.get("namespace"), meta["name"])
            if fresh is None:
                return
            meta = fresh["metadata"]

    def finalize(self, cs, entry: WatchEntry, item: Item, obj: dict) -> None:
        """Runs the teardown of a deleted object, then lets it go (or keeps it Degraded and retries)."""
        eng = self.engine
        mid = member_id(entry.kind, obj)
        res, _cancelled_by = eng.runs.run(cs, entry, item, {mid: obj}, [], deleting=True)
        if res.ok:
            self.patch(cs, entry, obj, add=False)
            with cs.lock:
                cs.applied.pop(item.key, None)
                cs.manifests.pop(item.key, None)
                cs.forced_for_manifest.discard(item.key)
                # a teardown that re-applied the nodes' overlay (without the gateway) declared it: newest wins
                supersede(cs, item.key, mf.manifest_from_stats(res.stats) or [])
                cs.failures.pop(item.key, None)
                cs.state_dirty = True
            cs.status.event(obj, "Normal", "Finalized", f"{os.path.basename(entry.finalizer_playbook)}: {res.message}")
        else:
            if entry.status:
                eng.conditions.set(cs, obj, "degraded", f"teardown: {res.message}", "TeardownFailed")
            eng.executor.retry(item)
