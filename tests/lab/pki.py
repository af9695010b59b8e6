"""Certificates and keys for a lab apiserver: a CA, a serving certificate for 127.0.0.1, an SA key."""
from __future__ import annotations

import datetime
import ipaddress
import os

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID


def _write(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _pem_key(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def make_pki(directory: str, common_name: str, extra_ips: tuple = ()) -> dict:
    """Writes ca.crt/.key, apiserver.crt/.key and sa.key into `directory` (0600) and returns their paths (the CA
    key signs client certificates: tests.lab.credentials)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{common_name}-ca")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=30))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    srv_key = ec.generate_private_key(ec.SECP256R1())
    srv = (x509.CertificateBuilder()
           .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
           .issuer_name(ca_name).public_key(srv_key.public_key()).serial_number(x509.random_serial_number())
           .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=30))
           .add_extension(x509.SubjectAlternativeName([
               x509.DNSName("localhost"), x509.DNSName("kubernetes.default.svc"),
               x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
               # a real-node cluster's apiserver address on the underlay and the `kubernetes` ClusterIP
               + [x509.IPAddress(ipaddress.ip_address(ip)) for ip in extra_ips]), critical=False)
           .sign(ca_key, hashes.SHA256()))
    # The service-account signer must be RSA for a 1.20 apiserver.
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    names = ("ca.crt", "ca.key", "apiserver.crt", "apiserver.key", "sa.key")
    paths = {name: os.path.join(directory, name) for name in names}
    _write(paths["ca.crt"], ca.public_bytes(serialization.Encoding.PEM))
    _write(paths["ca.key"], _pem_key(ca_key))
    _write(paths["apiserver.crt"], srv.public_bytes(serialization.Encoding.PEM))
    _write(paths["apiserver.key"], _pem_key(srv_key))
    _write(paths["sa.key"], sa_key.private_bytes(serialization.Encoding.PEM,
                                                 serialization.PrivateFormat.TraditionalOpenSSL,
                                                 serialization.NoEncryption()))
    return paths


def make_serving_cert(directory: str, ca_crt: str, ca_key: str, name: str, ips: tuple = ("127.0.0.1",),
                      dns: tuple = ()) -> dict:
    """Writes <name>.crt/.key (0600) into `directory`: a serving certificate signed by the lab's CA for `ips` and
    `dns` (the conversion webhook's: the lab's apiserver trusts it through the CA bundle of the CRDs)."""
    with open(ca_crt, "rb") as f:
        ca = x509.load_pem_x509_certificate(f.read())
    with open(ca_key, "rb") as f:
        signer = serialization.load_pem_private_key(f.read(), password=None)
    now = datetime.datetime.now(datetime.timezone.utc)
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips] + [x509.DNSName(d) for d in dns]
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .sign(signer, hashes.SHA256()))
    paths = {"crt": os.path.join(directory, name + ".crt"), "key": os.path.join(directory, name + ".key")}
    _write(paths["crt"], cert.public_bytes(serialization.Encoding.PEM))
    _write(paths["key"], _pem_key(key))
    return paths
