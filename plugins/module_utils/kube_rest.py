# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A small Kubernetes REST client: kubeconfig (or in-cluster) auth, JSON over one kept-alive HTTPS
connection per thread. Standard library and PyYAML only.

Why not the official client here: importing it and building its models costs ~1 s per module run, which
dominated every fabric task; the modules need a handful of verbs on a dozen kinds, nothing more.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import ssl
import tempfile
import threading
import urllib.parse

try:
    import yaml
except ImportError:  # pragma: no cover - PyYAML ships with ansible-core
    yaml = None

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


class KubeConfigError(Exception):
    """The kubeconfig cannot be used; the message names the file and what is wrong."""


class ApiError(Exception):
    """An HTTP error answer of the apiserver: `.status`, `.reason`, `.body` (decoded JSON or text)."""

    def __init__(self, status, reason, body=None, method="", path=""):
        self.status, self.reason, self.body = status, reason, body
        message = body.get("message") if isinstance(body, dict) else None
        super().__init__("%s %s: %s %s%s" % (method, path, status, reason, ": " + message if message else ""))

    @property
    def message(self):
        return self.body.get("message") if isinstance(self.body, dict) else self.reason


def _write_temp(data: bytes) -> str:
    fd, path = tempfile.mkstemp(prefix="lfab-kube-")  # mode 0600
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


class Connection:
    """Endpoint and credentials from a kubeconfig (context `context`, default current-context)."""

    def __init__(self, server, ssl_context, headers):
        url = urllib.parse.urlsplit(server)
        self.host, self.port = url.hostname, url.port or (443 if url.scheme == "https" else 80)
        self.scheme, self.base = url.scheme, url.path.rstrip("/")
        self.ssl_context, self.headers = ssl_context, headers
        self._local = threading.local()

    @classmethod
    def from_kubeconfig(cls, path, context=None):
        if yaml is None:
            raise KubeConfigError("kubeconfig: PyYAML is required to read '%s'" % path)
        try:
            with open(os.path.expanduser(path), encoding="utf-8") as f:
                cfg = yaml.safe_load(f) or {}
        except OSError as exc:
            raise KubeConfigError("kubeconfig: '%s' cannot be read (%s)" % (path, exc.strerror))
        except yaml.YAMLError as exc:
            raise KubeConfigError("kubeconfig: '%s' is not valid YAML (%s)" % (path, exc))
        if not isinstance(cfg, dict):
            raise KubeConfigError("kubeconfig: '%s' is not a kubeconfig (a YAML %s, not a mapping)"
                                  % (path, type(cfg).__name__))
        base_dir = os.path.dirname(os.path.abspath(path))

        def named(section, name):
            for item in cfg.get(section) or []:
                if item.get("name") == name:
                    return item.get(section[:-1]) or {}
            raise KubeConfigError("kubeconfig: '%s' has no %s named '%s'" % (path, section[:-1], name))

        ctx_name = context or cfg.get("current-context")
        if not ctx_name:
            raise KubeConfigError("kubeconfig: '%s' has no current-context (and no context was given)" % path)
        ctx = named("contexts", ctx_name)
        cluster = named("clusters", ctx.get("cluster"))
        user = named("users", ctx.get("user")) if ctx.get("user") else {}
        server = cluster.get("server")
        if not server:
            raise KubeConfigError("kubeconfig: cluster '%s' in '%s' has no server" % (ctx.get("cluster"), path))

        def material(data_key, file_key, holder):
            if holder.get(data_key):
                return base64.b64decode(holder[data_key])
            if holder.get(file_key):
                with open(os.path.join(base_dir, holder[file_key]), "rb") as f:
                    return f.read()
            return None

        sslctx = None
        if server.startswith("https"):
            ca = material("certificate-authority-data", "certificate-authority", cluster)
            insecure = cluster.get("insecure-skip-tls-verify")
            if ca and not insecure:
                # the kubeconfig's CA is the only trust root (as kubectl does): the system store is not loaded
                sslctx = ssl.create_default_context(cadata=ca.decode())
            else:
                sslctx = ssl.create_default_context()
                if insecure:  # nothing is verified, so a CA given beside it changes nothing
                    sslctx.check_hostname = False
                    sslctx.verify_mode = ssl.CERT_NONE
            cert = material("client-certificate-data", "client-certificate", user)
            key = material("client-key-data", "client-key", user)
            if cert and key:
                cert_path, key_path = _write_temp(cert), _write_temp(key)
                try:
                    sslctx.load_cert_chain(cert_path, key_path)
                finally:
                    os.unlink(cert_path)
                    os.unlink(key_path)
        headers = {}
        token = user.get("token")
        if not token and user.get("tokenFile"):
            with open(user["tokenFile"], encoding="utf-8") as f:
                token = f.read().strip()
        if token:
            headers["Authorization"] = "Bearer " + token
        elif user.get("username"):
            creds = "%s:%s" % (user["username"], user.get("password", ""))
            headers["Authorization"] = "Basic " + base64.b64encode(creds.encode()).decode()
        elif user.get("exec") or user.get("auth-provider"):
            raise KubeConfigError("kubeconfig: user '%s' in '%s' uses exec/auth-provider credentials, which this "
                                  "client does not run; use a token or client certificate" % (ctx.get("user"), path))
        return cls(server, sslctx, headers)

    @classmethod
    def in_cluster(cls):
        host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
        if not host or not os.path.exists(os.path.join(SA_DIR, "token")):
            raise KubeConfigError("kubeconfig: not given and not running in a cluster")
        sslctx = ssl.create_default_context(cafile=os.path.join(SA_DIR, "ca.crt"))
        with open(os.path.join(SA_DIR, "token"), encoding="utf-8") as f:
            token = f.read().strip()
        if ":" in host:
            host = "[%s]" % host
        return cls("https://%s:%s" % (host, port), sslctx, {"Authorization": "Bearer " + token})

    def _conn(self):
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self.scheme == "https":
                conn = http.client.HTTPSConnection(self.host, self.port, context=self.ssl_context, timeout=30)
            else:
                conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
            self._local.conn = conn
        return conn

    def request(self, method, path, query=None, body=None, content_type="application/json"):
        """Decoded JSON answer of one call; raises ApiError for an error status."""
        url = self.base + path + ("?" + urllib.parse.urlencode(query) if query else "")
        headers = dict(self.headers, Accept="application/json")
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        for attempt in (0, 1):  # a kept-alive connection the server closed is retried once
            conn = self._conn()
            try:
                conn.request(method, url, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                conn.close()
                self._local.conn = None
                if attempt:
                    raise
        try:
            decoded = json.loads(raw) if raw else None
        except ValueError:
            decoded = raw.decode(errors="replace")
        if not 200 <= resp.status < 300:
            raise ApiError(resp.status, resp.reason, decoded, method, path)
        return decoded

    def close(self):
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
