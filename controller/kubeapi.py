# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's view of one cluster, on the collection's REST client (module_utils.kube.rest: the same
kubeconfig loading, exec credentials, proxies and errors as the modules), and informers (list + watch).

Raw dicts, no model classes: list/watch of thousands of objects stays cheap. Credentials come from a
kubeconfig (reloaded when the file changes: rotated tokens, an apiserver that came back elsewhere; exec
plugins run again when their credential expires) or from the in-cluster service account.
"""
from __future__ import annotations

import collections
import logging
import os
import random
import threading
import time
from typing import Callable, Dict, Optional

from controller.library import kube_rest
from controller.watchmap import Resource

# kube_rest's errors, under the names the controller's modules import from here
ApiError, KubeConfigError, Unreachable = kube_rest.ApiError, kube_rest.KubeConfigError, kube_rest.Unreachable

log = logging.getLogger("controller.kube")

__all__ = ["ApiError", "ClusterAPI", "Informer", "KubeConfigError", "NamespacedInformers", "Unreachable", "obj_key",
           "strip"]


class ClusterAPI:
    """kube_rest.Connection of one cluster, swapped for a new one when the kubeconfig file changes."""

    def __init__(self, name: str, kubeconfig: Optional[str] = None, context: Optional[str] = None,
                 timeout: float = 10.0):
        self.name = name
        self.kubeconfig = os.path.abspath(kubeconfig) if kubeconfig else None
        self.context = context
        self.timeout = timeout
        self._lock = threading.Lock()
        self._mtime = None
        self.generation = 0  # bumped on each (re)load
        self._load()

    # ------------------------------------------------------------------ credentials
    def _load(self) -> None:
        mtime = os.stat(self.kubeconfig).st_mtime_ns if self.kubeconfig else None
        conn = kube_rest.Connection.load(self.kubeconfig, self.context, timeout=self.timeout)
        with self._lock:
            old = getattr(self, "conn", None)
            self.conn, self.host, self._mtime = conn, conn.url.rstrip("/"), mtime
            self.generation += 1
        if old is not None:
            old.close()

    def maybe_reload(self) -> bool:
        """Reloads the kubeconfig if the file changed since it was read. True if it did."""
        if not self.kubeconfig:
            return False
        try:
            mtime = os.stat(self.kubeconfig).st_mtime_ns
        except OSError:
            return False
        if mtime == self._mtime:
            return False
        try:
            self._load()
        except Exception as exc:  # a half-written file: try again on the next failure
            log.warning("kubeconfig reload failed", extra={"fields": {"cluster": self.name, "error": str(exc)}})
            return False
        log.info("kubeconfig reloaded", extra={"fields": {"cluster": self.name, "server": self.host}})
        return True

    # ------------------------------------------------------------------ requests
    def request(self, method: str, path: str, query: Optional[dict] = None, body=None,
                content_type: str = "application/json", timeout: Optional[float] = None):
        return self.conn.request(method, path, query, body, content_type, timeout=timeout)

    def watch(self, path: str, query: dict, timeout: float):
        """A kube_rest.Stream of watch events."""
        return self.conn.stream(path, query, timeout=timeout)

    def get(self, res: Resource, namespace: Optional[str], name: str) -> Optional[dict]:
        try:
            return self.request("GET", res.path(namespace, name))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def list(self, res: Resource, namespace: Optional[str] = None, **query) -> dict:
        return self.request("GET", res.path(namespace), query=query or None, timeout=max(self.timeout, 60))


def strip(obj: dict) -> dict:
    """What the caches keep: no managedFields, no last-applied annotation."""
    meta = obj.get("metadata")
    if meta:
        meta.pop("managedFields", None)
        ann = meta.get("annotations")
        if ann and "kubectl.kubernetes.io/last-applied-configuration" in ann:
            ann = dict(ann)
            ann.pop("kubectl.kubernetes.io/last-applied-configuration")
            meta["annotations"] = ann
    return obj


def obj_key(obj: dict) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else meta.get("name", "")


class Informer(threading.Thread):
    """List + watch of one resource into a cache {namespace/name: object}.

    handler(kind, event_type, obj, old) is called for ADDED/MODIFIED/DELETED, also for the differences a
    re-list finds (after 410 Gone or a reconnect). Bookmarks move the resourceVersion forward. When the
    apiserver goes away, it retries with exponential backoff (0.2 s to 5 s, jittered), reloading the
    kubeconfig if it changed, and never exits until stop() is set.
    """

    def __init__(self, api: ClusterAPI, res: Resource, handler: Callable, stop: threading.Event,
                 transform: Optional[Callable[[dict], dict]] = None, watch_timeout: int = 240,
                 label_selector: Optional[str] = None, field_selector: Optional[str] = None,
                 namespace: Optional[str] = None):
        super().__init__(name=f"informer-{api.name}-{res.kind}" + (f"-{namespace}" if namespace else ""), daemon=True)
        self.api, self.res, self.handler, self.stop_event = api, res, handler, stop
        self.transform = transform or strip
        self.watch_timeout = watch_timeout
        self.selectors = {"labelSelector": label_selector, "fieldSelector": field_selector}
        self.namespace = namespace  # None: every namespace (RBAC to list cluster-wide); else that one only
        self.cache: Dict[str, dict] = {}
        self.synced = threading.Event()
        self.rv = ""
        self.relists = 0
        self.reconnects = 0
        self.connected = False
        self._resp = None

    def run(self) -> None:
        backoff = 0.2
        while not self.stop_event.is_set():
            try:
                if not self.rv:
                    self._list()
                self._watch()
                backoff = 0.2
            except ApiError as exc:
                self.connected = False
                if exc.status == 410:
                    log.info("watch expired, re-listing", extra={"fields": self._f()})
                    self.rv = ""
                    continue
                if self.stop_event.is_set():
                    break
                self.reconnects += 1
                reloaded = self.api.maybe_reload()
                log.warning("watch failed, retrying", extra={"fields": {**self._f(), "error": str(exc),
                                                                        "backoff": round(backoff, 2)}})
                if exc.status in (401, 403) or reloaded:
                    self.rv = ""  # new credentials or new server: list again
                self.stop_event.wait(backoff * (0.8 + 0.4 * random.random()))
                backoff = min(backoff * 2, 5.0)
            except Exception as exc:  # never let an informer die
                self.connected = False
                if self.stop_event.is_set():
                    break   # close() shut the stream under a read (http.client then fails in its own ways)
                log.exception("informer error", extra={"fields": {**self._f(), "error": str(exc)}})
                self.rv = ""
                self.stop_event.wait(backoff)
                backoff = min(backoff * 2, 5.0)

    def _f(self) -> dict:
        return {"cluster": self.api.name, "kind": self.res.kind}

    def _list(self) -> None:
        data = self.api.list(self.res, self.namespace, **{k: v for k, v in self.selectors.items() if v})
        self.relists += 1
        fresh = {}
        for obj in data.get("items") or []:
            obj.setdefault("kind", self.res.kind)
            obj.setdefault("apiVersion", self.res.api_version)
            obj = self.transform(obj)
            fresh[obj_key(obj)] = obj
        old = self.cache
        self.cache = fresh
        self.rv = (data.get("metadata") or {}).get("resourceVersion", "")
        self.connected = True
        for k, obj in fresh.items():
            prev = old.get(k)
            if prev is None:
                self.handler(self.res.kind, "ADDED", obj, None)
            elif (prev.get("metadata") or {}).get("resourceVersion") != (obj.get("metadata") or {}).get("resourceVersion"):
                self.handler(self.res.kind, "MODIFIED", obj, prev)
        for k, prev in old.items():
            if k not in fresh:
                self.handler(self.res.kind, "DELETED", prev, prev)
        self.synced.set()

    def _watch(self) -> None:
        query = {"watch": "1", "resourceVersion": self.rv, "allowWatchBookmarks": "true",
                 "timeoutSeconds": str(self.watch_timeout)}
        query.update({k: v for k, v in self.selectors.items() if v})
        stream = self.api.watch(self.res.path(self.namespace), query, timeout=self.watch_timeout + 30)
        self._resp = stream
        self.connected = True
        try:
            for event in stream:
                if self.stop_event.is_set():
                    return
                self._event(event)
        except Unreachable:
            if self.stop_event.is_set():
                return
            raise
        finally:
            self._resp = None
            stream.close()

    def _event(self, ev: dict) -> None:
        etype, obj = ev.get("type"), ev.get("object") or {}
        if etype == "ERROR":
            code = obj.get("code", 500)
            raise ApiError(code, obj.get("reason") or obj.get("message") or "watch error", obj)
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if etype == "BOOKMARK":
            if rv:
                self.rv = rv
            return
        obj.setdefault("kind", self.res.kind)
        obj.setdefault("apiVersion", self.res.api_version)
        obj = self.transform(obj)
        k = obj_key(obj)
        prev = self.cache.get(k)
        if etype == "DELETED":
            self.cache.pop(k, None)
        else:
            self.cache[k] = obj
        if rv:
            self.rv = rv
        self.handler(self.res.kind, etype, obj, prev)

    def close(self) -> None:
        resp = self._resp
        if resp is not None:
            resp.close()


class NamespacedInformers:
    """One informer per namespace of one resource, seen as one (cache, synced, start, close): what the
    engine uses where RBAC grants a kind in some namespaces only (Secrets of the namespaces it serves)."""

    def __init__(self, informers: list):
        self.informers = list(informers)
        self.synced = _AllSet([i.synced for i in self.informers])

    @property
    def cache(self) -> "collections.ChainMap":
        return collections.ChainMap(*[i.cache for i in self.informers])  # keys are namespace/name: disjoint

    def start(self) -> None:
        for i in self.informers:
            i.start()

    def close(self) -> None:
        for i in self.informers:
            i.close()


class _AllSet:
    """is_set()/wait() over several threading.Events (all of them)."""

    def __init__(self, events: list):
        self.events = events

    def is_set(self) -> bool:
        return all(e.is_set() for e in self.events)

    def wait(self, timeout: Optional[float] = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        for e in self.events:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not e.wait(left):
                return False
        return True
