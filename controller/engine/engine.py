# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Engine: one work queue, one pool of workers and the periodic loops over one or more clusters, put together
from the engine's parts and the features its mode registers."""
from __future__ import annotations

import logging
import os
import socket
import threading
import time
from typing import Dict, List, Optional

from controller import hashing
from controller.engine import informers, loops
from controller.engine.cluster import ClusterState
from controller.engine.conditions import Conditions
from controller.engine.drift_check import DriftChecks
from controller.engine.fault_events import FaultEvents
from controller.engine.executor import Executor
from controller.engine.finalizers import Finalizers
from controller.engine.inputs import Inputs
from controller.engine.mode import Mode
from controller.engine.reactor import Reactor
from controller.engine.record import Records
from controller.engine.resync import resync
from controller.engine.run import PlaybookRuns
from controller.engine.state import StateStore
from controller.leader import LeaderElector
from controller.logs import fields
from controller.metrics import Metrics
from controller.runner import PlaybookRunner
from controller.watchmap import WatchEntry
from controller.workqueue import WorkQueue

log = logging.getLogger("controller.engine")


class Engine:
    """Serves the clusters `clusters` ({name: kubeconfig path, None in-cluster}) in `mode` (controller/modes.py;
    default: the controller mode's watching and Lease, no feature). Workers are shared: the concurrency bound is
    global."""

    def __init__(self, entries: List[WatchEntry], clusters: Dict[str, Optional[str]], collection_root: str,
                 runtime_dir: str, inventory: Optional[str] = None, workers: int = 2, debounce: float = 0.1,
                 leader_elect: bool = True, lease_duration: float = 15.0, lease_namespace: str = "liqo",
                 identity: Optional[str] = None, mode: Optional[Mode] = None, watch_map_path: Optional[str] = None,
                 metrics: Optional[Metrics] = None, state_configmap: bool = True, watch_timeout: int = 240,
                 max_retry_delay: float = 60.0, warm_runner: bool = True, warm_idle_exit: float = 0.0):
        self.mode_spec = mode or Mode()
        self.mode = self.mode_spec.name
        self.node_name = self.mode_spec.node_name
        self.entries = [e for e in entries if self.mode in e.modes]
        self.by_kind = {e.kind: e for e in self.entries}
        self.collection_root = collection_root
        self.watch_map_path = watch_map_path
        self.role_version = hashing.role_version(collection_root, watch_map_path)
        self.metrics = metrics or Metrics()
        self.queue = WorkQueue(debounce=debounce)
        self.runner = PlaybookRunner(runtime_dir, collection_root, inventory, warm=warm_runner,
                                     warm_idle_exit=warm_idle_exit, zygote_at_start=self.mode_spec.zygote_at_start)
        self.workers_n = max(1, workers)
        self.stop = threading.Event()
        self.identity = identity or f"{socket.gethostname()}-{os.getpid()}"
        self.watch_timeout = watch_timeout
        self.max_retry_delay = max_retry_delay
        # the parts: a change -> work (reactor, inputs), work -> a run and its record (executor, runs, records,
        # conditions, finalizers), the periodic checks (drift) and the persisted state
        self.inputs = Inputs(self)
        self.reactor = Reactor(self)
        self.executor = Executor(self)
        self.runs = PlaybookRuns(self)
        self.records = Records(self)
        self.conditions = Conditions()
        self.finalizers = Finalizers(self)
        self.drift = DriftChecks(self)
        self.faults = FaultEvents(self)
        self.state = StateStore(self, state_configmap and self.mode_spec.persists_state)
        self._threads: List[threading.Thread] = []
        self.clusters = {name: ClusterState(name, kubeconfig) for name, kubeconfig in clusters.items()}
        for e in self.entries:
            if not e.enabled:
                log.warning("watch entry disabled", extra=fields(kind=e.kind, reason=e.disabled_reason))
        self.features = list(self.mode_spec.features(self))
        if leader_elect and self.mode_spec.elects:
            self._elect(lease_namespace, lease_duration)

    # ------------------------------------------------------------------ the engine's verbs
    def kinds(self) -> List[str]:
        return informers.kinds(self.entries)

    def consider(self, cs: ClusterState, key: str, priority: int, reason: str, force: bool = False) -> bool:
        """Enqueues `key` unless its inputs equal the last successful apply (reactor.py)."""
        return self.reactor.consider(cs, key, priority, reason, force=force)

    def resync(self, cs: ClusterState, entry: Optional[WatchEntry] = None) -> tuple:
        """Considers every key of `cs` (of one entry); returns (keys, enqueued) (resync.py)."""
        return resync(self, cs, entry)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        for cs in self.clusters.values():
            for kind in self.kinds():
                inf = informers.make(self, cs, kind)
                cs.informers[kind] = inf
                inf.start()
            for feature in self.features:
                feature.start(cs)
            if cs.leader:
                cs.leader.start()
        threads = [(self.executor.worker, (), f"worker-{i}") for i in range(self.workers_n)]
        threads += [(loops.resync_loop, (self,), "resync"), (loops.drift_loop, (self,), "drift"),
                    (loops.state_loop, (self,), "state")]
        if self.faults.entries():
            threads.append((self.faults.loop, (), "fault-events"))
        for feature in self.features:
            period = feature.tick_period()
            if period > 0:
                threads.append((loops.feature_loop, (self, feature, period), feature.name.replace(" ", "-")))
        for target, args, name in threads:
            t = threading.Thread(target=target, args=args, name=name, daemon=True)
            t.start()
            self._threads.append(t)

    def shutdown(self, timeout: float = 10.0) -> None:
        for feature in reversed(self.features):
            feature.stop()
        self.stop.set()
        self.queue.close()
        self.faults.wake()
        for cs in self.clusters.values():
            for inf in cs.informers.values():
                inf.close()
        try:
            self.state.flush(force=True)
        except Exception:  # pylint: disable=broad-except
            pass
        deadline = time.monotonic() + timeout
        for t in self._all_threads():
            t.join(max(0.1, deadline - time.monotonic()))
        for cs in self.clusters.values():
            if cs.leader and cs.leader.is_alive():
                cs.leader.join(max(0.1, deadline - time.monotonic()))
        self.conditions.close()
        self.runner.close()   # the warm runner's zygote (and any run it still has)

    def ready(self) -> tuple:
        detail = {c: {k: i.synced.is_set() for k, i in cs.informers.items()} for c, cs in self.clusters.items()}
        ok = all(all(v.values()) for v in detail.values())
        return ok, {"ready": ok, "synced": detail}

    def healthy(self) -> tuple:
        alive = all(t.is_alive() for t in self._all_threads()) and not self.stop.is_set()
        return alive, {"healthy": alive, "queue": self.queue.depth(), "running": self.queue.running(),
                       "leader": {c: cs.acting() for c, cs in self.clusters.items()}}

    def _all_threads(self) -> List[threading.Thread]:
        return self._threads + [t for f in self.features for t in f.threads()]

    # ------------------------------------------------------------------ the Lease
    def _elect(self, lease_namespace: str, lease_duration: float) -> None:
        """A Lease elector per cluster: this replica acts on a cluster while it holds the cluster's Lease."""
        lease = self.mode_spec.lease(lease_namespace)
        for cs in self.clusters.values():
            cs.leader = LeaderElector(
                cs.api, self.identity, self.stop, name=lease.name, namespace=lease.namespace,
                duration=lease_duration, on_change=lambda on, c=cs: self._leadership(c, on), retry=lease.retry,
                holder_gone=(lambda h, c=cs: lease.holder_gone(c, h)) if lease.holder_gone else None,
                owner=(lambda c=cs: lease.owner(c)) if lease.owner else None)

    def _leadership(self, cs: ClusterState, leading: bool) -> None:
        self.metrics.leader.labels(cs.name).set(1 if leading else 0)
        if leading:
            threading.Thread(target=self._on_lead, args=(cs,), daemon=True).start()
        elif not self.stop.is_set():
            for feature in reversed(self.features):
                feature.leading(cs, False)
        self.queue.wake()

    def _on_lead(self, cs: ClusterState) -> None:
        for feature in self.features:
            feature.leading(cs, True)
        self.state.load(cs)
        for inf in cs.informers.values():
            inf.synced.wait(30)
        self.resync(cs)
