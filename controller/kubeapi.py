# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A small JSON REST client for one cluster, and informers (list + watch) on top of it.

Raw dicts, no model classes: list/watch of thousands of objects stays cheap. Credentials come from a
kubeconfig (reloaded when the file changes: rotated tokens, an apiserver that came back elsewhere) or
from the in-cluster service account (token re-read by the kubernetes library's refresh hook).
"""
from __future__ import annotations

import json
import logging
import os
import random
import ssl
import threading
import urllib.parse
from typing import Callable, Dict, Optional

import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from controller.watchmap import Resource

log = logging.getLogger("controller.kube")


class ApiError(Exception):
    def __init__(self, status: int, reason: str, body: Optional[dict] = None):
        super().__init__(f"{status} {reason}")
        self.status = status
        self.reason = reason
        self.body = body or {}


class Unreachable(ApiError):
    """The apiserver could not be reached (status 0)."""

    def __init__(self, reason: str):
        super().__init__(0, reason)


class ClusterAPI:
    def __init__(self, name: str, kubeconfig: Optional[str] = None, context: Optional[str] = None,
                 timeout: float = 10.0, pool_size: int = 16):
        self.name = name
        self.kubeconfig = os.path.abspath(kubeconfig) if kubeconfig else None
        self.context = context
        self.timeout = timeout
        self.pool_size = pool_size
        self._lock = threading.Lock()
        self._mtime = None
        self.generation = 0  # bumped on each (re)load
        self._load()

    # ------------------------------------------------------------------ credentials
    def _load(self) -> None:
        cfg = k8s_client.Configuration()
        if self.kubeconfig:
            mtime = os.stat(self.kubeconfig).st_mtime_ns
            k8s_config.load_kube_config(config_file=self.kubeconfig, context=self.context, client_configuration=cfg,
                                        persist_config=False)
        else:
            mtime = None
            k8s_config.load_incluster_config(client_configuration=cfg)
        kw = {"num_pools": 2, "maxsize": self.pool_size, "block": False, "retries": False}
        if cfg.verify_ssl:
            kw.update(cert_reqs=ssl.CERT_REQUIRED, ca_certs=cfg.ssl_ca_cert)
        else:
            kw.update(cert_reqs=ssl.CERT_NONE)
        if cfg.cert_file:
            kw.update(cert_file=cfg.cert_file, key_file=cfg.key_file)
        if cfg.tls_server_name:
            kw["server_hostname"] = cfg.tls_server_name
        pool = urllib3.PoolManager(**kw)
        with self._lock:
            old = getattr(self, "pool", None)
            self.cfg, self.pool, self.host, self._mtime = cfg, pool, cfg.host.rstrip("/"), mtime
            self.generation += 1
        if old is not None:
            old.clear()

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

    def _headers(self, content_type: Optional[str]) -> dict:
        headers = {"Accept": "application/json", "User-Agent": "liqo-fabric-controller"}
        auth = self.cfg.auth_settings().get("BearerToken")
        if auth and auth.get("value"):
            headers["Authorization"] = auth["value"]
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    # ------------------------------------------------------------------ requests
    def request(self, method: str, path: str, query: Optional[dict] = None, body=None,
                content_type: str = "application/json", timeout: Optional[float] = None, stream: bool = False):
        url = self.host + path
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        t = self.timeout if timeout is None else timeout
        try:
            resp = self.pool.request(method, url, body=data, headers=self._headers(content_type if data else None),
                                     timeout=urllib3.Timeout(connect=min(5.0, t), read=t),
                                     preload_content=not stream, retries=False)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise Unreachable(f"{type(exc).__name__}: {exc}") from exc
        if stream:
            if resp.status >= 400:
                payload = resp.read()
                resp.release_conn()
                raise _error(resp.status, payload)
            return resp
        if resp.status >= 400:
            raise _error(resp.status, resp.data)
        return json.loads(resp.data) if resp.data else {}

    def get(self, res: Resource, namespace: Optional[str], name: str) -> Optional[dict]:
        try:
            return self.request("GET", res.path(namespace, name))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def list(self, res: Resource, namespace: Optional[str] = None, **query) -> dict:
        return self.request("GET", res.path(namespace), query=query or None, timeout=max(self.timeout, 60))


def _error(status: int, payload: bytes) -> ApiError:
    try:
        body = json.loads(payload)
    except ValueError:
        body = {"message": payload[:200].decode(errors="replace")}
    return ApiError(status, body.get("reason") or body.get("message") or "error", body)


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
                 label_selector: Optional[str] = None, field_selector: Optional[str] = None):
        super().__init__(name=f"informer-{api.name}-{res.kind}", daemon=True)
        self.api, self.res, self.handler, self.stop_event = api, res, handler, stop
        self.transform = transform or strip
        self.watch_timeout = watch_timeout
        self.selectors = {"labelSelector": label_selector, "fieldSelector": field_selector}
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
                log.exception("informer error", extra={"fields": {**self._f(), "error": str(exc)}})
                self.rv = ""
                self.stop_event.wait(backoff)
                backoff = min(backoff * 2, 5.0)

    def _f(self) -> dict:
        return {"cluster": self.api.name, "kind": self.res.kind}

    def _list(self) -> None:
        data = self.api.list(self.res, **{k: v for k, v in self.selectors.items() if v})
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
        resp = self.api.request("GET", self.res.path(), query=query, stream=True, timeout=self.watch_timeout + 30)
        self._resp = resp
        self.connected = True
        buf = b""
        try:
            for chunk in resp.stream(64 * 1024, decode_content=True):
                if self.stop_event.is_set():
                    return
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        self._event(json.loads(line))
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            if self.stop_event.is_set():
                return
            raise Unreachable(f"watch stream broke: {exc}") from exc
        finally:
            self._resp = None
            resp.release_conn()

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
            try:
                resp.shutdown()
            except Exception:  # pylint: disable=broad-except
                pass
