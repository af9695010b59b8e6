# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine: informers -> input hashes -> work queue -> playbook runs -> status, Events, metrics.

One Engine serves one or more clusters (a ClusterState each: API client, informers, Lease, applied
hashes, dataplane manifests). Workers are shared: the concurrency bound is global.
"""
from __future__ import annotations

import concurrent.futures
import json
import logging
import os
import signal
import socket
import threading
import time
from typing import Dict, List, Optional, Set

from controller import drift as drift_mod
from controller import gateway_ha
from controller import key_rotation
from controller import peer_health
from controller import hashing
from controller.kubeapi import ApiError, ClusterAPI, Informer, NamespacedInformers, obj_key
from controller.leader import LeaderElector
from controller.metrics import Metrics
from controller.node_repoint import NodeRepoint
from controller.runner import PlaybookRunner, RunResult
from controller.status import StatusWriter
from controller.watchmap import RESOURCES, WatchEntry, get_field
from controller.workqueue import PRIO_DRIFT, PRIO_EVENT, PRIO_RESYNC, Item, WorkQueue

log = logging.getLogger("controller.engine")
# a gateway standby's run cancelled because its pod became the active one
SUPERSEDED = "SupersededByActive"

STATE_CONFIGMAP = "liqo-fabric-controller-state"
STATE_KEY = "state.json"


def _f(**kw) -> dict:
    return {"fields": kw}


def member_id(kind: str, obj: dict) -> str:
    return f"{kind}/{obj_key(obj)}"


def object_ref(obj: dict) -> dict:
    meta = obj.get("metadata") or {}
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "namespace": meta.get("namespace"),
            "name": meta.get("name"), "uid": meta.get("uid"), "generation": meta.get("generation")}


def _secret_transform(obj: dict) -> dict:
    """Secrets are cached as a digest only: their data never stays in the controller's memory."""
    meta = obj.get("metadata") or {}
    return {"kind": "Secret", "apiVersion": "v1",
            "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace"),
                         "resourceVersion": meta.get("resourceVersion"), "uid": meta.get("uid")},
            "digest": hashing.secret_digest(obj)}


# metadata every cached object keeps (keys, hashes' memo, finalizers, deletion, related-object labels)
_META_KEPT = ("name", "namespace", "uid", "resourceVersion", "generation", "labels", "deletionTimestamp", "finalizers")
# kinds with one cached object per node or pod: only the fields the watch map reads are kept (docs/scale.md)
SLIM_KINDS = ("Node", "Pod")


def _slim_transform(paths: List[str]):
    """A cache transform keeping metadata's keys (_META_KEPT) and the fields at `paths` (dotted) only: a real
    Node's images and conditions, a Pod's containers and status are most of its size and read by nothing here."""
    paths = sorted({p for p in paths if p})

    def transform(obj: dict) -> dict:
        meta = obj.get("metadata") or {}
        out = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
               "metadata": {k: meta[k] for k in _META_KEPT if k in meta}}
        for path in paths:
            parts = path.split(".")
            cur, dst = obj, out
            for i, part in enumerate(parts):
                if not isinstance(cur, dict) or part not in cur:
                    break
                cur = cur[part]
                if i == len(parts) - 1:
                    dst[part] = cur
                else:
                    dst = dst.setdefault(part, {})
                    if not isinstance(dst, dict):
                        break
        return out
    return transform


class ClusterState:
    def __init__(self, engine: "Engine", name: str, kubeconfig: Optional[str]):
        self.engine = engine
        self.name = name
        self.kubeconfig = kubeconfig
        self.api = ClusterAPI(name, kubeconfig)
        self.status = StatusWriter(self.api)
        self.informers: Dict[str, Informer] = {}
        self.leader: Optional[LeaderElector] = None
        self.lock = threading.RLock()
        self.members: Dict[str, Dict[str, tuple]] = {}   # work key -> {member id: (kind, cache key)}
        self.key_entry: Dict[str, WatchEntry] = {}
        self.applied: Dict[str, dict] = {}                # work key -> applied repr (see Engine.applied_repr)
        self.manifests: Dict[str, object] = {}            # work key -> dataplane manifest
        self.failures: Dict[str, int] = {}
        self.drift_unreadable: Dict[str, List[str]] = {}  # work key -> what its last drift check could not read
        self.forced_for_manifest: Set[str] = set()        # keys a resync already ran by force to record a manifest
        self.epoch = 0                                    # bumped when related objects / Secrets change
        self._memo: Dict[tuple, str] = {}
        self.state_dirty = False
        self.state_loaded = False

    def acting(self) -> bool:
        return self.leader is None or self.leader.is_leader()

    def obj(self, kind: str, key: str) -> Optional[dict]:
        inf = self.informers.get(kind)
        return inf.cache.get(key) if inf else None


class Engine:
    def __init__(self, entries: List[WatchEntry], clusters: Dict[str, Optional[str]], collection_root: str,
                 runtime_dir: str, inventory: Optional[str] = None, workers: int = 2, debounce: float = 0.1,
                 leader_elect: bool = True, lease_duration: float = 15.0, lease_namespace: str = "liqo",
                 identity: Optional[str] = None, node_mode: bool = False, node_name: str = "",
                 watch_map_path: Optional[str] = None, metrics: Optional[Metrics] = None,
                 state_configmap: bool = True, watch_timeout: int = 240, max_retry_delay: float = 60.0,
                 warm_runner: bool = True, warm_idle_exit: float = 0.0, mode: Optional[str] = None, namespaces: Optional[List[str]] = None,
                 gateway: Optional[dict] = None, repoint_in_process: bool = True, standby_warmup_delay: float = 0.0):
        # controller: the API side (with --inventory also the agentless dataplane); node: the node agent;
        # gateway: one gateway pod ({kind, namespace, name}), which applies the gateway role to itself
        self.mode = mode or ("node" if node_mode else "controller")
        node_mode = self.mode == "node"
        self.gateway = gateway if self.mode == "gateway" else None
        # namespaces served: Secrets are watched there only (RBAC grants them nowhere else); a gateway pod
        # watches its own namespace only
        self.namespaces = [self.gateway["namespace"]] if self.gateway else list(namespaces or [])
        self.pod_name = gateway_ha.own_pod_name() if self.gateway else ""
        self.entries = [e for e in entries if self.mode in e.modes]
        self.by_kind = {e.kind: e for e in self.entries}
        self.collection_root = collection_root
        self.watch_map_path = watch_map_path
        self.node_name = node_name
        self.metrics = metrics or Metrics()
        # the active gateway pod's live peer health: its thread runs while this pod is the active one
        self.health_collector = peer_health.HealthCollector() if self.gateway else None
        self._health: Dict[str, peer_health.GatewayHealth] = {}
        self._cluster_ids: Dict[str, str] = {}
        if self.health_collector:  # its own probe, not the Connection it watches, is the pod's liqo_peer_*
            self.metrics.live_peers = self.health_collector.samples
        self.queue = WorkQueue(debounce=debounce)
        # a gateway pod's standby warms up (its zygote, its first run) only `standby_warmup_delay` s after its start,
        # unless it takes the Lease first: both replicas of a new gateway start together, and on a node shared with
        # the active pod its warm-up took half the CPU of the active pod's first run (the path to Connected)
        self.standby_warmup_at = time.monotonic() + standby_warmup_delay if self.gateway else 0.0
        self.runner = PlaybookRunner(runtime_dir, collection_root, inventory, warm=warm_runner,
                                     warm_idle_exit=warm_idle_exit,
                                     zygote_at_start=not (self.gateway and standby_warmup_delay > 0))
        self.workers_n = max(1, workers)
        self.stop = threading.Event()
        self.identity = identity or f"{socket.gethostname()}-{os.getpid()}"
        self.state_configmap = state_configmap and self.mode == "controller"
        self.watch_timeout = watch_timeout
        self.max_retry_delay = max_retry_delay
        self.role_version = hashing.role_version(collection_root, watch_map_path)
        self.clusters: Dict[str, ClusterState] = {}
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="status")
        self._threads: List[threading.Thread] = []
        self.runs_started = 0
        self.skipped = 0
        self.last_loop = time.monotonic()
        for name, kubeconfig in clusters.items():
            cs = ClusterState(self, name, kubeconfig)
            if leader_elect and not node_mode:
                lease = ("liqo-fabric-controller", lease_namespace) if not self.gateway else (
                    f"liqo-fabric-gateway-{self.gateway['name']}", self.gateway["namespace"])
                cs.leader = LeaderElector(cs.api, self.identity, self.stop, name=lease[0], namespace=lease[1],
                                          duration=lease_duration, on_change=lambda on, c=cs: self._leadership(c, on),
                                          # a gateway's standby: a released Lease is taken within 0.25 s (failover)
                                          retry=0.25 if self.gateway else None,
                                          holder_gone=(lambda h, c=cs: self._holder_pod_going(c, h)) if self.gateway else None)
            self.clusters[name] = cs
        for e in self.entries:
            if not e.enabled:
                log.warning("watch entry disabled", extra=_f(kind=e.kind, reason=e.disabled_reason))
        gw_entry = self.by_kind.get("GatewayServer") or self.by_kind.get("GatewayClient")
        self.key_rotation = key_rotation.KeyRotation(self, os.path.dirname(gw_entry.playbook)) if (
            gw_entry and gw_entry.playbook) else None
        self.key_rotation_period = 10.0  # seconds between checks of the rotation schedules
        # node agent: its overlay re-pointed in process on a gateway pod's event, ahead of the playbook run
        pod_entry = self.by_kind.get("Pod") if node_mode and node_name and repoint_in_process else None
        self.repoint = {name: NodeRepoint(node_name, cs.kubeconfig, self.stop, options=pod_entry.vars)
                        for name, cs in self.clusters.items()} if pod_entry and pod_entry.enabled else {}

    # ================================================================== lifecycle
    def kinds(self) -> List[str]:
        kinds = [e.kind for e in self.entries]
        for e in self.entries:
            kinds += [r.kind for r in e.related]
            if e.secrets and e.enabled:
                kinds.append("Secret")
        return list(dict.fromkeys(kinds))

    def _label_selector(self, kind: str) -> Optional[str]:
        """The watch map's label_selector of the kind's entry in this mode (e.g. the gateway pods)."""
        return next((e.label_selector for e in self.entries if e.kind == kind and e.label_selector), None)

    def _field_selector(self, kind: str) -> Optional[str]:
        """Node agent: its Node and the Pods on it (unless a label selector picks pods on every node, e.g. the
        gateway pods its overlay leads to); gateway pod: its own GatewayServer/GatewayClient."""
        if self.mode == "node" and kind == "Pod" and self._label_selector(kind):
            return None
        if self.mode == "node" and self.node_name:
            return {"Pod": f"spec.nodeName={self.node_name}", "Node": f"metadata.name={self.node_name}"}.get(kind)
        if self.gateway and kind == self.gateway["kind"]:
            return f"metadata.name={self.gateway['name']}"
        return None

    def _informer(self, cs: ClusterState, kind: str):
        res = RESOURCES[kind]
        scoped = res.namespaced and self.namespaces and (kind == "Secret" or self.gateway is not None)

        transform = _secret_transform if kind == "Secret" else (
            _slim_transform(self._read_fields(kind)) if kind in SLIM_KINDS else None)

        def make(namespace):
            return Informer(cs.api, res, lambda k, t, o, old, c=cs: self._on_event(c, k, t, o, old), self.stop,
                            transform=transform, watch_timeout=self.watch_timeout,
                            field_selector=self._field_selector(kind), namespace=namespace,
                            label_selector=self._label_selector(kind))
        return NamespacedInformers([make(ns) for ns in self.namespaces]) if scoped else make(None)

    def _read_fields(self, kind: str) -> List[str]:
        """The fields of `kind`'s objects the watch map reads: inputs and Secret references of its entries,
        inputs of the related entries naming it, references from other entries' objects are on those."""
        paths: List[str] = []
        for e in self.entries:
            if e.kind == kind:
                paths += list(e.inputs) + list(e.secrets) + [r.ref for r in e.related if r.ref] + [p for p, _v in e.member_if]
            paths += [p for r in e.related if r.kind == kind for p in r.inputs]
        return paths

    def start(self) -> None:
        for cs in self.clusters.values():
            for kind in self.kinds():
                inf = self._informer(cs, kind)
                cs.informers[kind] = inf
                inf.start()
            if cs.leader:
                if self.gateway:  # a restarted container starts as a standby: no Service traffic, no overlay
                    gateway_ha.mark(cs.api, self.gateway["namespace"], self.pod_name, False)
                    self._cluster_id(cs)   # known before a takeover needs it
                cs.leader.start()
        for t in self.repoint.values():
            t.start()
            self._threads.append(t)
        for i in range(self.workers_n):
            t = threading.Thread(target=self._worker, name=f"worker-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        loops = [(self._resync_loop, "resync"), (self._drift_loop, "drift"), (self._state_loop, "state")]
        if self.key_rotation and self.key_rotation.enabled():
            loops.append((self._key_rotation_loop, "key-rotation"))
        for target, name in loops:
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)

    def shutdown(self, timeout: float = 10.0) -> None:
        if self.gateway:  # the Service and the overlay leave this pod before the Lease is released
            for cs in self.clusters.values():
                self._stop_health(cs)
                if cs.leader and cs.acting():   # the links first: this pod stops carrying traffic at once
                    gateway_ha.drop_links()
                    gateway_ha.mark(cs.api, self.gateway["namespace"], self.pod_name, False)
        self.stop.set()
        self.queue.close()
        for cs in self.clusters.values():
            for inf in cs.informers.values():
                inf.close()
        try:
            self._flush_states(force=True)
        except Exception:  # pylint: disable=broad-except
            pass
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.1, deadline - time.monotonic()))
        for cs in self.clusters.values():
            if cs.leader and cs.leader.is_alive():
                cs.leader.join(max(0.1, deadline - time.monotonic()))
        self._pool.shutdown(wait=False)
        self.runner.close()   # the warm runner's zygote (and any run it still has)

    def ready(self) -> tuple:
        detail = {c: {k: i.synced.is_set() for k, i in cs.informers.items()} for c, cs in self.clusters.items()}
        ok = all(all(v.values()) for v in detail.values())
        return ok, {"ready": ok, "synced": detail}

    def healthy(self) -> tuple:
        alive = all(t.is_alive() for t in self._threads) and not self.stop.is_set() and all(
            h.is_alive() for h in list(self._health.values()))   # an active gateway pod's probe thread too
        return alive, {"healthy": alive, "queue": self.queue.depth(), "running": self.queue.running(),
                       "leader": {c: cs.acting() for c, cs in self.clusters.items()}}

    # ================================================================== events
    def _on_event(self, cs: ClusterState, kind: str, etype: str, obj: dict, old: Optional[dict]) -> None:
        self.metrics.events.labels(cs.name, kind).inc()
        if kind == "Connection":
            self.metrics.connection(cs.name, obj, deleted=etype == "DELETED")
        entry = self.by_kind.get(kind)
        if kind == "Pod" and cs.name in self.repoint:
            self.repoint[cs.name].kick()
        if entry and entry.playbook and entry.enabled:
            key = entry.work_key(cs.name, obj, self.node_name)
            mid = member_id(kind, obj)
            with cs.lock:
                members = cs.members.setdefault(key, {})
                # an object the playbook cannot act on yet (a Pod without its IP: member_if) is not a member: its
                # event changes no hash and starts no run (it would hold back the run of its IP)
                if etype == "DELETED" or not entry.is_member(obj):
                    members.pop(mid, None)
                else:
                    members[mid] = (kind, obj_key(obj))
                cs.key_entry.setdefault(key, entry)
            self.consider(cs, key, PRIO_EVENT, f"{etype.lower()} {mid}")
        # owners of a related object / of a Secret
        for owner in self.entries:
            if not (owner.playbook and owner.enabled):
                continue
            if kind == "Secret" and owner.secrets:
                hits = self._secret_owners(cs, owner, obj)
            else:
                rels = [r for r in owner.related if r.kind == kind]
                if not rels:
                    continue
                hits = self._related_owners(cs, owner, rels, obj, old)
            if not hits:
                continue
            with cs.lock:
                cs.epoch += 1
            for o in hits:
                self.consider(cs, owner.work_key(cs.name, o, self.node_name), PRIO_EVENT,
                              f"related {kind}/{obj_key(obj)}")

    def _related_owners(self, cs: ClusterState, owner: WatchEntry, rels, obj: dict, old: Optional[dict]) -> List[dict]:
        inf = cs.informers.get(owner.kind)
        if inf is None:
            return []
        meta = obj.get("metadata") or {}
        out = []
        for cand in list(inf.cache.values()):
            cmeta = cand.get("metadata") or {}
            for r in rels:
                if r.namespace:
                    if cmeta.get("namespace") == meta.get("namespace"):
                        out.append(cand)
                        break
                elif r.labels:
                    if cmeta.get("namespace") != meta.get("namespace"):
                        continue
                    versions = [obj] + ([old] if old else [])
                    if any(all((cmeta.get("labels") or {}).get(lb) is not None and
                               (cmeta.get("labels") or {}).get(lb) == ((v.get("metadata") or {}).get("labels") or {}).get(lb)
                               for lb in r.labels) for v in versions):
                        out.append(cand)
                        break
                else:
                    ref = get_field(cand, r.ref)
                    if isinstance(ref, dict) and ref.get("name") == meta.get("name") and \
                            (ref.get("namespace") or cmeta.get("namespace")) == meta.get("namespace"):
                        out.append(cand)
                        break
        return out

    def _secret_owners(self, cs: ClusterState, owner: WatchEntry, secret: dict) -> List[dict]:
        inf = cs.informers.get(owner.kind)
        if inf is None:
            return []
        meta = secret.get("metadata") or {}
        return [c for c in list(inf.cache.values())
                if (c.get("metadata") or {}).get("namespace") == meta.get("namespace")
                and meta.get("name") in self._secret_names(owner, c)]

    @staticmethod
    def _secret_names(entry: WatchEntry, obj: dict) -> List[str]:
        names = []
        for path in entry.secrets:
            v = get_field(obj, path)
            if isinstance(v, dict):
                v = v.get("name")
            if isinstance(v, str) and v:
                names.append(v)
        return names

    # ================================================================== hashes
    def member_hash(self, cs: ClusterState, entry: WatchEntry, obj: dict) -> str:
        meta = obj.get("metadata") or {}
        memo_key = (entry.kind, meta.get("uid"), meta.get("resourceVersion"), cs.epoch)
        h = cs._memo.get(memo_key)  # pylint: disable=protected-access
        if h is not None:
            return h
        parts = [self.role_version, hashing.project(obj, entry.inputs)]
        ns = meta.get("namespace")
        if entry.secrets:
            sec = cs.informers.get("Secret")
            parts.append([(n, (sec.cache.get(f"{ns}/{n}") or {}).get("digest") if sec else None)
                          for n in self._secret_names(entry, obj)])
        for r in entry.related:
            inf = cs.informers.get(r.kind)
            if inf is None:
                continue
            if r.namespace:
                rel = sorted((obj_key(o), hashing.project(o, r.inputs)) for o in list(inf.cache.values())
                             if (o.get("metadata") or {}).get("namespace") == ns)
            elif r.labels:
                want = {lb: (meta.get("labels") or {}).get(lb) for lb in r.labels}
                rel = sorted((obj_key(o), hashing.project(o, r.inputs)) for o in list(inf.cache.values())
                             if (o.get("metadata") or {}).get("namespace") == ns and all(
                                 v is not None and ((o.get("metadata") or {}).get("labels") or {}).get(lb) == v
                                 for lb, v in want.items()))
            else:
                ref = get_field(obj, r.ref)
                rel = None
                if isinstance(ref, dict) and ref.get("name"):
                    o = inf.cache.get(f"{ref.get('namespace') or ns}/{ref['name']}")
                    rel = hashing.project(o, r.inputs) if o else None
            parts.append([r.kind, rel])
        h = hashing.digest(parts)
        if len(cs._memo) > 200000:  # pylint: disable=protected-access
            cs._memo.clear()  # pylint: disable=protected-access
        cs._memo[memo_key] = h  # pylint: disable=protected-access
        return h

    def current(self, cs: ClusterState, key: str) -> tuple:
        """(entry, {member id: object}, {member id: hash}) for a work key, from the caches."""
        with cs.lock:
            entry = cs.key_entry.get(key)
            members = dict(cs.members.get(key) or {})
        objs, hashes = {}, {}
        if entry is None:
            return None, objs, hashes
        for mid, (kind, ck) in members.items():
            o = cs.obj(kind, ck)
            if o is None:
                continue
            objs[mid] = o
            hashes[mid] = self.member_hash(cs, self.by_kind[kind], o)
        return entry, objs, hashes

    @staticmethod
    def applied_repr(entry: WatchEntry, hashes: Dict[str, str]) -> dict:
        """What is remembered of a successful run: per member (entries with status, so each object's
        outcome can be told apart) or one digest for the group (Nodes/Pods: thousands of members)."""
        if entry.status or not entry.grouped:
            return dict(hashes)
        return {"*": hashing.digest(sorted(hashes.items()))}

    def _needs(self, cs: ClusterState, entry: WatchEntry, key: str, objs: dict, hashes: dict) -> str:
        """Why this key needs work ('' = nothing to do)."""
        if entry.finalizer:
            for o in objs.values():
                fins = (o.get("metadata") or {}).get("finalizers") or []
                if (o.get("metadata") or {}).get("deletionTimestamp"):
                    if entry.finalizer in fins:
                        return "deleting"
                elif entry.finalizer not in fins:
                    return "finalizer"
        if not objs and not entry.grouped:
            return ""
        live = {m: h for m, h in hashes.items() if not (objs[m].get("metadata") or {}).get("deletionTimestamp")}
        if not live and not entry.grouped:
            return ""
        applied = cs.applied.get(key)
        if applied is None:
            return "new" if live or entry.grouped else ""
        return "" if applied == self.applied_repr(entry, live) else "changed"

    def consider(self, cs: ClusterState, key: str, priority: int, reason: str, force: bool = False) -> bool:
        """Enqueue `key` unless its inputs equal the last successful apply (hash skip)."""
        entry, objs, hashes = self.current(cs, key)
        if entry is None:
            return False
        if not force and not self._needs(cs, entry, key, objs, hashes):
            if not (not objs and not entry.grouped):
                self.skipped += 1
                self.metrics.skipped.labels(cs.name, entry.kind, "hash").inc()
            return False
        self.queue.add(key, lock=self._lock_for(cs, entry, key, objs), cluster=cs.name, priority=priority,
                       reason=reason, force=force)
        self.metrics.queue_depth.set(self.queue.depth())
        return True

    def _lock_for(self, cs: ClusterState, entry: WatchEntry, key: str, objs: dict) -> str:
        if not entry.lock:
            return key
        any_obj = next(iter(objs.values()), {"metadata": {}})
        return entry.lock_key(cs.name, any_obj, self.node_name)

    # ================================================================== workers
    def _eligible(self, item: Item) -> bool:
        cs = self.clusters.get(item.cluster)
        if cs is None:
            return False
        if cs.acting():
            return True
        # a gateway pod runs as a standby too: it keeps its tunnel built, unreachable (gateway_standby), once warm-up
        # is due
        return self.gateway is not None and time.monotonic() >= self.standby_warmup_at

    def _worker(self) -> None:
        while not self.stop.is_set():
            item = self.queue.get(timeout=1.0, eligible=self._eligible)
            self.last_loop = time.monotonic()
            if item is None:
                continue
            self.metrics.queue_depth.set(self.queue.depth())
            self.metrics.queue_running.set(self.queue.running())
            try:
                self._process(item)
            except Exception as exc:  # pylint: disable=broad-except
                log.exception("work item failed", extra=_f(key=item.key, cluster=item.cluster, error=str(exc)))
                self._retry(item)
            finally:
                self.queue.done(item)
                self.metrics.queue_running.set(self.queue.running())

    def _retry(self, item: Item) -> None:
        attempts = item.attempts + 1
        delay = min(self.max_retry_delay, 0.5 * 2 ** min(attempts, 10))
        self.queue.add(item.key, lock=item.lock, cluster=item.cluster, priority=PRIO_RESYNC, reason="retry",
                       force=True, delay=delay, attempts=attempts)

    def _process(self, item: Item) -> None:
        cs = self.clusters[item.cluster]
        if item.key.startswith(key_rotation.PREFIX):
            if self.key_rotation:
                self.key_rotation.run(cs, item.key)
            return
        entry, objs, hashes = self.current(cs, item.key)
        if entry is None:
            return
        self.metrics.queue_wait.labels(entry.kind).observe(max(0.0, item.wait))
        why = self._needs(cs, entry, item.key, objs, hashes)
        if not why and not item.force:
            self.skipped += 1
            self.metrics.skipped.labels(cs.name, entry.kind, "hash").inc()
            return
        if not objs and not entry.grouped:
            return
        # finalizers: per-object keys only (checked by the watch map)
        if entry.finalizer and objs:
            obj = next(iter(objs.values()))
            meta = obj.get("metadata") or {}
            if meta.get("deletionTimestamp"):
                if entry.finalizer in (meta.get("finalizers") or []):
                    self._finalize(cs, entry, item, obj)
                return
            if entry.finalizer not in (meta.get("finalizers") or []):
                self._patch_finalizers(cs, entry, obj, add=True)
        live = {m: o for m, o in objs.items() if not (o.get("metadata") or {}).get("deletionTimestamp")}
        live_hashes = {m: hashes[m] for m in live}
        applied = cs.applied.get(item.key) or {}
        changed_members = [m for m in live if applied.get(m) != live_hashes[m]]
        if item.force and not changed_members:
            changed_members = list(live)
        result = self._run(cs, entry, item, live, changed_members, deleting=False, full=self._full_apply(cs, item))
        if result.reason == SUPERSEDED:
            return   # nothing to record or retry: the active run is queued
        self._record(cs, entry, item, live, live_hashes, changed_members, result)

    def _full_apply(self, cs: ClusterState, item: Item) -> bool:
        """`fabric_full_apply` of a run: false lets a playbook apply only what the event changed (reconcile_overlay:
        the nodes whose planned state is not the one recorded after their last apply). True when the run is forced
        (drift, a retry after a failure), when no dataplane manifest of the key is stored yet (the first run records
        every target for the drift check), or when a deleted object of a drift-checked kind (a Node) left the key:
        a partial run keeps the other targets of the stored manifest, so a full run drops the deleted one's."""
        if item.force:
            return True
        with cs.lock:
            if item.key not in cs.manifests:
                return True
        for reason in item.reasons:
            if reason.startswith("deleted "):
                kind = reason.split(" ", 1)[1].split("/", 1)[0]
                if kind in self.by_kind and self.by_kind[kind].drift is not None:
                    return True
        return False

    def _run(self, cs: ClusterState, entry: WatchEntry, item: Item, objs: dict, changed: List[str],
             deleting: bool, full: bool = True) -> RunResult:
        if entry.status and not deleting:
            self._set_status_many(cs, [(objs[m], "reconciling", "", "") for m in changed])
        refs = [object_ref(objs[m]) for m in sorted(objs)]
        extravars = dict(entry.vars)
        extravars.update({
            "kubeconfig": cs.kubeconfig, "fabric_cluster": cs.name, "fabric_key": item.key,
            "fabric_object": refs[0] if (len(refs) == 1 and not entry.grouped) else None,
            "fabric_objects": refs, "fabric_deleting": deleting, "fabric_mode": self.mode,
            "fabric_full_apply": full,
        })
        if not entry.objects:   # a group of every Node and Pod: ~1,100 refs cost ~0.3 s of each run's start
            del extravars["fabric_objects"]
        if self.mode in ("node", "gateway"):
            extravars["fabric_node"] = self.node_name
        standby = self.gateway is not None and not cs.acting()
        if self.gateway:
            extravars["fabric_gateway"] = dict(self.gateway)
            extravars["fabric_gateway_standby"] = standby
        playbook = entry.finalizer_playbook if deleting else entry.playbook
        timeout = entry.finalizer_timeout if deleting else entry.timeout
        self.runs_started += 1
        self.metrics.runs.labels(cs.name, entry.kind, os.path.basename(playbook)).inc()
        log.info("playbook run", extra=_f(cluster=cs.name, key=item.key, playbook=os.path.basename(playbook),
                                          reasons=sorted(item.reasons)[:5], members=len(objs), deleting=deleting))
        ident = "".join(ch if ch.isalnum() else "-" for ch in item.key)[-60:]
        # a standby's run is cancelled when its pod takes the Lease: the active run (queued by _on_lead) must not
        # wait for it
        res = self.runner.run(playbook, extravars, timeout, ident,
                              cancel=lambda: self.stop.is_set() or (standby and cs.acting()))
        if standby and res.status == "canceled" and cs.acting():
            res.reason = SUPERSEDED
        result = "ok" if res.ok else "failed"
        self.metrics.reconcile.labels(cs.name, entry.kind, result).observe(res.duration)
        mode = "warm" if res.warm else "cold"
        self.metrics.runner_starts.labels(mode).inc()
        if res.spawn_seconds is not None:
            self.metrics.spawn.labels(mode).observe(res.spawn_seconds)
        self.metrics.changed_tasks.labels(cs.name, entry.kind).inc(res.changed)
        log.info("playbook done", extra=_f(cluster=cs.name, key=item.key, result=result, seconds=round(res.duration, 3),
                                           changed=res.changed, message=res.message if not res.ok else "",
                                           spawn=round(res.spawn_seconds, 3) if res.spawn_seconds is not None else None,
                                           slowest=list(res.slowest), timeline=[list(t) for t in res.timeline]))
        return res

    def _record(self, cs: ClusterState, entry: WatchEntry, item: Item, objs: dict, hashes: dict,
                changed: List[str], res: RunResult) -> None:
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
        with cs.lock:
            if res.ok or per_object:
                if entry.status or not entry.grouped:  # remembered per member
                    rep = {m: h for m, h in (cs.applied.get(item.key) or {}).items() if m in objs and m not in failed}
                    rep.update({m: hashes[m] for m in ok_members})
                    cs.applied[item.key] = rep
                elif failed:
                    cs.applied.pop(item.key, None)
                else:
                    cs.applied[item.key] = self.applied_repr(entry, hashes)
                manifest = drift_mod.manifest_from_stats(res.stats)
                if manifest is not None and drift_mod.partial(res.stats) and item.key in cs.manifests:
                    # a run that applied some nodes only: their targets replace theirs, the others' stay
                    manifest = drift_mod.merge_targets(cs.manifests[item.key], manifest)
                if manifest is not None:
                    cs.manifests[item.key] = manifest
                    self._supersede(cs, item.key, manifest)
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
            self._set_status_many(cs, todo)
        if failed:
            self._retry(item)

    @staticmethod
    def _supersede(cs: ClusterState, key: str, manifest) -> None:
        """A node's overlay is one whole state: the newest run that applied it (a gateway event's
        reconcile_gateway too) replaces that node's overlay target in every other key's manifest, so the
        overlay key's drift check compares the kernel with what was applied last. Caller holds cs.lock."""
        where = drift_mod.target_place
        newest = {where(t): t for t in drift_mod.as_targets(manifest) if t.get("kind") == "overlay"}
        if not newest:
            return
        for other, old in list(cs.manifests.items()):
            if other == key:
                continue
            targets = drift_mod.as_targets(old)
            if any(t.get("kind") == "overlay" and where(t) in newest for t in targets):
                cs.manifests[other] = [newest.get(where(t), t) if t.get("kind") == "overlay" else t for t in targets]

    def _set_status_many(self, cs: ClusterState, todo: list) -> None:
        if not todo:
            return
        futures = [self._pool.submit(self._set_status, cs, *t) for t in todo]
        for fut in futures:
            try:
                fut.result()
            except Exception as exc:  # pylint: disable=broad-except
                log.warning("status write failed", extra=_f(cluster=cs.name, error=str(exc)))

    def _set_status(self, cs: ClusterState, obj: dict, phase: str, message: str, reason: str) -> None:
        res = RESOURCES[obj.get("kind")]
        meta = obj["metadata"]
        transitions = cs.status.set_phase(res, meta.get("namespace"), meta["name"], phase, meta.get("generation"),
                                          message, reason, obj=obj)
        for ctype, old, new in transitions:
            if ctype == "Ready" and new == "True":
                cs.status.event(obj, "Normal", "Reconciled", message or "applied")
            elif ctype == "Degraded" and new == "True":
                cs.status.event(obj, "Warning", "ReconcileFailed", message)

    # ================================================================== finalizers
    def _patch_finalizers(self, cs: ClusterState, entry: WatchEntry, obj: dict, add: bool) -> None:
        res = RESOURCES[entry.kind]
        meta = obj["metadata"]
        for _attempt in range(8):
            fins = list(meta.get("finalizers") or [])
            if add == (entry.finalizer in fins):
                return
            fins = fins + [entry.finalizer] if add else [f for f in fins if f != entry.finalizer]
            body = {"metadata": {"finalizers": fins, "resourceVersion": meta.get("resourceVersion")}}
            try:
                self.api_patch(cs, res, meta.get("namespace"), meta["name"], body)
                return
            except ApiError as exc:
                if exc.status == 404:
                    return
                if exc.status != 409:
                    raise
            fresh = cs.api.get(res, meta.get("namespace"), meta["name"])
            if fresh is None:
                return
            meta = fresh["metadata"]

    @staticmethod
    def api_patch(cs: ClusterState, res, namespace, name, body) -> dict:
        return cs.api.request("PATCH", res.path(namespace, name), body=body, content_type="application/merge-patch+json")

    def _finalize(self, cs: ClusterState, entry: WatchEntry, item: Item, obj: dict) -> None:
        mid = member_id(entry.kind, obj)
        res = self._run(cs, entry, item, {mid: obj}, [], deleting=True)
        if res.ok:
            self._patch_finalizers(cs, entry, obj, add=False)
            with cs.lock:
                cs.applied.pop(item.key, None)
                cs.manifests.pop(item.key, None)
                cs.forced_for_manifest.discard(item.key)
                # a teardown that re-applied the nodes' overlay (without the gateway) declared it: newest wins
                self._supersede(cs, item.key, drift_mod.manifest_from_stats(res.stats) or [])
                cs.failures.pop(item.key, None)
                cs.state_dirty = True
            cs.status.event(obj, "Normal", "Finalized", f"{os.path.basename(entry.finalizer_playbook)}: {res.message}")
        else:
            if entry.status:
                self._set_status(cs, obj, "degraded", f"teardown: {res.message}", "TeardownFailed")
            self._retry(item)

    # ================================================================== periodic loops
    def resync(self, cs: ClusterState, entry: Optional[WatchEntry] = None) -> tuple:
        """Considers every key (of one entry, or all); returns (keys, enqueued).

        The input hash skips unchanged keys, but a key with a drift check also gets its dataplane looked
        at: the check runs now when a manifest is stored, and a key applied without one (state from an
        older controller) is reconciled by force once, which records it. A playbook that declares nothing
        (no dataplane) is not forced again on every resync."""
        with cs.lock:
            keys = [k for k, e in cs.key_entry.items() if entry is None or e is entry or e.key == entry.key]
        enq = 0
        for k in keys:
            if self.consider(cs, k, PRIO_RESYNC, "resync"):
                enq += 1
                continue
            e = self._drift_entry(cs, k)
            with cs.lock:
                checkable = e is not None and e.enabled and k in cs.applied and k not in cs.failures
                has_manifest = k in cs.manifests
                forced_before = k in cs.forced_for_manifest
            if not checkable:
                continue
            if has_manifest:
                enq += self.check_drift(cs, e, keys=[k])
            elif not forced_before and self.consider(cs, k, PRIO_RESYNC, "resync: dataplane never checked (no manifest)",
                                                     force=True):
                with cs.lock:
                    cs.forced_for_manifest.add(k)
                enq += 1
        return len(keys), enq

    def _resync_loop(self) -> None:
        last: Dict[tuple, float] = {}
        while not self.stop.wait(0.5):
            now = time.monotonic()
            self.last_loop = now
            rv = hashing.role_version(self.collection_root, self.watch_map_path) if self._due(last, ("rv",), 30, now) else None
            if rv and rv != self.role_version:
                log.info("role version changed: everything is re-applied", extra=_f(role_version=rv))
                self.role_version = rv
                for cs in self.clusters.values():
                    cs._memo.clear()  # pylint: disable=protected-access
            for cs in self.clusters.values():
                if not cs.acting():
                    continue
                for e in self.entries:
                    if e.playbook and e.enabled and e.resync > 0 and self._due(last, (cs.name, e.kind), e.resync, now):
                        n, enq = self.resync(cs, e)
                        if n:
                            log.info("resync", extra=_f(cluster=cs.name, kind=e.kind, keys=n, enqueued=enq))

    def _key_rotation_loop(self) -> None:
        """Enqueues the rotations of gateways whose key-rotation-period has passed (controller/key_rotation.py)."""
        while not self.stop.wait(self.key_rotation_period):
            try:
                self.key_rotation.check()
            except Exception as exc:  # pylint: disable=broad-except
                log.warning("key rotation check failed", extra=_f(error=str(exc)))

    @staticmethod
    def _due(last: dict, k, period: float, now: float) -> bool:
        if k not in last:
            last[k] = now
            return False
        if now - last[k] >= period:
            last[k] = now
            return True
        return False

    def _drift_entry(self, cs: ClusterState, key: str) -> Optional[WatchEntry]:
        """The entry whose drift check covers `key`: a group key is shared by several kinds (Node and Pod
        events make one overlay key) and the first kind seen is not necessarily the one with the check."""
        with cs.lock:
            first = cs.key_entry.get(key)
        if first is None or first.drift is not None:
            return first
        return next((e for e in self.entries if e.drift is not None and e.playbook == first.playbook
                     and e.key == first.key and e.grouped and first.grouped), None)

    def check_drift(self, cs: ClusterState, entry: WatchEntry, keys: Optional[List[str]] = None) -> int:
        """Runs the entry's drift check on its applied keys (or `keys`); enqueues a forced reconcile of each
        key whose kernel differs. A check that cannot read the kernel marks the key's objects Degraded
        (reason DriftCheckFailed) instead of passing. Returns the number of keys enqueued."""
        with cs.lock:
            todo = [(k, m) for k, m in cs.manifests.items()
                    if self._drift_entry(cs, k) is entry and k in cs.applied and k not in cs.failures
                    and (keys is None or k in keys) and not self.queue.busy(k)]
        found = 0
        for key, manifest in todo:
            self.metrics.drift_checks.labels(cs.name, entry.kind).inc()
            try:
                diffs = entry.drift.call(manifest, {"cluster": cs.name, "key": key})
            except Exception as exc:  # pylint: disable=broad-except
                diffs = [drift_mod.CheckFailure(f"drift check failed: {exc}")]
            unreadable = drift_mod.failures(diffs)
            drifted = [d for d in diffs if not isinstance(d, drift_mod.CheckFailure)]
            self._drift_readable(cs, entry, key, unreadable)
            if drifted:
                found += 1
                self.metrics.drift.labels(cs.name, entry.kind).inc()
                log.info("drift detected", extra=_f(cluster=cs.name, key=key, differences=drifted[:10]))
                self.consider(cs, key, PRIO_DRIFT, "drift: " + "; ".join(drifted[:3]), force=True)
        return found

    def _drift_readable(self, cs: ClusterState, entry: WatchEntry, key: str, unreadable: List[str]) -> None:
        """Reports a drift check that could not read the kernel (and its recovery)."""
        with cs.lock:
            was = key in cs.drift_unreadable
            if unreadable:
                cs.drift_unreadable[key] = list(unreadable)
            else:
                cs.drift_unreadable.pop(key, None)
        if not unreadable and not was:
            return
        if unreadable:
            self.metrics.drift_failed.labels(cs.name, entry.kind).inc()
            log.warning("drift check cannot read the dataplane", extra=_f(cluster=cs.name, key=key, reasons=unreadable[:10]))
        if not entry.status:
            return
        objs = self.current(cs, key)[1]
        if unreadable:
            msg = "drift check cannot read the dataplane: " + "; ".join(unreadable[:3])
            self._set_status_many(cs, [(o, "degraded", msg, "DriftCheckFailed") for o in objs.values()])
        else:
            self._set_status_many(cs, [(o, "ready", "drift check reads the dataplane again", "Applied")
                                       for o in objs.values()])

    def _drift_loop(self) -> None:
        last: Dict[tuple, float] = {}
        while not self.stop.wait(0.5):
            now = time.monotonic()
            for cs in self.clusters.values():
                if not cs.acting():
                    continue
                for e in self.entries:
                    if e.drift and e.enabled and self._due(last, (cs.name, e.kind), e.drift.period, now):
                        self.check_drift(cs, e)

    # ================================================================== persisted state
    def _leadership(self, cs: ClusterState, leading: bool) -> None:
        self.metrics.leader.labels(cs.name).set(1 if leading else 0)
        if leading:
            threading.Thread(target=self._on_lead, args=(cs,), daemon=True).start()
        elif self.gateway and not self.stop.is_set():
            self._stop_health(cs)
            # a gateway pod that lost its Lease alive: label off, then exit to restart as a clean standby
            gateway_ha.mark(cs.api, self.gateway["namespace"], self.pod_name, False)
            gateway_ha.drop_links()
            log.warning("gateway Lease lost: exiting to restart as a standby", extra=_f(cluster=cs.name))
            os.kill(os.getpid(), signal.SIGTERM)
        self.queue.wake()

    def _holder_pod_going(self, cs: ClusterState, holder: str) -> bool:
        """A gateway's Lease holder (identity `<pod name>-<pid>`) whose pod is being deleted, or gone from the synced
        cache of the gateway's pods: its standby takes over at `kubectl delete`, not after the old pod's shutdown."""
        inf = cs.informers.get("Pod")
        pod_name = holder.rsplit("-", 1)[0]
        if inf is None or not pod_name or pod_name == self.pod_name:
            return False
        pod = inf.cache.get(f"{self.gateway['namespace']}/{pod_name}")
        if pod is None:
            return inf.synced.is_set()
        return bool((pod.get("metadata") or {}).get("deletionTimestamp"))

    def _on_lead(self, cs: ClusterState) -> None:
        if self.gateway:
            # a client's own tunnel first (a local change, before any run can take the interface's lock); then the
            # label, which a server's Service follows (the node agents re-pointed their links when the old pod
            # began to go: controller/node_repoint.py)
            self._activate_standby(cs)
            gateway_ha.mark(cs.api, self.gateway["namespace"], self.pod_name, True)
            self._start_health(cs)
            self.runner.prestart()   # the zygote of a standby whose warm-up was not due yet
            # the warm standby's tunnel is one run from active (its client peer gets the endpoint): now, not
            # after the informers' wait below
            with cs.lock:
                keys = list(cs.key_entry)
            for k in keys:
                self.consider(cs, k, PRIO_DRIFT, "gateway pod active", force=True)
        self.load_state(cs)
        for inf in cs.informers.values():
            inf.synced.wait(30)
        self.resync(cs)

    def _activate_standby(self, cs: ClusterState) -> None:
        """A client standby's tunnel reaches the peer at once (gateway_ha.activate_client)."""
        obj = cs.obj(self.gateway["kind"], f"{self.gateway['namespace']}/{self.gateway['name']}")
        if obj and self.gateway["kind"] == "GatewayClient":   # a server's standby has nothing to activate
            cluster_id = self._cluster_id(cs)
            if cluster_id:
                gateway_ha.activate_client(dict(obj, kind=self.gateway["kind"]), cluster_id)

    def _cluster_id(self, cs: ClusterState) -> str:
        """This cluster's id (its interface names derive from it), read once: a takeover does not wait for it."""
        if not self._cluster_ids.get(cs.name):
            try:
                self._cluster_ids[cs.name] = peer_health.read_cluster_id(cs.api)
            except ApiError as exc:
                log.warning("cluster id not read", extra=_f(cluster=cs.name, error=str(exc)))
                return ""
        return self._cluster_ids[cs.name]

    def _start_health(self, cs: ClusterState) -> None:
        """The active gateway pod's probe of its peer (a standby has no tunnel to probe)."""
        self._stop_health(cs)
        kind, key = self.gateway["kind"], f"{self.gateway['namespace']}/{self.gateway['name']}"

        def cluster_id() -> str:
            return self._cluster_id(cs)

        def gateway() -> Optional[dict]:
            obj = cs.obj(kind, key)
            return dict(obj, kind=kind) if obj else None

        h = peer_health.GatewayHealth(cs.api, gateway, cluster_id)
        self._health[cs.name] = h
        self.health_collector.health = h
        h.start()

    def _stop_health(self, cs: ClusterState) -> None:
        h = self._health.pop(cs.name, None)
        if h:
            if self.health_collector and self.health_collector.health is h:
                self.health_collector.health = None
            h.stop()

    def load_state(self, cs: ClusterState) -> None:
        if not self.state_configmap:
            return
        try:
            cm = cs.api.get(RESOURCES["ConfigMap"], "liqo", STATE_CONFIGMAP)
        except ApiError as exc:
            log.warning("state not loaded", extra=_f(cluster=cs.name, error=str(exc)))
            return
        if not cm:
            cs.state_loaded = True
            return
        try:
            data = json.loads((cm.get("data") or {}).get(STATE_KEY) or "{}")
        except ValueError:
            data = {}
        with cs.lock:
            for k, v in (data.get("keys") or {}).items():
                if k not in cs.applied and isinstance(v.get("applied"), dict):
                    cs.applied[k] = v["applied"]
                if k not in cs.manifests and v.get("manifest") is not None:
                    cs.manifests[k] = v["manifest"]
            cs.state_loaded = True
        log.info("state loaded", extra=_f(cluster=cs.name, keys=len(data.get("keys") or {})))

    def _flush_states(self, force: bool = False) -> None:
        if not self.state_configmap:
            return
        for cs in self.clusters.values():
            if not cs.state_dirty or not (cs.acting() or force) or not cs.state_loaded and cs.leader:
                continue
            with cs.lock:
                cs.state_dirty = False
                keys = {k: {"applied": v, "manifest": cs.manifests.get(k)} for k, v in cs.applied.items()}
            body = {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": STATE_CONFIGMAP, "namespace": "liqo",
                                 "labels": {"app.kubernetes.io/managed-by": "liqo-fabric-controller"}},
                    "data": {STATE_KEY: json.dumps({"version": 1, "keys": keys}, separators=(",", ":"), sort_keys=True)}}
            res = RESOURCES["ConfigMap"]
            try:
                try:
                    cs.api.request("PUT", res.path("liqo", STATE_CONFIGMAP), body=body)
                except ApiError as exc:
                    if exc.status != 404:
                        raise
                    cs.api.request("POST", res.path("liqo"), body=body)
            except ApiError as exc:
                cs.state_dirty = True
                log.warning("state not saved", extra=_f(cluster=cs.name, error=str(exc)))

    def _state_loop(self) -> None:
        for cs in self.clusters.values():
            if cs.leader is None:
                self.load_state(cs)
        while not self.stop.wait(1.0):
            self._flush_states()
