# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine's periodic loops, a thread each: the resync (and the role version, re-read every 30 s), the drift
checks, the state's flush, and each feature's tick. The resync and drift loops wake every 0.5 s and run what is due
on the clusters this replica acts on."""
from __future__ import annotations

import logging
import time
from typing import Dict

from controller import hashing
from controller.logs import fields

log = logging.getLogger("controller.engine")
ROLE_VERSION_PERIOD = 30.0


def due(last: dict, k, period: float, now: float) -> bool:
    """Whether `k` is due (its first call only starts its period)."""
    if k not in last:
        last[k] = now
        return False
    if now - last[k] >= period:
        last[k] = now
        return True
    return False


def resync_loop(engine) -> None:
    last: Dict[tuple, float] = {}
    while not engine.stop.wait(0.5):
        now = time.monotonic()
        rv = hashing.role_version(engine.collection_root, engine.watch_map_path) if due(
            last, ("rv",), ROLE_VERSION_PERIOD, now) else None
        if rv and rv != engine.role_version:
            log.info("role version changed: everything is re-applied", extra=fields(role_version=rv))
            engine.role_version = rv
            for cs in engine.clusters.values():
                cs.hash_memo.clear()
        for cs in engine.clusters.values():
            if not cs.acting():
                continue
            for e in engine.entries:
                if e.playbook and e.enabled and e.resync > 0 and due(last, (cs.name, e.kind), e.resync, now):
                    n, enq = engine.resync(cs, e)
                    if n:
                        log.info("resync", extra=fields(cluster=cs.name, kind=e.kind, keys=n, enqueued=enq))


def drift_loop(engine) -> None:
    last: Dict[tuple, float] = {}
    while not engine.stop.wait(0.5):
        now = time.monotonic()
        for cs in engine.clusters.values():
            if not cs.acting():
                continue
            for e in engine.entries:
                if e.drift and e.enabled and due(last, (cs.name, e.kind), e.drift.period, now):
                    engine.drift.check(cs, e)


def state_loop(engine) -> None:
    for cs in engine.clusters.values():
        if cs.leader is None:   # no Lease to wait for: the state is this replica's now
            engine.state.load(cs)
    while not engine.stop.wait(1.0):
        engine.state.flush()


def feature_loop(engine, feature, period: float) -> None:
    while not engine.stop.wait(period):
        try:
            feature.tick()
        except Exception as exc:  # pylint: disable=broad-except
            log.warning("%s check failed", feature.name, extra=fields(error=str(exc)))
