# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a run leaves behind: the applied hashes of the members it applied (per object when a group's failed task
returned `errors`), the key's dataplane manifest, the failure count the retry reads, and the members' status."""
from __future__ import annotations

import os
from typing import List

from controller import manifest as mf
from controller.engine.inputs import applied_repr
from controller.runner import RunResult
from controller.watchmap import WatchEntry
from controller.workqueue import Item


def supersede(cs, key: str, manifest) -> None:
    """A node's overlay is one whole state: the newest run that applied it (a gateway event's
    reconcile_gateway too) replaces that node's overlay target in every other key's manifest, so the
    overlay key's drift check compares the kernel with what was applied last. Caller holds cs.lock."""
    where = mf.target_place
    newest = {where(t): t for t in mf.as_targets(manifest) if t.get("kind") == "overlay"}
    if not newest:
        return
    for other, old in list(cs.manifests.items()):
        if other == key:
            continue
        targets = mf.as_targets(old)
        if any(t.get("kind") == "overlay" and where(t) in newest for t in targets):
            cs.manifests[other] = [newest.get(where(t), t) if t.get("kind") == "overlay" else t for t in targets]


def outcomes(objs: dict, res: RunResult) -> tuple:
    """(members applied, {member: (message, reason)} failed, per-object outcome?) of a run: a failed task's result
    with an `errors` map keyed `<namespace>/<name>` fails those members only."""
    errors = res.failed_result.get("errors") if not res.ok else None
    per_object = isinstance(errors, dict) and bool(errors)
    ok_members, failed = [], {}
    for m in objs:
        if res.ok:
            ok_members.append(m)
            continue
        ck = m.split("/", 1)[1]
        if per_object:
            if ck in errors:
                e = errors[ck] if isinstance(errors[ck], dict) else {"message": str(errors[ck])}
                failed[m] = (f"task '{res.failed_task}' failed for {ck}: {e.get('message', '')}", e.get("reason") or "")
            else:
                ok_members.append(m)
        else:
            failed[m] = (res.message, res.reason or "ReconcileFailed")
    return ok_members, failed, per_object


class Records:
    def __init__(self, engine):
        self.engine = engine

    def record(self, cs, entry: WatchEntry, item: Item, objs: dict, hashes: dict, changed: List[str],
               res: RunResult) -> None:
        ok_members, failed, per_object = outcomes(objs, res)
        with cs.lock:
            if res.ok or per_object:
                if entry.status or not entry.grouped:  # remembered per member
                    rep = {m: h for m, h in (cs.applied.get(item.key) or {}).items() if m in objs and m not in failed}
                    rep.update({m: hashes[m] for m in ok_members})
                    cs.applied[item.key] = rep
                elif failed:
                    cs.applied.pop(item.key, None)
                else:
                    cs.applied[item.key] = applied_repr(entry, hashes)
                manifest = mf.manifest_from_stats(res.stats)
                if manifest is not None and mf.partial(res.stats) and item.key in cs.manifests:
                    # a run that applied some nodes only: their targets replace theirs, the others' stay
                    manifest = mf.merge_targets(cs.manifests[item.key], manifest)
                if manifest is not None:
                    cs.manifests[item.key] = manifest
                    supersede(cs, item.key, manifest)
                elif res.ok:
                    # this process saw the playbook declare no dataplane: a resync has nothing to record by force
                    cs.forced_for_manifest.add(item.key)
                cs.state_dirty = True
            if failed:
                cs.failures[item.key] = item.attempts + 1
            else:
                cs.failures.pop(item.key, None)
        if entry.status:
            todo = []
            for m in objs:
                if m in failed:
                    msg, reason = failed[m]
                    todo.append((objs[m], "degraded", msg, reason))
                elif m in changed or res.ok:
                    todo.append((objs[m], "ready", f"{os.path.basename(entry.playbook)}: {res.message}", "Applied"))
            self.engine.conditions.set_many(cs, todo)
        if failed:
            self.engine.executor.retry(item)
