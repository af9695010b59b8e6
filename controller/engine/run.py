# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A playbook run of a work key: what it gets (controller/README.md, "What a run gets"), whether it applies
everything or only what its events changed, its log lines and metrics."""
from __future__ import annotations

import logging
import os
from typing import List, Tuple

from controller.logs import fields
from controller.runner import RunResult
from controller.watchmap import WatchEntry
from controller.workqueue import Item

log = logging.getLogger("controller.engine")


def object_ref(obj: dict) -> dict:
    """A run's `fabric_object`: the object's apiVersion, kind, namespace, name, uid and generation."""
    meta = obj.get("metadata") or {}
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "namespace": meta.get("namespace"),
            "name": meta.get("name"), "uid": meta.get("uid"), "generation": meta.get("generation")}


def full_apply(by_kind: dict, cs, item: Item) -> bool:
    """`fabric_full_apply` of a run: false lets a playbook apply only what the event changed (reconcile_overlay:
    the nodes whose planned state is not the one recorded after their last apply). True when the run is forced
    (drift, a retry after a failure), when no dataplane manifest of the key is stored yet (the first run records
    every target for the drift check), or when a deleted object of a drift-checked kind (a Node) left the key:
    a partial run keeps the other targets of the stored manifest, so a full run drops the deleted one's."""
    if item.force:
        return True
    with cs.lock:
        if item.key not in cs.manifests:
            return True
    for reason in item.reasons:
        if reason.startswith("deleted "):
            kind = reason.split(" ", 1)[1].split("/", 1)[0]
            if kind in by_kind and by_kind[kind].drift is not None:
                return True
    return False


class PlaybookRuns:
    def __init__(self, engine):
        self.engine = engine
        self.started = 0

    def full_apply(self, cs, item: Item) -> bool:
        return full_apply(self.engine.by_kind, cs, item)

    def run(self, cs, entry: WatchEntry, item: Item, objs: dict, changed: List[str], deleting: bool,
            full: bool = True) -> Tuple[RunResult, str]:
        """Runs the entry's playbook (its finalizer playbook when `deleting`) for the members `objs`; returns the
        result and, when a feature's guard cancelled the run, the guard's reason."""
        eng = self.engine
        if entry.status and not deleting:
            eng.conditions.set_many(cs, [(objs[m], "reconciling", "", "") for m in changed])
        extravars, guards = self.extravars(cs, entry, item, objs, deleting, full)
        playbook = entry.finalizer_playbook if deleting else entry.playbook
        timeout = entry.finalizer_timeout if deleting else entry.timeout
        self.started += 1
        eng.metrics.runs.labels(cs.name, entry.kind, os.path.basename(playbook)).inc()
        log.info("playbook run", extra=fields(cluster=cs.name, key=item.key, playbook=os.path.basename(playbook),
                                              reasons=sorted(item.reasons)[:5], members=len(objs), deleting=deleting))
        ident = "".join(ch if ch.isalnum() else "-" for ch in item.key)[-60:]
        res = eng.runner.run(playbook, extravars, timeout, ident,
                             cancel=lambda: eng.stop.is_set() or any(g() for g in guards))
        cancelled_by = ""
        if res.status == "canceled":
            cancelled_by = next((why for why in (g() for g in guards) if why), "")
            if cancelled_by:
                res.reason = cancelled_by
        self._observe(cs, entry, item, res)
        return res, cancelled_by

    def extravars(self, cs, entry: WatchEntry, item: Item, objs: dict, deleting: bool, full: bool) -> tuple:
        """The run's extra vars, and the guards the features set on it."""
        eng = self.engine
        refs = [object_ref(objs[m]) for m in sorted(objs)]
        extravars = dict(entry.vars)
        extravars.update({
            "kubeconfig": cs.kubeconfig, "fabric_cluster": cs.name, "fabric_key": item.key,
            "fabric_object": refs[0] if (len(refs) == 1 and not entry.grouped) else None,
            "fabric_objects": refs, "fabric_deleting": deleting, "fabric_mode": eng.mode,
            "fabric_full_apply": full,
        })
        # a group of every Node and Pod: a ref per member would slow every run's start, and the playbook lists them itself
        if not entry.objects:
            del extravars["fabric_objects"]
        extravars.update(eng.mode_spec.run_vars())
        guards = []
        for feature in eng.features:
            more, guard = feature.run_context(cs)
            extravars.update(more)
            if guard is not None:
                guards.append(guard)
        return extravars, guards

    def _observe(self, cs, entry: WatchEntry, item: Item, res: RunResult) -> None:
        """The run's metrics and its "playbook done" line."""
        metrics = self.engine.metrics
        result = "ok" if res.ok else "failed"
        metrics.reconcile.labels(cs.name, entry.kind, result).observe(res.duration)
        mode = "warm" if res.warm else "cold"
        metrics.runner_starts.labels(mode).inc()
        if res.spawn_seconds is not None:
            metrics.spawn.labels(mode).observe(res.spawn_seconds)
        metrics.changed_tasks.labels(cs.name, entry.kind).inc(res.changed)
        log.info("playbook done", extra=fields(
            cluster=cs.name, key=item.key, result=result, seconds=round(res.duration, 3), changed=res.changed,
            message=res.message if not res.ok else "",
            spawn=round(res.spawn_seconds, 3) if res.spawn_seconds is not None else None,
            slowest=list(res.slowest), timeline=[list(t) for t in res.timeline]))
