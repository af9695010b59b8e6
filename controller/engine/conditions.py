# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The status the engine writes on its objects: the Ready/Reconciling/Degraded conditions (controller/status.py
merges them) and the Events of their transitions, several objects' at once."""
from __future__ import annotations

import concurrent.futures
import logging

from controller.logs import fields
from controller.watchmap import RESOURCES

log = logging.getLogger("controller.engine")


class Conditions:
    def __init__(self):
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="status")

    def set_many(self, cs, todo: list) -> None:
        """Writes each (object, phase, message, reason) of `todo` in parallel; a failed write is logged."""
        if not todo:
            return
        futures = [self._pool.submit(self.set, cs, *t) for t in todo]
        for fut in futures:
            try:
                fut.result()
            except Exception as exc:  # pylint: disable=broad-except
                log.warning("status write failed", extra=fields(cluster=cs.name, error=str(exc)))

    @staticmethod
    def set(cs, obj: dict, phase: str, message: str, reason: str) -> None:
        res = RESOURCES[obj.get("kind")]
        meta = obj["metadata"]
        transitions = cs.status.set_phase(res, meta.get("namespace"), meta["name"], phase, meta.get("generation"),
                                          message, reason, obj=obj)
        for ctype, _old, new in transitions:
            if ctype == "Ready" and new == "True":
                cs.status.event(obj, "Normal", "Reconciled", message or "applied")
            elif ctype == "Degraded" and new == "True":
                cs.status.event(obj, "Warning", "ReconcileFailed", message)

    def close(self) -> None:
        self._pool.shutdown(wait=False)
