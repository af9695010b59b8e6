# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Storage version migration at startup: the replica that takes a cluster's Lease (or, without leader election,
the controller as it starts) rewrites the objects of the networking.liqo.io CRDs whose ``status.storedVersions``
lists more than their storage version, then trims it (module_utils/api/storage_migration.py, the logic of
``liqo.fabric.migrate_storage`` too). Idempotent: once trimmed, a CRD is read and left alone, so every later start
costs one list of the CRDs.

It runs in a thread of its own, beside the engine's work. A migration that fails (the conversion webhook not
serving yet: the in-cluster webhook is served by these replicas, whose Service may have no ready endpoint in the
first seconds) is tried again every ``retry`` seconds while this replica leads; a lost Lease or the engine's stop
ends it."""
from __future__ import annotations

import logging
import threading
from typing import Dict, List

from controller.engine.feature import Feature
from controller.library import api_storage_migration as migration
from controller.library import kube_client, kube_rest

log = logging.getLogger("controller.storage_migration")
# the fabric's CRDs by name: the controller may read those (deploy/controller/rbac.yaml), not list every CRD
CRDS = sorted("%s.%s" % (plural, kube_client.GROUP) for plural in kube_client.PLURALS.values())


class StorageMigration(Feature):
    name = "storage migration"

    def __init__(self, engine, retry: float = 10.0):
        self.engine = engine
        self.retry = retry
        self._threads: Dict[str, threading.Thread] = {}
        self._leading: Dict[str, threading.Event] = {}  # cluster -> set while this replica leads it
        self.done: Dict[str, list] = {}                 # cluster -> the report of its finished migration

    def start(self, cs) -> None:
        if cs.leader is None:  # no leader election: this controller acts on the cluster from its start
            self.leading(cs, True)

    def leading(self, cs, leading: bool) -> None:
        event = self._leading.setdefault(cs.name, threading.Event())
        if not leading:
            event.clear()
            return
        event.set()
        running = self._threads.get(cs.name)
        if cs.name in self.done or (running and running.is_alive()):
            return
        t = threading.Thread(target=self._run, args=(cs, event), name=f"storage-migration-{cs.name}", daemon=True)
        self._threads[cs.name] = t
        t.start()

    def _run(self, cs, leading: threading.Event) -> None:
        while leading.is_set() and not self.engine.stop.is_set():
            try:
                report = migration.migrate(cs.api, kube_client.GROUP, CRDS)
            except (migration.MigrationError, kube_rest.ApiError) as exc:
                log.warning("storage migration failed, tried again", extra={"fields": {
                    "cluster": cs.name, "error": str(exc), "retry_seconds": self.retry}})
                self.engine.stop.wait(self.retry)
                continue
            self.done[cs.name] = report
            changed = [e for e in report if e["changed"]]
            log.info("storage migration done", extra={"fields": {
                "cluster": cs.name, "objects": sum(e["objects"] for e in changed),
                "crds": {e["name"]: [e["stored_versions_before"], e["stored_versions"]] for e in changed}}})
            return

    def threads(self) -> List[threading.Thread]:
        return []  # a finished migration's thread is not a dead worker: /healthz does not count it
