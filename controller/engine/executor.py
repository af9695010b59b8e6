# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The executor: the workers taking items from the work queue. An item whose key a feature registered (its
key_prefix) is that feature's; any other reconciles its work key: finalizers, the playbook run, its record."""
from __future__ import annotations

import logging

from controller.logs import fields
from controller.workqueue import PRIO_RESYNC, Item

log = logging.getLogger("controller.engine")


class Executor:
    def __init__(self, engine):
        self.engine = engine

    def eligible(self, item: Item) -> bool:
        """Whether a worker may take `item` now: its cluster's Lease is held, or a feature lets a standby run."""
        cs = self.engine.clusters.get(item.cluster)
        if cs is None:
            return False
        if cs.acting():
            return True
        return any(f.standby_runs(cs) for f in self.engine.features)

    def worker(self) -> None:
        eng = self.engine
        while not eng.stop.is_set():
            item = eng.queue.get(timeout=1.0, eligible=self.eligible)
            if item is None:
                continue
            eng.metrics.queue_depth.set(eng.queue.depth())
            eng.metrics.queue_running.set(eng.queue.running())
            try:
                self.process(item)
            except Exception as exc:  # pylint: disable=broad-except
                log.exception("work item failed", extra=fields(key=item.key, cluster=item.cluster, error=str(exc)))
                self.retry(item)
            finally:
                eng.queue.done(item)
                eng.metrics.queue_running.set(eng.queue.running())

    def retry(self, item: Item) -> None:
        """Enqueues `item` again, forced, after an exponential backoff (1 s ... max_retry_delay)."""
        attempts = item.attempts + 1
        delay = min(self.engine.max_retry_delay, 0.5 * 2 ** min(attempts, 10))
        self.engine.queue.add(item.key, lock=item.lock, cluster=item.cluster, priority=PRIO_RESYNC, reason="retry",
                              force=True, delay=delay, attempts=attempts)

    def process(self, item: Item) -> None:
        cs = self.engine.clusters[item.cluster]
        feature = next((f for f in self.engine.features if f.key_prefix and item.key.startswith(f.key_prefix)), None)
        if feature is not None:
            feature.process(cs, item)
            return
        self.reconcile(cs, item)

    def reconcile(self, cs, item: Item) -> None:
        eng = self.engine
        entry, objs, hashes = eng.inputs.current(cs, item.key)
        if entry is None:
            return
        eng.metrics.queue_wait.labels(entry.kind).observe(max(0.0, item.wait))
        why = eng.inputs.needs(cs, entry, item.key, objs, hashes)
        if not why and not item.force:
            eng.metrics.skipped.labels(cs.name, entry.kind, "hash").inc()
            return
        if not objs and not entry.grouped:
            return
        # finalizers: per-object keys only (checked by the watch map)
        if entry.finalizer and objs:
            obj = next(iter(objs.values()))
            meta = obj.get("metadata") or {}
            if meta.get("deletionTimestamp"):
                if entry.finalizer in (meta.get("finalizers") or []):
                    eng.finalizers.finalize(cs, entry, item, obj)
                return
            if entry.finalizer not in (meta.get("finalizers") or []):
                eng.finalizers.patch(cs, entry, obj, add=True)
        live = {m: o for m, o in objs.items() if not (o.get("metadata") or {}).get("deletionTimestamp")}
        live_hashes = {m: hashes[m] for m in live}
        applied = cs.applied.get(item.key) or {}
        changed_members = [m for m in live if applied.get(m) != live_hashes[m]]
        if item.force and not changed_members:
            changed_members = list(live)
        result, superseded = eng.runs.run(cs, entry, item, live, changed_members, deleting=False,
                                          full=eng.runs.full_apply(cs, item))
        if superseded:
            return   # nothing to record or retry: what cancelled it queued its own run
        eng.records.record(cs, entry, item, live, live_hashes, changed_members, result)
