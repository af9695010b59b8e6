# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A resync: every key of a cluster (or of one entry) considered again, hash-checked, and the dataplane of a
drift-checked key looked at."""
from __future__ import annotations

from typing import Optional

from controller.watchmap import WatchEntry
from controller.workqueue import PRIO_RESYNC


def resync(engine, cs, entry: Optional[WatchEntry] = None) -> tuple:
    """Considers every key (of one entry, or all); returns (keys, enqueued).

    The input hash skips unchanged keys, but a key with a drift check also gets its dataplane looked
    at: the check runs now when a manifest is stored, and a key applied without one (state from an
    older controller) is reconciled by force once, which records it. A playbook that declares nothing
    (no dataplane) is not forced again on every resync."""
    with cs.lock:
        keys = [k for k, e in cs.key_entry.items() if entry is None or e is entry or e.key == entry.key]
    enq = 0
    for k in keys:
        if engine.reactor.consider(cs, k, PRIO_RESYNC, "resync"):
            enq += 1
            continue
        e = engine.drift.entry_of(cs, k)
        with cs.lock:
            checkable = e is not None and e.enabled and k in cs.applied and k not in cs.failures
            has_manifest = k in cs.manifests
            forced_before = k in cs.forced_for_manifest
        if not checkable:
            continue
        if has_manifest:
            enq += engine.drift.check(cs, e, keys=[k], trigger="resync")
        elif not forced_before and engine.reactor.consider(cs, k, PRIO_RESYNC,
                                                           "resync: dataplane never checked (no manifest)",
                                                           force=True):
            with cs.lock:
                cs.forced_for_manifest.add(k)
            enq += 1
    return len(keys), enq
