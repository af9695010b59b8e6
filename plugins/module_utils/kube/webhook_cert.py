# -*- coding: utf-8 -*-
# Copyright: liqo.fabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The in-cluster conversion webhook's certificate, made by the deploy.

One Secret (``liqo/liqo-fabric-webhook-tls``: ``ca.crt``, ``tls.crt``, ``tls.key``) shared by every replica of
the controller: the first replica's bootstrap creates it (a POST: of two racing replicas the second gets 409
and reads the winner's), later ones reuse it until it nears its end, then one of them renews it (a PUT guarded
by resourceVersion). The CA signs one serving certificate for the webhook's Service DNS names; its PEM is the
``caBundle`` of every CRD converted by the webhook (a merge patch of that one field, so ``kubectl apply -k``
of the CRDs, which does not name it, keeps it).
"""
from __future__ import absolute_import, division, print_function

import base64
import datetime

try:
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    HAS_CRYPTOGRAPHY = True
except ImportError:  # pragma: no cover - the collection's requirements have it
    HAS_CRYPTOGRAPHY = False

from ansible_collections.liqo.fabric.plugins.module_utils.kube.rest import ApiError

__metaclass__ = type  # pylint: disable=invalid-name

SECRET_KEYS = ("ca.crt", "tls.crt", "tls.key")


def dns_names(service, namespace):
    return ["%s.%s.svc" % (service, namespace), "%s.%s.svc.cluster.local" % (service, namespace)]


def _b64(data):
    return base64.b64encode(data).decode()


def make(service, namespace, days=365, now=None):
    """{ca.crt, tls.crt, tls.key} as PEM bytes: a new CA and the webhook's serving certificate."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "liqo-fabric-webhook-ca")])
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=days)
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    names = dns_names(service, namespace)
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return {"ca.crt": ca.public_bytes(serialization.Encoding.PEM),
            "tls.crt": cert.public_bytes(serialization.Encoding.PEM),
            "tls.key": key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption())}


def usable(pems, service, namespace, renew_days=30, now=None):
    """'' when the PEMs (bytes) serve the webhook for more than `renew_days`, else why not."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    if any(not pems.get(k) for k in SECRET_KEYS):
        return "missing %s" % ", ".join(k for k in SECRET_KEYS if not pems.get(k))
    try:
        cert = x509.load_pem_x509_certificate(pems["tls.crt"])
        ca = x509.load_pem_x509_certificate(pems["ca.crt"])
        serialization.load_pem_private_key(pems["tls.key"], password=None)
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    except (ValueError, TypeError, x509.ExtensionNotFound) as exc:
        return "unreadable (%s)" % exc
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return "tls.crt is not signed by ca.crt"
    if dns_names(service, namespace)[0] not in sans:
        return "tls.crt is not for %s" % dns_names(service, namespace)[0]
    ends = min(cert.not_valid_after_utc, ca.not_valid_after_utc)
    if ends - now < datetime.timedelta(days=renew_days):
        return "expires %s" % ends.isoformat()
    return ""


def ensure(kube, namespace, secret, service, crds, renew_days=30, days=365):
    """The webhook's PEMs from Secret namespace/secret, made or renewed when needed, and every CRD of `crds`
    (names) whose conversion is Webhook given their CA as caBundle. Returns (pems, changes)."""
    changes = []
    for dummy in range(5):
        current = kube.get("Secret", namespace, secret)
        pems = {k: base64.b64decode(v) for k, v in ((current or {}).get("data") or {}).items() if k in SECRET_KEYS}
        why = usable(pems, service, namespace, renew_days) if current else "absent"
        if not why:
            break
        pems = make(service, namespace, days)
        obj = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
               "metadata": {"name": secret, "namespace": namespace,
                            "labels": {"app.kubernetes.io/part-of": "liqo-fabric"}},
               "data": {k: _b64(v) for k, v in pems.items()}}
        try:
            if current:
                obj["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                kube.replace(obj)
            else:
                kube.create(obj)
        except ApiError as exc:
            if exc.status == 409:  # another replica wrote first: use its certificate
                continue
            raise
        changes.append("Secret %s/%s: %s" % (namespace, secret, "made" if not current else "renewed (%s)" % why))
        break
    else:
        raise RuntimeError("Secret %s/%s: kept changing under us" % (namespace, secret))
    bundle = _b64(pems["ca.crt"])
    for name in crds:
        crd = kube.get("CustomResourceDefinition", None, name)
        if crd is None:
            raise RuntimeError("CustomResourceDefinition %s does not exist (yet): apply deploy/crds first" % name)
        conversion = ((crd or {}).get("spec") or {}).get("conversion") or {}
        if conversion.get("strategy") != "Webhook":
            continue
        if ((conversion.get("webhook") or {}).get("clientConfig") or {}).get("caBundle") != bundle:
            kube.patch("CustomResourceDefinition", None, name,
                       {"spec": {"conversion": {"webhook": {"clientConfig": {"caBundle": bundle}}}}})
            changes.append("CustomResourceDefinition %s: caBundle" % name)
    return pems, changes
