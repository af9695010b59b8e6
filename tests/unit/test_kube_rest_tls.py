"""kube_rest's TLS trust: the kubeconfig's CA is the only trust root when it gives one (the system store is
not loaded), insecure-skip-tls-verify and clusters without CA data keep the default context. Checked with a
real TLS server on loopback whose certificate is signed by a throwaway CA."""
import base64
import datetime
import http.server
import ipaddress
import json
import ssl
import threading

import pytest
import yaml

from ansible_collections.liqo.fabric.plugins.module_utils.kube.rest import Connection, KubeConfigError, Unreachable

x509 = pytest.importorskip("cryptography.x509", reason="cryptography is needed to make test certificates")
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402


def make_cert(common_name, issuer=None, ca=False):
    """(certificate, key); self-signed CA when issuer is None, else a 127.0.0.1 server cert signed by it."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    issuer_cert, issuer_key = issuer or (None, key)
    builder = (x509.CertificateBuilder().subject_name(name)
               .issuer_name(issuer_cert.subject if issuer_cert else name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(hours=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                                        critical=False)
    return builder.sign(issuer_key, hashes.SHA256()), key


def pem(cert):
    return cert.public_bytes(serialization.Encoding.PEM)


@pytest.fixture(scope="module")
def pki():
    ca = make_cert("lfab-test-ca", ca=True)
    other_ca = make_cert("lfab-other-ca", ca=True)
    server = make_cert("127.0.0.1", issuer=ca)
    return {"ca": ca, "other_ca": other_ca, "server": server}


@pytest.fixture(scope="module")
def server_url(pki, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tls")
    cert, key = pki["server"]
    (tmp / "server.crt").write_bytes(pem(cert))
    (tmp / "server.key").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                       serialization.NoEncryption()))

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            body = json.dumps({"path": self.path}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(tmp / "server.crt"), str(tmp / "server.key"))
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield "https://127.0.0.1:%d" % httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def kubeconfig(tmp_path, server, **cluster):
    cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
           "clusters": [{"name": "c", "cluster": dict(server=server, **cluster)}],
           "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
           "users": [{"name": "u", "user": {"token": "t0k3n"}}]}
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def b64(cert):
    return base64.b64encode(pem(cert)).decode()


def ca_subjects(conn):
    return [dict(x[0] for x in c["subject"]).get("commonName", "(system CA)") for c in conn.config.ssl_context().get_ca_certs()]


def test_kubeconfig_ca_is_the_only_trust_root(pki, server_url, tmp_path):
    conn = Connection.from_kubeconfig(kubeconfig(tmp_path, server_url, **{"certificate-authority-data": b64(pki["ca"][0])}))
    try:
        assert ca_subjects(conn) == ["lfab-test-ca"]  # no system CA loaded
        assert conn.config.ssl_context().verify_mode == ssl.CERT_REQUIRED and conn.config.ssl_context().check_hostname
        assert conn.request("GET", "/version") == {"path": "/version"}
    finally:
        conn.close()


def test_ca_file_relative_to_the_kubeconfig(pki, server_url, tmp_path):
    (tmp_path / "ca.crt").write_bytes(pem(pki["ca"][0]))
    conn = Connection.from_kubeconfig(kubeconfig(tmp_path, server_url, **{"certificate-authority": "ca.crt"}))
    try:
        assert ca_subjects(conn) == ["lfab-test-ca"]
        assert conn.request("GET", "/x") == {"path": "/x"}
    finally:
        conn.close()


def test_a_server_signed_by_another_ca_is_refused(pki, server_url, tmp_path):
    conn = Connection.from_kubeconfig(kubeconfig(tmp_path, server_url,
                                                 **{"certificate-authority-data": b64(pki["other_ca"][0])}))
    try:
        with pytest.raises(Unreachable, match=r"at %s \(kubeconfig '.*', context 'c'\): TLS: .*CERTIFICATE_VERIFY_FAILED"
                           % server_url):
            conn.request("GET", "/version")
    finally:
        conn.close()


def test_insecure_skip_tls_verify_still_connects(pki, server_url, tmp_path):
    conn = Connection.from_kubeconfig(kubeconfig(tmp_path, server_url, **{
        "certificate-authority-data": b64(pki["other_ca"][0]), "insecure-skip-tls-verify": True}))
    try:
        assert conn.config.ssl_context().verify_mode == ssl.CERT_NONE and not conn.config.ssl_context().check_hostname
        assert conn.request("GET", "/version") == {"path": "/version"}
    finally:
        conn.close()


def test_without_ca_data_the_system_store_is_used(server_url, tmp_path):
    conn = Connection.from_kubeconfig(kubeconfig(tmp_path, server_url))
    try:
        assert conn.config.ssl_context().cert_store_stats() == ssl.create_default_context().cert_store_stats()
        assert conn.config.ssl_context().verify_mode == ssl.CERT_REQUIRED
        with pytest.raises(Unreachable, match="CERTIFICATE_VERIFY_FAILED"):  # our throwaway CA is in no system store
            conn.request("GET", "/version")
    finally:
        conn.close()


@pytest.mark.parametrize("text,kind", [("- not\n- a mapping\n", "list"), ("just a string\n", "str")])
def test_a_yaml_file_that_is_not_a_mapping_is_refused_by_name(tmp_path, text, kind):
    path = tmp_path / "kubeconfig"
    path.write_text(text)
    with pytest.raises(KubeConfigError, match=r"kubeconfig '.*': not a kubeconfig \(a YAML %s" % kind):
        Connection.from_kubeconfig(str(path))
