# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A small Kubernetes REST client: JSON over one kept-alive HTTP(S) connection per thread, streamed watches.
Standard library and PyYAML only; where the cluster is and how to authenticate comes from kube_config.

Why not the official client here: importing it and building its models costs more than a whole fabric
task; the modules and the controller need a handful of verbs on a dozen kinds.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
import urllib.parse

from ansible_collections.liqo.fabric.plugins.module_utils.kube import config as kube_config
from ansible_collections.liqo.fabric.plugins.module_utils.kube.config import KubeConfigError

__all__ = ["ApiError", "Connection", "KubeConfigError", "Unauthorized", "Unreachable"]


class ApiError(Exception):
    """An HTTP error answer of the apiserver: `.status`, `.reason`, `.body` (a dict: the decoded Status, or
    {"message": text} for an answer that is not JSON)."""

    def __init__(self, status, reason, body=None, method="", path=""):
        if not isinstance(body, dict):
            body = {"message": str(body)[:300]} if body else {}
        self.status, self.reason, self.body = status, reason, body
        message = body.get("message")
        super().__init__("%s %s: %s %s%s" % (method, path, status, reason, ": " + message if message else ""))

    @property
    def message(self):
        return self.body.get("message") or self.reason


class Unreachable(ApiError):
    """The apiserver could not be reached (status 0); the message names the URL and the kubeconfig/context."""

    def __init__(self, reason):
        super().__init__(0, reason)
        self.args = (reason,)

    def __str__(self):
        return self.reason


class Unauthorized(ApiError):
    """A 401: the apiserver refused the credentials. The message names the server, where the credentials came from
    (kubeconfig and context, K8S_AUTH_HOST, ...) and their kind, as Unreachable's does."""

    def __init__(self, config, body, method, path):
        super().__init__(401, "Unauthorized", body, method, path)
        self.args = ("the Kubernetes API at %s (%s) refused the credentials (%s): 401 Unauthorized to %s %s"
                     % (config.server, config.where(), config.credentials(), method, path),)

    def __str__(self):
        return self.args[0]


def _error(config, status, reason, body, method, path):
    return Unauthorized(config, body, method, path) if status == 401 else ApiError(status, reason, body, method, path)


class Connection:
    """Requests to one cluster (a kube_config.ClusterConfig): one kept-alive connection per thread, through
    the kubeconfig's proxy if any; exec credentials refreshed on expiry and after a 401."""

    def __init__(self, config, timeout=30.0):
        self.config, self.timeout = config, timeout
        self.base = config.base
        self._local = threading.local()
        self._generation = 0  # bumped when the TLS identity changes: threads drop their old connections
        self.last_date = None  # the Date header of the last answer

    @classmethod
    def from_kubeconfig(cls, path, context=None, **kwargs):
        return cls(kube_config.from_kubeconfig(path, context), **kwargs)

    @classmethod
    def in_cluster(cls, **kwargs):
        return cls(kube_config.in_cluster(), **kwargs)

    @classmethod
    def load(cls, kubeconfig=None, context=None, **kwargs):
        """kube_config.load's resolution order: option, K8S_AUTH_*, in-cluster, KUBECONFIG, ~/.kube/config."""
        return cls(kube_config.load(kubeconfig, context), **kwargs)

    @property
    def url(self):
        return self.config.server

    def _new_conn(self, timeout):
        cfg = self.config
        if cfg.proxy:
            host, port, proxy_headers = cfg.proxy
        else:
            host, port, proxy_headers = cfg.host, cfg.port, None
        if cfg.scheme == "https":
            ctx = cfg.ssl_context()
            server_hostname = cfg.tls_server_name
            if server_hostname:  # verify the certificate against this name, connect to the server's address
                ctx = _NamedContext(ctx, server_hostname)
            conn = http.client.HTTPSConnection(host, port, context=ctx, timeout=timeout)
        else:
            conn = http.client.HTTPConnection(host, port, timeout=timeout)
        if proxy_headers is not None:
            conn.set_tunnel(cfg.host, cfg.port, headers=proxy_headers)
        return conn

    def _conn(self):
        conn = getattr(self._local, "conn", None)
        if conn is not None and getattr(self._local, "generation", 0) != self._generation:
            conn.close()
            conn = None
        if conn is None:
            conn = self._new_conn(self.timeout)
            self._local.conn, self._local.generation = conn, self._generation
        return conn

    def _drop(self):
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
        self._local.conn = None

    def _unreachable(self, exc, prefix=""):
        reason = prefix + (getattr(exc, "strerror", None) or str(exc) or type(exc).__name__)
        if isinstance(exc, (socket.timeout, TimeoutError)):
            reason = "timed out"
        via = " via proxy %s" % self.config.proxy_url if self.config.proxy_url else ""
        return Unreachable("cannot reach the Kubernetes API at %s%s (%s): %s"
                           % (self.config.server, via, self.config.where(), reason))

    def _headers(self, extra):
        if self.config.fresh():
            self._generation += 1
        headers = {"Accept": "application/json", "User-Agent": "liqo-fabric"}
        headers.update(self.config.headers())
        headers.update(extra)
        return headers

    def _url(self, path, query):
        if query:
            if isinstance(query, dict):
                query = {k: v for k, v in query.items() if v is not None}
            return self.base + path + "?" + urllib.parse.urlencode(query)
        return self.base + path

    def request(self, method, path, query=None, body=None, content_type="application/json", timeout=None):
        """Decoded JSON answer of one call; ApiError for an error status, Unreachable when there is no answer."""
        url = self._url(path, query)
        data, extra = None, {}
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            extra["Content-Type"] = content_type
        refreshed = False
        attempt = 0
        while True:
            conn = self._conn()
            if conn.sock is not None or timeout is not None:
                conn.timeout = self.timeout if timeout is None else timeout
                if conn.sock is not None:
                    conn.sock.settimeout(conn.timeout)
            try:
                conn.request(method, url, body=data, headers=self._headers(extra))
                resp = conn.getresponse()
                raw = resp.read()
                self.last_date = resp.getheader("Date")  # the apiserver's clock (liqo.fabric.diagnose: skew)
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                # a kept-alive connection the server closed is retried once on a new one
                self._drop()
                attempt += 1
                if attempt > 1:
                    raise self._unreachable(exc)
                continue
            except ssl.SSLError as exc:
                self._drop()
                raise self._unreachable(exc, "TLS: ")
            except (OSError, http.client.HTTPException) as exc:
                self._drop()
                raise self._unreachable(exc)
            if resp.status == 401 and self.config.dynamic and not refreshed:
                refreshed = True  # the plugin's credential was revoked or expired early: one new one
                if self.config.refresh():
                    self._generation += 1
                continue
            break
        decoded = _decode(raw)
        if not 200 <= resp.status < 300:
            raise _error(self.config, resp.status, resp.reason, decoded, method, path)
        return decoded if decoded is not None else {}

    def stream(self, path, query=None, timeout=None):
        """A watch: a Stream of decoded JSON lines, on its own connection (close() ends it from any thread)."""
        conn = self._new_conn(self.timeout if timeout is None else timeout)
        try:
            conn.request("GET", self._url(path, query), headers=self._headers({}))
            resp = conn.getresponse()
        except ssl.SSLError as exc:
            conn.close()
            raise self._unreachable(exc, "TLS: ")
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise self._unreachable(exc)
        if resp.status >= 400:
            decoded = _decode(resp.read())
            conn.close()
            if resp.status == 401 and self.config.dynamic and self.config.refresh():
                self._generation += 1
            raise _error(self.config, resp.status, resp.reason, decoded, "GET", path)
        return Stream(conn, resp, self)

    def close(self):
        self._drop()


def _decode(raw):
    """An answer's JSON, or its text when it is not JSON (a proxy's or load balancer's error page)."""
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return raw.decode(errors="replace")


class Stream:
    """The lines of a streamed answer. Iterating yields decoded JSON objects; Unreachable when it breaks."""

    def __init__(self, conn, resp, owner):
        self.conn, self.resp, self.owner = conn, resp, owner
        self.closed = False

    def __iter__(self):
        try:
            while True:
                line = self.resp.readline()
                if not line:
                    return
                if line.strip():
                    yield json.loads(line)
        except (OSError, http.client.HTTPException, ValueError) as exc:
            if not self.closed:
                raise self.owner._unreachable(exc)  # pylint: disable=protected-access

    def close(self):
        self.closed = True
        sock = self.conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.conn.close()


class _NamedContext:  # pylint: disable=too-few-public-methods
    """An SSLContext whose wrap_socket checks the kubeconfig's tls-server-name instead of the host connected to."""

    def __init__(self, ctx, server_hostname):
        self._ctx, self._name = ctx, server_hostname

    def wrap_socket(self, sock, server_hostname=None, **kwargs):  # pylint: disable=unused-argument
        return self._ctx.wrap_socket(sock, server_hostname=self._name, **kwargs)

    def __getattr__(self, name):
        return getattr(self._ctx, name)
