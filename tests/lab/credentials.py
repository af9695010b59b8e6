"""Other kubeconfigs for a lab apiserver, the kinds real clusters hand out: a client certificate signed by the
lab's CA (the apiserver trusts it through --client-ca-file), and an exec credential plugin (a small script that
prints an ExecCredential, as aws/gke/kubelogin do) that logs each run."""
from __future__ import annotations

import base64
import datetime
import os
import stat
import sys

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

PLUGIN = '''#!{python}
"""Exec credential plugin of lab cluster {name}: prints an ExecCredential with the lab's token."""
import datetime, json, os
with open({runs!r}, "a") as f:
    f.write("run\\n")
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds={lifetime})
print(json.dumps({{"apiVersion": info["apiVersion"], "kind": "ExecCredential",
                  "status": {{"token": open({token_file!r}).read().strip(),
                             "expirationTimestamp": expiry.strftime("%Y-%m-%dT%H:%M:%SZ")}}}}))
'''


def _write(path: str, data: bytes, mode: int = 0o600) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _kubeconfig(apiserver, path: str, user: dict) -> str:
    with open(apiserver.ca, "rb") as f:
        ca_data = base64.b64encode(f.read()).decode()
    name = apiserver.name
    cfg = {"apiVersion": "v1", "kind": "Config", "current-context": f"{name}-alt",
           "clusters": [{"name": name, "cluster": {"server": apiserver.url, "certificate-authority-data": ca_data}}],
           "users": [{"name": f"{name}-alt", "user": user}],
           "contexts": [{"name": f"{name}-alt", "context": {"cluster": name, "user": f"{name}-alt"}}]}
    _write(path, yaml.safe_dump(cfg).encode())
    return path


def client_cert_kubeconfig(apiserver, path: str, common_name: str = "lab-cert-admin",
                           groups: tuple = ("system:masters",), embed: bool = False) -> str:
    """A kubeconfig authenticating with a client certificate (CN user, O groups) signed by the lab's CA:
    files next to the kubeconfig (client-certificate/client-key, relative), or data when `embed`."""
    directory = os.path.dirname(path)
    with open(os.path.join(apiserver.workdir, "ca.key"), "rb") as f:
        ca_key = serialization.load_pem_private_key(f.read(), None)
    with open(apiserver.ca, "rb") as f:
        ca = x509.load_pem_x509_certificate(f.read())
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
                        + [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups])
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    if embed:
        user = {"client-certificate-data": base64.b64encode(cert_pem).decode(),
                "client-key-data": base64.b64encode(key_pem).decode()}
    else:
        base = os.path.splitext(os.path.basename(path))[0]
        _write(os.path.join(directory, f"{base}.crt"), cert_pem)
        _write(os.path.join(directory, f"{base}.key"), key_pem)
        user = {"client-certificate": f"{base}.crt", "client-key": f"{base}.key"}
    return _kubeconfig(apiserver, path, user)


def exec_kubeconfig(apiserver, path: str, lifetime: int = 3600) -> tuple[str, str]:
    """A kubeconfig whose user is an exec plugin; returns (kubeconfig, file counting the plugin's runs)."""
    directory = os.path.dirname(path)
    base = os.path.splitext(os.path.basename(path))[0]
    token_file = os.path.join(directory, f"{base}.token")
    runs = os.path.join(directory, f"{base}.runs")
    _write(token_file, apiserver.token.encode())
    plugin = os.path.join(directory, f"{base}-plugin")
    _write(plugin, PLUGIN.format(python=sys.executable, name=apiserver.name, runs=runs, token_file=token_file,
                                 lifetime=lifetime).encode(), 0o700)
    os.chmod(plugin, stat.S_IRWXU)
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": plugin,
                     "interactiveMode": "Never", "provideClusterInfo": False}}
    return _kubeconfig(apiserver, path, user), runs
