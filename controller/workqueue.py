# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Per-key work queue: coalescing, trailing debounce, priorities, lock keys, retries with a delay.

- one pending item per key: events for the same key merge (reasons, highest priority, force flag);
- an event (re)arms a debounce window; a burst is still dispatched after `max_delay` from its first event;
- a key is never dispatched twice at once; an event that arrives while its key runs is kept and
  dispatched after done();
- at most one running item per lock key (e.g. one run at a time on one gateway host);
- among ready items the lowest priority number wins (changes before drift before periodic resyncs),
  then the oldest.
The clock is injectable so the unit tests drive time by hand.
"""
from __future__ import annotations

import dataclasses
import threading
import time
from typing import Callable, Optional

PRIO_EVENT = 0    # a watched object changed
PRIO_DRIFT = 1    # the dataplane differs from what the last run declared
PRIO_RESYNC = 2   # periodic resync, retries


@dataclasses.dataclass
class Item:
    key: str
    lock: str
    cluster: str
    priority: int
    ready_at: float
    first_at: float
    reasons: set = dataclasses.field(default_factory=set)
    force: bool = False      # run even if the input hash is unchanged (drift, retry after failure)
    attempts: int = 0        # consecutive failures, for the retry delay
    dispatched_at: float = 0.0

    @property
    def wait(self) -> float:
        return self.dispatched_at - self.first_at


class WorkQueue:
    def __init__(self, debounce: float = 0.2, max_delay: Optional[float] = None,
                 clock: Callable[[], float] = time.monotonic):
        self.debounce = debounce
        self.max_delay = max(1.0, 5 * debounce) if max_delay is None else max_delay
        self.clock = clock
        self._pending: dict[str, Item] = {}
        self._running: dict[str, Item] = {}
        self._locks: set[str] = set()
        self._cond = threading.Condition()
        self._closed = False

    # ------------------------------------------------------------------ producers
    def add(self, key: str, *, lock: Optional[str] = None, cluster: str = "", priority: int = PRIO_EVENT,
            reason: str = "", force: bool = False, delay: Optional[float] = None, attempts: Optional[int] = None) -> None:
        now = self.clock()
        with self._cond:
            item = self._pending.get(key)
            if item is None:
                first = now
                base = now + (self.debounce if priority == PRIO_EVENT else 0.0)
                item = Item(key, lock or key, cluster, priority, base, first)
                self._pending[key] = item
            else:
                item.lock = lock or item.lock
                if priority == PRIO_EVENT:
                    item.ready_at = min(max(item.ready_at, now + self.debounce), item.first_at + self.max_delay)
                if priority < item.priority:
                    item.priority = priority
                    if priority != PRIO_EVENT:
                        item.ready_at = min(item.ready_at, now)
            if delay is not None:
                item.ready_at = max(item.ready_at, now + delay)
            if reason:
                item.reasons.add(reason)
            item.force = item.force or force
            if attempts is not None:
                item.attempts = max(item.attempts, attempts)
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def wake(self) -> None:
        """Re-evaluate eligibility (e.g. leadership changed)."""
        with self._cond:
            self._cond.notify_all()

    # ------------------------------------------------------------------ consumers
    def _pick(self, now: float, eligible) -> tuple[Optional[Item], Optional[float]]:
        best = None
        next_at = None
        for item in self._pending.values():
            if item.key in self._running or item.lock in self._locks or not eligible(item):
                continue
            if item.ready_at > now:
                next_at = item.ready_at if next_at is None else min(next_at, item.ready_at)
                continue
            if best is None or (item.priority, item.ready_at) < (best.priority, best.ready_at):
                best = item
        return best, next_at

    def get(self, timeout: Optional[float] = None, eligible: Callable[[Item], bool] = lambda item: True) -> Optional[Item]:
        """Blocks until an item can run; returns None on close or timeout."""
        deadline = None if timeout is None else self.clock() + timeout
        with self._cond:
            while not self._closed:
                now = self.clock()
                item, next_at = self._pick(now, eligible)
                if item is not None:
                    del self._pending[item.key]
                    self._running[item.key] = item
                    self._locks.add(item.lock)
                    item.dispatched_at = now
                    return item
                waits = [t - now for t in (next_at, deadline) if t is not None]
                if deadline is not None and now >= deadline:
                    return None
                self._cond.wait(max(0.001, min(waits)) if waits else None)
        return None

    def done(self, item: Item) -> None:
        with self._cond:
            self._running.pop(item.key, None)
            self._locks.discard(item.lock)
            self._cond.notify_all()

    # ------------------------------------------------------------------ introspection
    def depth(self) -> int:
        with self._cond:
            return len(self._pending)

    def running(self) -> int:
        with self._cond:
            return len(self._running)

    def pending_keys(self) -> list:
        with self._cond:
            return sorted(self._pending)

    def busy(self, key: str) -> bool:
        """True while `key` runs or waits with force: a drift check then has nothing to add (the run
        records a fresh manifest; checking the kernel meanwhile would only find the same drift again)."""
        with self._cond:
            item = self._pending.get(key)
            return key in self._running or bool(item and item.force)

    def idle(self) -> bool:
        with self._cond:
            return not self._pending and not self._running
