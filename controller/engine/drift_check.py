# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The drift check of applied keys: the entry's `drift` function reads the kernel back against the key's stored
manifest (controller/drift.py); a difference enqueues a forced reconcile at drift priority, a check that cannot read
the kernel turns the key's objects Degraded (DriftCheckFailed) until one reads it again."""
from __future__ import annotations

import logging
from typing import List, Optional

from controller import manifest as mf
from controller.logs import fields
from controller.watchmap import WatchEntry
from controller.workqueue import PRIO_DRIFT

log = logging.getLogger("controller.engine")


class DriftChecks:
    def __init__(self, engine):
        self.engine = engine

    def entry_of(self, cs, key: str) -> Optional[WatchEntry]:
        """The entry whose drift check covers `key`: a group key is shared by several kinds (Node and Pod
        events make one overlay key) and the first kind seen is not necessarily the one with the check."""
        with cs.lock:
            first = cs.key_entry.get(key)
        if first is None or first.drift is not None:
            return first
        return next((e for e in self.engine.entries if e.drift is not None and e.playbook == first.playbook
                     and e.key == first.key and e.grouped and first.grouped), None)

    def check(self, cs, entry: WatchEntry, keys: Optional[List[str]] = None, trigger: str = "period") -> int:
        """Runs the entry's drift check on its applied keys (or `keys`); enqueues a forced reconcile of each
        key whose kernel differs. A check that cannot read the kernel marks the key's objects Degraded
        (reason DriftCheckFailed) instead of passing. `trigger` says what started it (the period, a resync, a
        kernel notification). Returns the number of keys enqueued."""
        eng = self.engine
        with cs.lock:
            todo = [(k, m) for k, m in cs.manifests.items()
                    if self.entry_of(cs, k) is entry and k in cs.applied and k not in cs.failures
                    and (keys is None or k in keys) and not eng.queue.busy(k)]
        found = 0
        for key, manifest in todo:
            eng.metrics.drift_checks.labels(cs.name, entry.kind).inc()
            try:
                diffs = entry.drift.call(manifest, {"cluster": cs.name, "key": key})
            except Exception as exc:  # pylint: disable=broad-except
                diffs = [mf.CheckFailure(f"drift check failed: {exc}")]
            unreadable = mf.failures(diffs)
            drifted = [d for d in diffs if not isinstance(d, mf.CheckFailure)]
            self._report_unreadable(cs, entry, key, unreadable)
            if drifted:
                found += 1
                eng.metrics.drift.labels(cs.name, entry.kind).inc()
                log.info("drift detected", extra=fields(cluster=cs.name, key=key, differences=drifted[:10],
                                                        trigger=trigger))
                eng.reactor.consider(cs, key, PRIO_DRIFT, "drift: " + "; ".join(drifted[:3]), force=True)
        return found

    def _report_unreadable(self, cs, entry: WatchEntry, key: str, unreadable: List[str]) -> None:
        """Reports a drift check that could not read the kernel (and its recovery)."""
        eng = self.engine
        with cs.lock:
            was = key in cs.drift_unreadable
            if unreadable:
                cs.drift_unreadable[key] = list(unreadable)
            else:
                cs.drift_unreadable.pop(key, None)
        if not unreadable and not was:
            return
        if unreadable:
            eng.metrics.drift_failed.labels(cs.name, entry.kind).inc()
            log.warning("drift check cannot read the dataplane", extra=fields(cluster=cs.name, key=key,
                                                                              reasons=unreadable[:10]))
        if not entry.status:
            return
        objs = eng.inputs.current(cs, key)[1]
        if unreadable:
            msg = "drift check cannot read the dataplane: " + "; ".join(unreadable[:3])
            eng.conditions.set_many(cs, [(o, "degraded", msg, "DriftCheckFailed") for o in objs.values()])
        else:
            eng.conditions.set_many(cs, [(o, "ready", "drift check reads the dataplane again", "Applied")
                                         for o in objs.values()])
