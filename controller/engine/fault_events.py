# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Drift checks as faults happen: the engine listens to the kernel of every namespace the stored manifests of its
drift-checked keys name (controller/kernel_events.py: links, addresses, routes, rules, nftables, wireguard-go and
health probe exits), and a notification there runs those keys' drift checks at once. A burst (a route table
flushed: one message per route) settles SETTLE seconds into one check, and a namespace is checked at most once
every MIN_INTERVAL, so the fabric's own runs (their keys are busy, so their checks are skipped) and unrelated
changes of a shared namespace (pods starting on a node) cost little. The periodic check stays as the safety net:
hosts this process cannot enter, a namespace it cannot listen in, a notification the kernel dropped."""
from __future__ import annotations

import logging
import threading
import time
from typing import Dict, Optional

from controller import drift
from controller.kernel_events import KernelEvents
from controller.logs import fields

log = logging.getLogger("controller.engine")

SETTLE = 0.1          # seconds a notification waits for the rest of its burst
MIN_INTERVAL = 0.5    # seconds between two checks of one namespace
SYNC_PERIOD = 1.0     # seconds between updates of the namespaces and processes listened to


class FaultEvents:
    def __init__(self, engine):
        self.engine = engine
        self.kernel = KernelEvents(self._notified)
        self.cv = threading.Condition()
        self.pending: Dict[Optional[str], tuple] = {}    # namespace -> (first notification, what it said)
        self.last_check: Dict[Optional[str], float] = {}

    def entries(self) -> list:
        return [e for e in self.engine.entries if e.drift is not None and e.drift.events and e.enabled]

    def wanted(self) -> Dict[Optional[str], Dict[int, str]]:
        """The namespaces (and processes) of the applied, drift-checked keys of the clusters this replica acts on."""
        if not self.entries():
            return {}
        out: Dict[Optional[str], Dict[int, str]] = {}
        for cs in self.engine.clusters.values():
            if not cs.acting():
                continue
            with cs.lock:
                manifests = [m for k, m in cs.manifests.items() if k in cs.applied]
            for m in manifests:
                for ns, pids in drift.watch_points(m).items():
                    out.setdefault(ns, {}).update(pids)
        return out

    def wake(self) -> None:
        """Ends the loop's wait at once (the engine is stopping: the loop sees its stop event)."""
        with self.cv:
            self.cv.notify_all()

    def _notified(self, netns: Optional[str], what: str) -> None:
        with self.cv:
            self.pending.setdefault(netns, (time.monotonic(), what))
            self.cv.notify()

    def loop(self) -> None:
        next_sync = 0.0
        try:
            while not self.engine.stop.is_set():
                now = time.monotonic()
                if now >= next_sync:
                    try:
                        self.kernel.watch(self.wanted())
                    except Exception as exc:  # pylint: disable=broad-except
                        log.warning("kernel notifications not updated", extra=fields(error=str(exc)))
                    next_sync = now + SYNC_PERIOD
                due, wait = self._due(now)
                for ns, what in due:
                    self.check(ns, what)
                with self.cv:
                    if self.pending and not wait:
                        continue        # notified meanwhile
                    timeout = max(0.0, min(next_sync - time.monotonic(), 0.5))
                    self.cv.wait(min(timeout, wait) if wait else timeout)
        finally:
            self.kernel.close()

    def _due(self, now: float) -> tuple:
        """The namespaces to check now, and how long until the next one is due (0: none pending)."""
        due, wait = [], 0.0
        with self.cv:
            for ns, (first, what) in list(self.pending.items()):
                at = max(first + SETTLE, self.last_check.get(ns, float("-inf")) + MIN_INTERVAL)
                if at <= now:
                    due.append((ns, what))
                    del self.pending[ns]
                    self.last_check[ns] = now
                else:
                    wait = at - now if not wait else min(wait, at - now)
        return due, wait

    def check(self, netns: Optional[str], what: str) -> int:
        """Runs the drift checks of every applied key with a target in `netns`; returns the keys enqueued. A key
        that runs (or waits to, forced) is checked again once it is done: the fault may have come after its
        run read the kernel."""
        eng, found, busy = self.engine, 0, False
        entries = self.entries()
        trigger = f"{netns or 'own namespace'}: {what}"
        for cs in eng.clusters.values():
            if not cs.acting():
                continue
            with cs.lock:
                keys = [k for k, m in cs.manifests.items()
                        if k in cs.applied and netns in drift.watch_points(m, with_pids=False)]
            by_entry: dict = {}
            for k in keys:
                e = eng.drift.entry_of(cs, k)
                if e in entries:
                    by_entry.setdefault(id(e), (e, []))[1].append(k)
                    busy = busy or eng.queue.busy(k)
            for e, ks in by_entry.values():
                found += eng.drift.check(cs, e, keys=ks, trigger=trigger)
        if busy:
            with self.cv:
                self.pending.setdefault(netns, (time.monotonic(), what))
        return found
