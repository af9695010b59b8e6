# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a cluster is and how to authenticate to it: kubeconfig files (as kubectl reads them), the
kubernetes.core K8S_AUTH_* environment variables, or the in-cluster service account.

The common kinds (tokens, token files, client certificates as data or files, basic auth, CA, insecure-skip-
tls-verify, tls-server-name, proxy-url, contexts, several files in KUBECONFIG) are read here with the standard
library and PyYAML, so a module run does not pay for importing the official client. `exec` credential plugins
and `auth-provider` users are resolved by the `kubernetes` package's own loader (imported only for them); an
exec credential is kept in this process until its expirationTimestamp (a warm runner or the controller runs
the plugin once per expiry, not once per request).
"""

from __future__ import annotations

import base64
import binascii
import datetime
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
IN_CLUSTER = "in-cluster service account"
DEFAULT_KUBECONFIG = "~/.kube/config"
EXPIRY_SKEW = datetime.timedelta(seconds=10)  # refresh a little before the plugin's deadline


class KubeConfigError(Exception):
    """The cluster's access settings cannot be used; the message names the file, the context and what is wrong."""


def _env(name):
    value = os.environ.get("K8S_AUTH_" + name)
    return value if value not in (None, "") else None


def _env_bool(name):
    value = _env(name)
    return None if value is None else value.strip().lower() in ("1", "true", "yes", "on")


def _write_temp(data: bytes) -> str:
    fd, path = tempfile.mkstemp(prefix="lfab-kube-")  # mode 0600
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


def _parse_time(value):
    if not value:
        return None
    text = str(value).strip().replace("Z", "+00:00")
    try:
        stamp = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=datetime.timezone.utc)


def _now():
    return datetime.datetime.now(datetime.timezone.utc)


# exec credentials of this process: key -> (status, expiry or None)
_EXEC_CACHE = {}
_EXEC_LOCK = threading.Lock()


class ClusterConfig:
    """One cluster's endpoint and credentials. `ssl_context()` and `headers()` give what a request needs;
    `refresh()` runs the exec plugin again (after a 401 or on expiry)."""

    def __init__(self, server, source, context=None, ca_data=None, insecure=False, tls_server_name=None,
                 cert_pem=None, key_pem=None, token=None, basic=None, proxy_url=None, exec_spec=None,
                 exec_cwd=None, cluster_info=None, provider=None):
        self.server, self.source, self.context = server, source, context
        self.ca_data, self.insecure, self.tls_server_name = ca_data, insecure, tls_server_name
        self.cert_pem, self.key_pem = cert_pem, key_pem
        self.token, self.basic = token, basic
        self.proxy_url = proxy_url
        self.exec_spec, self.exec_cwd, self.cluster_info = exec_spec, exec_cwd, cluster_info
        self.provider = provider  # callable returning a bearer token (auth-provider users)
        self.expiry = None
        self.cluster_name = None  # the kubeconfig's name of the cluster, when it has one
        self.token_source = "token"  # where a static token came from, for messages
        self._ssl = None
        self._lock = threading.Lock()
        if exec_spec is not None:
            self._load_exec(force=False)
        elif provider is not None:
            self.token = provider()
        url = urllib.parse.urlsplit(server)
        if url.scheme not in ("https", "http") or not url.hostname:
            raise KubeConfigError("%s: server '%s' is not an http(s) URL" % (self.where(), server))
        self.scheme, self.host, self.base = url.scheme, url.hostname, url.path.rstrip("/")
        self.port = url.port or (443 if url.scheme == "https" else 80)
        self.proxy = _proxy(proxy_url, self.where()) if proxy_url else None
        if self.scheme == "https":
            self.ssl_context()  # bad CA or key material fails now, naming the file, not at the first request

    def where(self):
        """'kubeconfig PATH, context NAME' (or the other source) for messages."""
        out = self.source
        if self.context:
            out += ", context '%s'" % self.context
        return out

    def credentials(self):
        """Which credentials the requests carry, for messages (never their value)."""
        if self.exec_spec is not None:
            return "exec plugin '%s'" % self.exec_spec.get("command")
        if self.provider is not None:
            return "auth-provider"
        if self.token:
            return self.token_source
        if self.cert_pem:
            return "client certificate"
        if self.basic:
            return "basic auth, user '%s'" % self.basic[0]
        return "none"

    @property
    def dynamic(self):
        """Whether the credentials come from a plugin that can give fresh ones."""
        return self.exec_spec is not None or self.provider is not None

    # --- exec credential plugins -------------------------------------------------------------------
    def _exec_key(self):
        return json.dumps([self.exec_spec, self.exec_cwd, self.server], sort_keys=True, default=str)

    def _load_exec(self, force):
        key = self._exec_key()
        with _EXEC_LOCK:
            cached = _EXEC_CACHE.get(key)
            if force or cached is None or (cached[1] is not None and cached[1] - EXPIRY_SKEW <= _now()):
                cached = (self._run_exec(), None)
                cached = (cached[0], _parse_time(cached[0].get("expirationTimestamp")))
                _EXEC_CACHE[key] = cached
        status, self.expiry = cached
        if status.get("token"):
            self.token = status["token"]
        elif status.get("clientCertificateData") and status.get("clientKeyData"):
            self.cert_pem, self.key_pem = status["clientCertificateData"].encode(), status["clientKeyData"].encode()
            self._ssl = None
        else:
            raise KubeConfigError("%s: exec plugin '%s' returned neither a token nor clientCertificateData with "
                                  "clientKeyData" % (self.where(), self.exec_spec.get("command")))

    def _run_exec(self):
        try:
            # pylint: disable=import-outside-toplevel
            from kubernetes.config.config_exception import ConfigException
            from kubernetes.config.exec_provider import ExecProvider
            from kubernetes.config.kube_config import ConfigNode
        except ImportError:
            raise KubeConfigError("%s: user credentials come from an exec plugin ('%s'), which needs the Python "
                                  "library 'kubernetes'" % (self.where(), self.exec_spec.get("command")))
        try:
            cluster = ConfigNode("cluster", self.cluster_info or {"server": self.server})
            return ExecProvider(ConfigNode("exec", self.exec_spec), self.exec_cwd, cluster).run()
        except ConfigException as exc:
            raise KubeConfigError("%s: exec plugin '%s' failed: %s" % (self.where(), self.exec_spec.get("command"), exc))
        except OSError as exc:
            raise KubeConfigError("%s: exec plugin '%s' cannot be run: %s"
                                  % (self.where(), self.exec_spec.get("command"), exc.strerror or exc))

    def fresh(self):
        """Runs the plugin again when its credential expired. True when the TLS identity changed."""
        if self.exec_spec is None or self.expiry is None or self.expiry - EXPIRY_SKEW > _now():
            return False
        return self.refresh()

    def refresh(self):
        """New credentials from the plugin (after a 401). True when the TLS identity changed."""
        with self._lock:
            cert = self.cert_pem
            if self.exec_spec is not None:
                self._load_exec(force=True)
            elif self.provider is not None:
                self.token = self.provider()
            else:
                return False
            return cert != self.cert_pem

    # --- what a request needs ----------------------------------------------------------------------
    def ssl_context(self):
        if self._ssl is not None:
            return self._ssl
        try:
            if self.ca_data and not self.insecure:
                # the kubeconfig's CA is the only trust root (as kubectl does): the system store is not loaded
                ctx = ssl.create_default_context(cadata=self.ca_data.decode())
            else:
                ctx = ssl.create_default_context()
                if self.insecure:  # nothing is verified, so a CA given beside it changes nothing
                    ctx.check_hostname = False
                    ctx.verify_mode = ssl.CERT_NONE
        except (ssl.SSLError, ValueError, UnicodeDecodeError) as exc:
            raise KubeConfigError("%s: the certificate authority is not a usable PEM certificate (%s)"
                                  % (self.where(), exc))
        if self.cert_pem and self.key_pem:
            cert_path, key_path = _write_temp(self.cert_pem), _write_temp(self.key_pem)
            try:
                ctx.load_cert_chain(cert_path, key_path)
            except ssl.SSLError as exc:
                raise KubeConfigError("%s: the client certificate and key cannot be used (%s)" % (self.where(), exc))
            finally:
                os.unlink(cert_path)
                os.unlink(key_path)
        elif self.cert_pem or self.key_pem:
            raise KubeConfigError("%s: a client certificate needs both the certificate and its key"
                                  % self.where())
        self._ssl = ctx
        return ctx

    def headers(self):
        if self.token:
            return {"Authorization": "Bearer " + self.token}
        if self.basic:
            return {"Authorization": "Basic " + base64.b64encode(("%s:%s" % self.basic).encode()).decode()}
        return {}


def _proxy(url, where):
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise KubeConfigError("%s: proxy-url '%s' is not supported: only http:// proxies (HTTP CONNECT) are"
                              % (where, url))
    headers = {}
    if parts.username:
        creds = "%s:%s" % (urllib.parse.unquote(parts.username), urllib.parse.unquote(parts.password or ""))
        headers["Proxy-Authorization"] = "Basic " + base64.b64encode(creds.encode()).decode()
    return parts.hostname, parts.port or 80, headers


# --- kubeconfig files --------------------------------------------------------------------------------
def _read_file(path):
    if yaml is None:
        raise KubeConfigError("kubeconfig '%s': PyYAML is required to read it" % path)
    try:
        with open(os.path.expanduser(path), encoding="utf-8") as f:
            cfg = yaml.safe_load(f)
    except FileNotFoundError:
        raise KubeConfigError("kubeconfig '%s': no such file" % path)
    except IsADirectoryError:
        raise KubeConfigError("kubeconfig '%s': a directory, not a file" % path)
    except OSError as exc:
        raise KubeConfigError("kubeconfig '%s': cannot be read (%s)" % (path, exc.strerror))
    except yaml.YAMLError as exc:
        raise KubeConfigError("kubeconfig '%s': not valid YAML (%s)" % (path, str(exc).replace("\n", " ")))
    except UnicodeDecodeError:
        raise KubeConfigError("kubeconfig '%s': not a text file" % path)
    if cfg is None:
        raise KubeConfigError("kubeconfig '%s': empty" % path)
    if not isinstance(cfg, dict):
        raise KubeConfigError("kubeconfig '%s': not a kubeconfig (a YAML %s, not a mapping)"
                              % (path, type(cfg).__name__))
    for section in ("clusters", "contexts", "users"):
        items = cfg.get(section)
        if items is not None and (not isinstance(items, list)
                                  or not all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in items)):
            raise KubeConfigError("kubeconfig '%s': '%s' must be a list of entries with a name" % (path, section))
    return cfg


def merge(paths):
    """kubectl's merge of several files: the first file that sets a name (or current-context) wins. Each
    entry remembers the directory of its file, which relative paths in it are resolved against."""
    merged = {"clusters": {}, "contexts": {}, "users": {}, "current-context": None}
    for path in paths:
        cfg = _read_file(path)
        base = os.path.dirname(os.path.abspath(os.path.expanduser(path)))
        if not merged["current-context"] and cfg.get("current-context"):
            merged["current-context"] = cfg["current-context"]
        for section in ("clusters", "contexts", "users"):
            for item in cfg.get(section) or []:
                merged[section].setdefault(item["name"], (item.get(section[:-1]) or {}, base, path))
    return merged


def _material(holder, data_key, file_key, base, where, what):
    if holder.get(data_key):
        try:
            return base64.b64decode(holder[data_key], validate=True)
        except (binascii.Error, ValueError, TypeError):
            raise KubeConfigError("%s: %s '%s' is not valid base64" % (where, what, data_key))
    if holder.get(file_key):
        path = os.path.join(base, os.path.expanduser(holder[file_key]))
        try:
            with open(path, "rb") as f:
                return f.read()
        except OSError as exc:
            raise KubeConfigError("%s: %s file '%s' cannot be read (%s)" % (where, what, path, exc.strerror))
    return None


def from_kubeconfig(paths, context=None, origin=None):
    """ClusterConfig of `context` (default current-context) in the kubeconfig file(s) `paths`; `origin`, the
    environment variable that named them, is said in messages."""
    if isinstance(paths, str):
        paths = [p for p in paths.split(os.pathsep) if p] or [paths]
    label = "kubeconfig '%s'" % os.pathsep.join(paths) + (" (%s)" % origin if origin else "")
    merged = merge(paths)
    ctx_name = context or merged["current-context"]
    if not ctx_name:
        raise KubeConfigError("%s: no current-context, and no context was given" % label)
    where = "%s, context '%s'" % (label, ctx_name)
    if ctx_name not in merged["contexts"]:
        raise KubeConfigError("%s: no such context (contexts: %s)"
                              % (where, ", ".join(sorted(merged["contexts"])) or "none"))
    ctx = merged["contexts"][ctx_name][0]
    if not ctx.get("cluster") or ctx["cluster"] not in merged["clusters"]:
        raise KubeConfigError("%s: cluster '%s' is not defined" % (where, ctx.get("cluster")))
    cluster, cbase = merged["clusters"][ctx["cluster"]][:2]
    user, ubase = {}, cbase
    if ctx.get("user"):
        if ctx["user"] not in merged["users"]:
            raise KubeConfigError("%s: user '%s' is not defined" % (where, ctx["user"]))
        user, ubase = merged["users"][ctx["user"]][:2]
    if not cluster.get("server"):
        raise KubeConfigError("%s: cluster '%s' has no server" % (where, ctx["cluster"]))
    kwargs = {
        "ca_data": _material(cluster, "certificate-authority-data", "certificate-authority", cbase, where,
                             "certificate authority"),
        "insecure": bool(cluster.get("insecure-skip-tls-verify")),
        "tls_server_name": cluster.get("tls-server-name"),
        "proxy_url": cluster.get("proxy-url"),
        "cert_pem": _material(user, "client-certificate-data", "client-certificate", ubase, where, "client certificate"),
        "key_pem": _material(user, "client-key-data", "client-key", ubase, where, "client key"),
    }
    token, token_source = user.get("token"), "token"
    if not token and user.get("tokenFile"):
        token_path = os.path.join(ubase, os.path.expanduser(user["tokenFile"]))
        try:
            with open(token_path, encoding="utf-8") as f:
                token = f.read().strip()
            token_source = "tokenFile '%s'" % token_path
        except OSError as exc:
            raise KubeConfigError("%s: tokenFile '%s' cannot be read (%s)" % (where, token_path, exc.strerror))
    if token:
        kwargs["token"] = token
    elif user.get("exec"):
        spec = user["exec"]
        if not isinstance(spec, dict) or not spec.get("command") or not spec.get("apiVersion"):
            raise KubeConfigError("%s: user '%s' has an exec section without command or apiVersion"
                                  % (where, ctx.get("user")))
        kwargs.update(exec_spec=spec, exec_cwd=ubase, cluster_info=cluster)
    elif user.get("auth-provider"):
        kwargs["provider"] = _auth_provider(paths, ctx_name, where)
    elif user.get("username"):
        kwargs["basic"] = (user["username"], user.get("password") or "")
    cfg = ClusterConfig(cluster["server"], label, ctx_name, **kwargs)
    cfg.cluster_name, cfg.token_source = ctx["cluster"], token_source
    return cfg


def _auth_provider(paths, context, where):
    """Token of an auth-provider user (oidc, gcp), resolved by the kubernetes package's loader."""
    def token():
        try:
            # pylint: disable=import-outside-toplevel
            from kubernetes.client import Configuration
            from kubernetes.config import kube_config
        except ImportError:
            raise KubeConfigError("%s: an auth-provider user needs the Python library 'kubernetes'" % where)
        cfg = Configuration()
        try:
            kube_config.load_kube_config(config_file=os.pathsep.join(paths), context=context,
                                         client_configuration=cfg, persist_config=False)
        except Exception as exc:  # the library raises many types for a provider it cannot run
            raise KubeConfigError("%s: auth-provider credentials cannot be obtained: %s" % (where, exc))
        value = (cfg.api_key or {}).get("BearerToken") or (cfg.api_key or {}).get("authorization")
        if not value:
            raise KubeConfigError("%s: the auth-provider gave no token" % where)
        return value.split(" ", 1)[1] if value.startswith("Bearer ") else value
    return token


def in_cluster():
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
    if ":" in (host or ""):
        host = "[%s]" % host
    try:
        with open(os.path.join(SA_DIR, "token"), encoding="utf-8") as f:
            token = f.read().strip()
        with open(os.path.join(SA_DIR, "ca.crt"), "rb") as f:
            ca = f.read()
    except OSError as exc:
        raise KubeConfigError("in-cluster service account: %s cannot be read (%s)" % (exc.filename, exc.strerror))
    cfg = ClusterConfig("https://%s:%s" % (host, port), IN_CLUSTER, ca_data=ca, token=token)
    cfg.token_source = "service account token"
    return cfg


def _from_env_host(host):
    """kubernetes.core's connection variables without a kubeconfig (K8S_AUTH_HOST and friends)."""
    def read(name, what):
        path = _env(name)
        if not path:
            return None
        try:
            with open(os.path.expanduser(path), "rb") as f:
                return f.read()
        except OSError as exc:
            raise KubeConfigError("K8S_AUTH_%s: %s '%s' cannot be read (%s)" % (name, what, path, exc.strerror))
    verify = _env_bool("VERIFY_SSL")
    username = _env("USERNAME")
    cfg = ClusterConfig(host, "K8S_AUTH_HOST", ca_data=read("SSL_CA_CERT", "CA"), insecure=verify is False,
                        cert_pem=read("CERT_FILE", "client certificate"), key_pem=read("KEY_FILE", "client key"),
                        token=_env("API_KEY"), basic=(username, _env("PASSWORD") or "") if username else None,
                        proxy_url=_env("PROXY"))
    cfg.token_source = "K8S_AUTH_API_KEY"
    return cfg


def locate(kubeconfig=None, option="kubeconfig option"):
    """Where load() takes the cluster from, without reading it: (kubeconfig path(s) or None, source). The first of
    `kubeconfig` (source `option`), K8S_AUTH_KUBECONFIG, K8S_AUTH_HOST (None: no file), the in-cluster service account
    (None), KUBECONFIG, ~/.kube/config. KubeConfigError naming every place it looked when there is none."""
    if kubeconfig:
        return kubeconfig, option
    if _env("KUBECONFIG"):
        return _env("KUBECONFIG"), "K8S_AUTH_KUBECONFIG"
    if _env("HOST"):
        return None, "K8S_AUTH_HOST"
    if os.environ.get("KUBERNETES_SERVICE_HOST") and os.path.exists(os.path.join(SA_DIR, "token")):
        return None, IN_CLUSTER
    if os.environ.get("KUBECONFIG"):
        return os.environ["KUBECONFIG"], "KUBECONFIG"
    if os.path.exists(os.path.expanduser(DEFAULT_KUBECONFIG)):
        return DEFAULT_KUBECONFIG, DEFAULT_KUBECONFIG
    raise KubeConfigError("no cluster given: no %s, K8S_AUTH_KUBECONFIG, K8S_AUTH_HOST or KUBECONFIG, no %s, and not "
                          "running in a pod with a service account" % (option, DEFAULT_KUBECONFIG))


def load(kubeconfig=None, context=None):
    """The cluster's ClusterConfig, from the first of: `kubeconfig` (a path, or several joined by ':'),
    K8S_AUTH_KUBECONFIG, K8S_AUTH_HOST (+ K8S_AUTH_API_KEY, ...), the in-cluster service account, KUBECONFIG,
    ~/.kube/config (locate). `context` defaults to K8S_AUTH_CONTEXT, then the file's current-context."""
    context = context or _env("CONTEXT")
    path, source = locate(kubeconfig)
    if source == "K8S_AUTH_HOST":
        cfg = _from_env_host(_env("HOST"))
    elif source == IN_CLUSTER:
        cfg = in_cluster()
    else:
        cfg = from_kubeconfig(path, context, source if source in ("K8S_AUTH_KUBECONFIG", "KUBECONFIG") else None)
    return _env_overrides(cfg)


def _env_overrides(cfg):
    """K8S_AUTH_VERIFY_SSL / K8S_AUTH_PROXY / K8S_AUTH_API_KEY beside a kubeconfig, as kubernetes.core applies them."""
    verify = _env_bool("VERIFY_SSL")
    if verify is False and not cfg.insecure:
        cfg.insecure, cfg._ssl = True, None  # pylint: disable=protected-access
    if _env("PROXY") and not cfg.proxy_url:
        cfg.proxy_url, cfg.proxy = _env("PROXY"), _proxy(_env("PROXY"), cfg.where())
    if _env("API_KEY") and cfg.source != "K8S_AUTH_HOST":
        cfg.token, cfg.token_source = _env("API_KEY"), "K8S_AUTH_API_KEY"
    return cfg
