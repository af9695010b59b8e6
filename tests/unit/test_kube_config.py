"""kube_config + kube_rest against a real TLS server on loopback that asks for a client certificate: every kind of
kubeconfig credential kubectl accepts (client certificate data/files, token, tokenFile, basic, exec plugins with
their expiry and a 401, auth through an HTTP CONNECT proxy, tls-server-name, contexts, several files in
KUBECONFIG, kubernetes.core's K8S_AUTH_* variables) and the errors for broken or unreachable configurations."""
import base64
import datetime
import http.server
import ipaddress
import json
import os
import select
import socket
import socketserver
import ssl
import stat
import sys
import threading
import time

import pytest
import yaml

from ansible_collections.liqo.fabric.plugins.module_utils.kube import config as kube_config
from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import Kube, KubeError, with_kube
from ansible_collections.liqo.fabric.plugins.module_utils.kube.rest import (
    ApiError, Connection, KubeConfigError, Unauthorized, Unreachable)

x509 = pytest.importorskip("cryptography.x509", reason="cryptography is needed to make test certificates")
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402


def make_cert(common_name, issuer=None, ca=False, server=False):
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    issuer_cert, issuer_key = issuer or (None, key)
    builder = (x509.CertificateBuilder().subject_name(name)
               .issuer_name(issuer_cert.subject if issuer_cert else name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(hours=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName([
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("apiserver.lfab.test")]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256()), key


def pem(cert):
    return cert.public_bytes(serialization.Encoding.PEM)


def pem_key(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def b64(data):
    return base64.b64encode(data).decode()


@pytest.fixture(scope="module")
def pki():
    ca = make_cert("lfab-test-ca", ca=True)
    return {"ca": ca, "server": make_cert("apiserver", issuer=ca, server=True), "alice": make_cert("alice", issuer=ca)}


@pytest.fixture(scope="module")
def server(pki, tmp_path_factory):
    """HTTPS server answering {"path", "auth", "cn"} (cn: the client certificate's CN); a 401 for token 'revoked'."""
    tmp = tmp_path_factory.mktemp("srv")
    (tmp / "server.crt").write_bytes(pem(pki["server"][0]))
    (tmp / "server.key").write_bytes(pem_key(pki["server"][1]))

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):  # noqa: N802 - http.server's name
            peer = self.connection.getpeercert() or {}
            cn = dict(x[0] for x in peer.get("subject", ())).get("commonName")
            auth = self.headers.get("Authorization")
            status, answer = 200, {"path": self.path, "auth": auth, "cn": cn}
            if auth == "Bearer revoked":
                status, answer = 401, {"kind": "Status", "message": "Unauthorized"}
            body = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(tmp / "server.crt"), str(tmp / "server.key"))
    ctx.load_verify_locations(cadata=pem(pki["ca"][0]).decode())
    ctx.verify_mode = ssl.CERT_OPTIONAL  # a client certificate when given, else the token decides
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield "https://127.0.0.1:%d" % httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def proxy():
    """A minimal HTTP CONNECT proxy on loopback; `.tunnels` lists the targets it opened, `.auth` the headers."""
    class Handler(socketserver.StreamRequestHandler):
        def handle(self):
            request = self.rfile.readline().decode()
            headers = {}
            while True:
                line = self.rfile.readline().decode().strip()
                if not line:
                    break
                name, dummy, value = line.partition(":")
                headers[name.lower()] = value.strip()
            method, target = request.split(" ", 2)[:2]
            if method != "CONNECT":
                self.wfile.write(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")
                return
            host, port = target.rsplit(":", 1)
            Handler.tunnels.append(target)
            Handler.auth.append(headers.get("proxy-authorization"))
            with socket.create_connection((host, int(port))) as upstream:
                self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                self.wfile.flush()
                pair = {self.connection: upstream, upstream: self.connection}
                while True:
                    ready = select.select(list(pair), [], [], 5)[0]
                    if not ready:
                        return
                    for sock in ready:
                        data = sock.recv(65536)
                        if not data:
                            return
                        pair[sock].sendall(data)

    Handler.tunnels, Handler.auth = [], []
    srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    srv.tunnels, srv.auth = Handler.tunnels, Handler.auth
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in list(os.environ):
        if name.startswith("K8S_AUTH_") or name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", "/nonexistent-lfab-home")
    kube_config._EXEC_CACHE.clear()  # pylint: disable=protected-access


def write_kubeconfig(path, server, user, cluster_extra=None, contexts=None, current="c"):
    cluster = {"server": server}
    cluster.update(cluster_extra or {})
    cfg = {"apiVersion": "v1", "kind": "Config", "current-context": current,
           "clusters": [{"name": "c", "cluster": cluster}],
           "contexts": contexts or [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
           "users": [{"name": "u", "user": user}]}
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def ca_extra(pki):
    return {"certificate-authority-data": b64(pem(pki["ca"][0]))}


def get(path, context=None, **kwargs):
    conn = Connection.load(path, context, **kwargs)
    try:
        return conn.request("GET", "/version")
    finally:
        conn.close()


def test_client_certificate_data(pki, server, tmp_path):
    cert, key = pki["alice"]
    path = write_kubeconfig(tmp_path / "kc", server, {"client-certificate-data": b64(pem(cert)),
                                                      "client-key-data": b64(pem_key(key))}, ca_extra(pki))
    assert get(path) == {"path": "/version", "auth": None, "cn": "alice"}


def test_client_certificate_files_relative_to_the_kubeconfig(pki, server, tmp_path):
    cert, key = pki["alice"]
    (tmp_path / "pki").mkdir()
    (tmp_path / "pki" / "alice.crt").write_bytes(pem(cert))
    (tmp_path / "pki" / "alice.key").write_bytes(pem_key(key))
    (tmp_path / "pki" / "ca.crt").write_bytes(pem(pki["ca"][0]))
    path = write_kubeconfig(tmp_path / "kc", server, {"client-certificate": "pki/alice.crt", "client-key": "pki/alice.key"},
                            {"certificate-authority": "pki/ca.crt"})
    assert get(path)["cn"] == "alice"


def test_token_and_token_file(pki, server, tmp_path):
    assert get(write_kubeconfig(tmp_path / "a", server, {"token": "t0k3n"}, ca_extra(pki)))["auth"] == "Bearer t0k3n"
    (tmp_path / "token").write_text("from-file\n")
    assert get(write_kubeconfig(tmp_path / "b", server, {"tokenFile": "token"}, ca_extra(pki)))["auth"] == "Bearer from-file"


def test_basic_auth(pki, server, tmp_path):
    path = write_kubeconfig(tmp_path / "kc", server, {"username": "bob", "password": "pw"}, ca_extra(pki))
    assert get(path)["auth"] == "Basic " + b64(b"bob:pw")


def test_tls_server_name_is_verified_instead_of_the_address(pki, server, tmp_path):
    url = server.replace("127.0.0.1", "localhost")  # not in the certificate: only tls-server-name makes it pass
    good = write_kubeconfig(tmp_path / "a", url, {"token": "x"}, dict(ca_extra(pki), **{"tls-server-name": "apiserver.lfab.test"}))
    assert get(good)["auth"] == "Bearer x"
    bad = write_kubeconfig(tmp_path / "b", url, {"token": "x"}, dict(ca_extra(pki), **{"tls-server-name": "other.lfab.test"}))
    with pytest.raises(Unreachable, match="TLS: .*CERTIFICATE_VERIFY_FAILED"):
        get(bad)


def test_contexts_and_the_k8s_auth_variables(pki, server, tmp_path, monkeypatch):
    contexts = [{"name": "c", "context": {"cluster": "c", "user": "u"}},
                {"name": "other", "context": {"cluster": "c", "user": "v"}}]
    path = write_kubeconfig(tmp_path / "kc", server, {"token": "u-token"}, ca_extra(pki), contexts)
    cfg = yaml.safe_load(open(path))
    cfg["users"].append({"name": "v", "user": {"token": "v-token"}})
    (tmp_path / "kc").write_text(yaml.safe_dump(cfg))
    assert get(path)["auth"] == "Bearer u-token"
    assert get(path, "other")["auth"] == "Bearer v-token"
    monkeypatch.setenv("K8S_AUTH_KUBECONFIG", path)  # kubernetes.core's variables, no kubeconfig option
    monkeypatch.setenv("K8S_AUTH_CONTEXT", "other")
    assert get(None)["auth"] == "Bearer v-token"
    kube = Kube()  # what every module does with its kubeconfig/context options unset
    try:
        assert kube.request("GET", "/x")["auth"] == "Bearer v-token"
    finally:
        kube.close()


def test_k8s_auth_host_without_kubeconfig(pki, server, tmp_path, monkeypatch):
    (tmp_path / "ca.crt").write_bytes(pem(pki["ca"][0]))
    monkeypatch.setenv("K8S_AUTH_HOST", server)
    monkeypatch.setenv("K8S_AUTH_API_KEY", "env-key")
    monkeypatch.setenv("K8S_AUTH_SSL_CA_CERT", str(tmp_path / "ca.crt"))
    assert get(None)["auth"] == "Bearer env-key"
    monkeypatch.delenv("K8S_AUTH_SSL_CA_CERT")
    with pytest.raises(Unreachable, match="CERTIFICATE_VERIFY_FAILED"):
        get(None)
    monkeypatch.setenv("K8S_AUTH_VERIFY_SSL", "no")
    assert get(None)["auth"] == "Bearer env-key"


def test_kubeconfig_variable_merges_several_files(pki, server, tmp_path, monkeypatch):
    """kubectl's KUBECONFIG=a:b: clusters from one file, users and contexts from another, first name wins."""
    (tmp_path / "tok").write_text("merged")
    (tmp_path / "one").write_text(yaml.safe_dump({"clusters": [{"name": "c", "cluster": dict(server=server, **ca_extra(pki))}],
                                                  "current-context": "m"}))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "tok").write_text("relative-to-its-own-file")
    (tmp_path / "sub" / "two").write_text(yaml.safe_dump({
        "contexts": [{"name": "m", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"tokenFile": "tok"}}], "current-context": "ignored"}))
    monkeypatch.setenv("KUBECONFIG", "%s:%s" % (tmp_path / "one", tmp_path / "sub" / "two"))
    assert get(None)["auth"] == "Bearer relative-to-its-own-file"


def test_insecure_skip_tls_verify(server, tmp_path):
    path = write_kubeconfig(tmp_path / "kc", server, {"token": "x"}, {"insecure-skip-tls-verify": True})
    assert get(path)["auth"] == "Bearer x"


def test_proxy_url(pki, server, proxy, tmp_path):
    before = len(proxy.tunnels)
    path = write_kubeconfig(tmp_path / "kc", server, {"token": "via-proxy"},
                            dict(ca_extra(pki), **{"proxy-url": "http://user:pa%%40ss@127.0.0.1:%d" % proxy.server_address[1]}))
    assert get(path)["auth"] == "Bearer via-proxy"
    assert proxy.tunnels[before:] == [server.split("//")[1]]
    assert proxy.auth[-1] == "Basic " + b64(b"user:pa@ss")


def test_proxy_from_k8s_auth_proxy(pki, server, proxy, tmp_path, monkeypatch):
    before = len(proxy.tunnels)
    monkeypatch.setenv("K8S_AUTH_PROXY", "http://127.0.0.1:%d" % proxy.server_address[1])
    assert get(write_kubeconfig(tmp_path / "kc", server, {"token": "p"}, ca_extra(pki)))["auth"] == "Bearer p"
    assert len(proxy.tunnels) == before + 1


def test_unsupported_proxy_scheme_is_named(pki, server, tmp_path):
    path = write_kubeconfig(tmp_path / "kc", server, {"token": "x"}, dict(ca_extra(pki), **{"proxy-url": "socks5://127.0.0.1:1080"}))
    with pytest.raises(KubeConfigError, match=r"kubeconfig '.*kc', context 'c': proxy-url 'socks5://127.0.0.1:1080' is not supported"):
        get(path)


# --- exec credential plugins ---------------------------------------------------------------------
def exec_plugin(tmp_path, body):
    """An executable Python script printing an ExecCredential; it appends a line to `runs` on every run."""
    script = tmp_path / "plugin.py"
    script.write_text("#!%s\nimport datetime, json, os, sys\n"
                      "with open(os.path.join(os.path.dirname(__file__), 'runs'), 'a') as f: f.write('x\\n')\n"
                      "runs = len(open(os.path.join(os.path.dirname(__file__), 'runs')).read().split())\n"
                      "info = json.loads(os.environ['KUBERNETES_EXEC_INFO'])\n%s\n" % (sys.executable, body))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def runs(tmp_path):
    path = tmp_path / "runs"
    return len(path.read_text().split()) if path.exists() else 0


def exec_user(args=None, env=None):
    spec = {"apiVersion": "client.authentication.k8s.io/v1", "command": "./plugin.py", "interactiveMode": "Never"}
    if args:
        spec["args"] = args
    if env:
        spec["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return {"exec": spec}


TOKEN_PLUGIN = """
lifetime = int(os.environ.get('LIFETIME', '3600'))
token = os.environ.get('TOKENS', 'tok-%d').split(',')[min(runs, len(os.environ.get('TOKENS', 'x').split(','))) - 1]
expiry = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=lifetime)).strftime('%Y-%m-%dT%H:%M:%SZ')
print(json.dumps({'apiVersion': info['apiVersion'], 'kind': 'ExecCredential',
                  'status': {'token': token.replace('%d', str(runs)), 'expirationTimestamp': expiry}}))
"""


def test_exec_plugin_token_is_cached_until_its_expiry(pki, server, tmp_path):
    exec_plugin(tmp_path, TOKEN_PLUGIN)
    path = write_kubeconfig(tmp_path / "kc", server, exec_user(env={"LIFETIME": "3600"}), ca_extra(pki))
    assert get(path)["auth"] == "Bearer tok-1"
    assert get(path)["auth"] == "Bearer tok-1"  # a second client in this process: the cached credential
    assert runs(tmp_path) == 1


def test_an_expired_exec_credential_is_fetched_again(pki, server, tmp_path):
    exec_plugin(tmp_path, TOKEN_PLUGIN)
    # valid for 14 s: 4 s later it is within the 10 s safety margin, so the next request fetches a new one
    # (4 s, not 1, so that a slow start of the plugin on a loaded machine does not expire it early)
    path = write_kubeconfig(tmp_path / "kc", server, exec_user(env={"LIFETIME": "14"}), ca_extra(pki))
    conn = Connection.load(path)
    try:
        assert conn.request("GET", "/a")["auth"] == "Bearer tok-1"
        assert conn.request("GET", "/a")["auth"] == "Bearer tok-1"
        time.sleep(4.5)
        assert conn.request("GET", "/b")["auth"] == "Bearer tok-2"
    finally:
        conn.close()
    assert runs(tmp_path) == 2


def test_a_401_makes_the_exec_plugin_run_again(pki, server, tmp_path):
    exec_plugin(tmp_path, TOKEN_PLUGIN)
    path = write_kubeconfig(tmp_path / "kc", server, exec_user(env={"TOKENS": "revoked,fresh"}), ca_extra(pki))
    assert get(path)["auth"] == "Bearer fresh"
    assert runs(tmp_path) == 2


def test_exec_plugin_with_client_certificate(pki, server, tmp_path):
    cert, key = pki["alice"]
    exec_plugin(tmp_path, "print(json.dumps({'apiVersion': info['apiVersion'], 'kind': 'ExecCredential', 'status': "
                          "{'clientCertificateData': %r, 'clientKeyData': %r}}))" % (pem(cert).decode(), pem_key(key).decode()))
    path = write_kubeconfig(tmp_path / "kc", server, exec_user(), ca_extra(pki))
    assert get(path) == {"path": "/version", "auth": None, "cn": "alice"}


def test_exec_plugin_failure_names_the_plugin_and_its_error(pki, server, tmp_path):
    exec_plugin(tmp_path, "sys.stderr.write('no credentials for profile prod'); sys.exit(3)")
    path = write_kubeconfig(tmp_path / "kc", server, exec_user(), ca_extra(pki))
    with pytest.raises(KubeConfigError, match=r"kubeconfig '.*kc', context 'c': exec plugin './plugin.py' failed: "
                                              r"exec: process returned 3. no credentials for profile prod"):
        Connection.load(path)


def test_exec_plugin_output_without_credentials(pki, server, tmp_path):
    exec_plugin(tmp_path, "print(json.dumps({'apiVersion': info['apiVersion'], 'kind': 'ExecCredential', 'status': {}}))")
    path = write_kubeconfig(tmp_path / "kc", server, exec_user(), ca_extra(pki))
    with pytest.raises(KubeConfigError, match="returned neither a token nor clientCertificateData"):
        Connection.load(path)


# --- errors --------------------------------------------------------------------------------------
@pytest.mark.parametrize("content,expected", [
    (None, r"kubeconfig '{p}': no such file"),
    ("a: [b\n", r"kubeconfig '{p}': not valid YAML"),
    ("", r"kubeconfig '{p}': empty"),
    ("clusters: {{a: 1}}\n", r"kubeconfig '{p}': 'clusters' must be a list of entries with a name"),
    ("clusters: []\n", r"kubeconfig '{p}': no current-context, and no context was given"),
    ("current-context: x\ncontexts: [{{name: y, context: {{cluster: c}}}}]\n",
     r"kubeconfig '{p}', context 'x': no such context \(contexts: y\)"),
    ("current-context: x\ncontexts: [{{name: x, context: {{cluster: c}}}}]\n",
     r"kubeconfig '{p}', context 'x': cluster 'c' is not defined"),
    ("current-context: x\ncontexts: [{{name: x, context: {{cluster: c, user: u}}}}]\nclusters: [{{name: c, cluster: {{server: 'https://h'}}}}]\n",
     r"kubeconfig '{p}', context 'x': user 'u' is not defined"),
    ("current-context: x\ncontexts: [{{name: x, context: {{cluster: c}}}}]\nclusters: [{{name: c, cluster: {{}}}}]\n",
     r"kubeconfig '{p}', context 'x': cluster 'c' has no server"),
    ("current-context: x\ncontexts: [{{name: x, context: {{cluster: c}}}}]\n"
     "clusters: [{{name: c, cluster: {{server: 'https://h', certificate-authority-data: '!!notb64'}}}}]\n",
     r"kubeconfig '{p}', context 'x': certificate authority 'certificate-authority-data' is not valid base64"),
    ("current-context: x\ncontexts: [{{name: x, context: {{cluster: c}}}}]\n"
     "clusters: [{{name: c, cluster: {{server: 'https://h', certificate-authority: missing.crt}}}}]\n",
     r"kubeconfig '{p}', context 'x': certificate authority file '.*missing.crt' cannot be read"),
    ("current-context: x\ncontexts: [{{name: x, context: {{cluster: c}}}}]\n"
     "clusters: [{{name: c, cluster: {{server: 'https://h', certificate-authority-data: 'bm90IGEgY2VydA=='}}}}]\n",
     r"kubeconfig '{p}', context 'x': the certificate authority is not a usable PEM certificate"),
])
def test_a_broken_kubeconfig_gives_one_error_naming_the_file(tmp_path, content, expected):
    path = tmp_path / "kc"
    if content is not None:
        path.write_text(content.replace("{{", "{").replace("}}", "}"))
    with pytest.raises(KubeError, match="^" + expected.format(p=path)):
        Kube(str(path))


def test_without_any_cluster_every_place_looked_at_is_named():
    with pytest.raises(KubeConfigError) as info:
        kube_config.load()
    assert str(info.value) == ("no cluster given: no kubeconfig option, K8S_AUTH_KUBECONFIG, K8S_AUTH_HOST or "
                               "KUBECONFIG, no ~/.kube/config, and not running in a pod with a service account")


@pytest.mark.parametrize("env,expected", [
    ({}, None),
    ({"KUBECONFIG": "/k"}, ("/k", "KUBECONFIG")),
    ({"KUBECONFIG": "/k", "K8S_AUTH_HOST": "https://h"}, (None, "K8S_AUTH_HOST")),
    ({"KUBECONFIG": "/k", "K8S_AUTH_HOST": "https://h", "K8S_AUTH_KUBECONFIG": "/a:/b"}, ("/a:/b", "K8S_AUTH_KUBECONFIG")),
    ({"K8S_AUTH_KUBECONFIG": ""}, None),  # empty is unset, as kubernetes.core reads it
])
def test_locate_takes_the_first_of_option_k8s_auth_kubeconfig_host_kubeconfig(monkeypatch, env, expected):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert kube_config.locate("/given") == ("/given", "kubeconfig option")
    if expected is None:
        with pytest.raises(KubeConfigError, match="^no cluster given: no -e kubeconfig=PATH, K8S_AUTH_KUBECONFIG"):
            kube_config.locate(None, "-e kubeconfig=PATH")
    else:
        assert kube_config.locate(None) == expected


def test_locate_falls_back_to_the_home_kubeconfig(monkeypatch, tmp_path):
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "config").write_text("{}")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert kube_config.locate() == ("~/.kube/config", "~/.kube/config")


# --- 401: the message names the server and where the credentials came from, as Unreachable's does ------
def unauthorized(path=None):
    with pytest.raises(Unauthorized) as info:
        get(path)
    assert info.value.status == 401 and isinstance(info.value, ApiError)
    return str(info.value)


def test_a_401_names_the_server_the_kubeconfig_its_context_and_the_credentials(pki, server, tmp_path, monkeypatch):
    path = write_kubeconfig(tmp_path / "kc", server, {"token": "revoked"}, ca_extra(pki))
    assert unauthorized(path) == ("the Kubernetes API at %s (kubeconfig '%s', context 'c') refused the credentials "
                                  "(token): 401 Unauthorized to GET /version" % (server, path))
    (tmp_path / "tok").write_text("revoked\n")
    path = write_kubeconfig(tmp_path / "kc", server, {"tokenFile": "tok"}, ca_extra(pki))
    assert "(kubeconfig '%s', context 'c') refused the credentials (tokenFile '%s')" % (path, tmp_path / "tok") \
        in unauthorized(path)
    monkeypatch.setenv("K8S_AUTH_KUBECONFIG", path)  # the variable that named the file is said too
    assert ("at %s (kubeconfig '%s' (K8S_AUTH_KUBECONFIG), context 'c') refused" % (server, path)) in unauthorized()


def test_a_401_with_k8s_auth_host_names_the_variables(pki, server, tmp_path, monkeypatch):
    (tmp_path / "ca.crt").write_bytes(pem(pki["ca"][0]))
    monkeypatch.setenv("K8S_AUTH_HOST", server)
    monkeypatch.setenv("K8S_AUTH_API_KEY", "revoked")
    monkeypatch.setenv("K8S_AUTH_SSL_CA_CERT", str(tmp_path / "ca.crt"))
    assert unauthorized() == ("the Kubernetes API at %s (K8S_AUTH_HOST) refused the credentials (K8S_AUTH_API_KEY): "
                              "401 Unauthorized to GET /version" % server)
    # beside a kubeconfig, K8S_AUTH_API_KEY replaces its token: the message says which one was sent
    path = write_kubeconfig(tmp_path / "kc", server, {"token": "fine"}, ca_extra(pki))
    assert "(kubeconfig '%s', context 'c') refused the credentials (K8S_AUTH_API_KEY)" % path in unauthorized(path)


def test_a_401_after_a_fresh_exec_credential_names_the_plugin(pki, server, tmp_path):
    exec_plugin(tmp_path, TOKEN_PLUGIN)
    path = write_kubeconfig(tmp_path / "kc", server, exec_user(env={"TOKENS": "revoked,revoked"}), ca_extra(pki))
    assert "context 'c') refused the credentials (exec plugin './plugin.py'): 401 Unauthorized" in unauthorized(path)
    assert runs(tmp_path) == 2  # the plugin was asked once more before giving up


def test_a_401_fails_a_module_with_that_message_alone(pki, server, tmp_path):
    """with_kube (every API module): the message as it is, no 'Kubernetes API error' prefix nor traceback; a watch too."""
    path = write_kubeconfig(tmp_path / "kc", server, {"token": "revoked"}, ca_extra(pki))

    class Module:
        check_mode = False
        params = {"kubeconfig": path, "context": None, "assume": None}

        def fail_json(self, **kwargs):
            raise SystemExit(kwargs)

    with pytest.raises(SystemExit) as info:
        with_kube(Module(), lambda kube: kube.request("GET", "/x"))
    assert info.value.args[0] == {"msg": "the Kubernetes API at %s (kubeconfig '%s', context 'c') refused the "
                                         "credentials (token): 401 Unauthorized to GET /x" % (server, path)}
    conn = Connection.load(path)
    with pytest.raises(Unauthorized, match="refused the credentials \\(token\\): 401 Unauthorized to GET /w"):
        conn.stream("/w")


def test_unreachable_apiserver_names_url_kubeconfig_and_context(pki, tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = write_kubeconfig(tmp_path / "kc", "https://127.0.0.1:%d" % port, {"token": "x"}, ca_extra(pki))
    with pytest.raises(Unreachable) as info:
        get(path)
    assert str(info.value) == ("cannot reach the Kubernetes API at https://127.0.0.1:%d (kubeconfig '%s', context 'c'): "
                               "Connection refused" % (port, path))
    assert info.value.status == 0


def test_auth_provider_oidc_through_the_kubernetes_loader(pki, server, tmp_path):
    """An oidc auth-provider user whose id-token is still valid: the kubernetes package's loader gives the token
    (no identity provider is contacted)."""
    def part(obj):
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")
    exp = int(time.time()) + 3600
    token = "%s.%s.c2ln" % (part({"alg": "none"}), part({"sub": "alice", "exp": exp}))
    user = {"auth-provider": {"name": "oidc", "config": {
        "client-id": "lfab", "id-token": token, "idp-issuer-url": "https://127.0.0.1:1", "refresh-token": "r"}}}
    path = write_kubeconfig(tmp_path / "kc", server, user, ca_extra(pki))
    assert get(path)["auth"] == "Bearer " + token
