# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""In-cluster: the conversion webhook's certificate files kept equal to their Secret (--webhook-secret NS/NAME).

The deploy's init container copies Secret liqo/liqo-fabric-webhook-tls to the pod's memory volume; when another
replica's start renews the Secret (and the CRDs' caBundle with it), a running replica would keep serving the old
certificate, which the apiserver no longer trusts. This thread reads the Secret every `period` seconds and
rewrites the files when it differs; the server's ServingCert (conversion.py) then loads them for new connections.
"""
import base64
import logging
import os
import threading

from controller.library import kube_client

log = logging.getLogger("liqo-fabric.conversion")


def parse_secret_ref(text: str):
    """(namespace, name) of "NS/NAME"; ValueError naming the flag otherwise."""
    namespace, sep, name = text.partition("/")
    if not (sep and namespace and name) or "/" in name:
        raise ValueError("--webhook-secret: %r must be NAMESPACE/NAME" % text)
    return namespace, name


class WebhookSecretSync(threading.Thread):
    """Every `period` s: Secret `namespace/name` (keys tls.crt, tls.key) -> `cert_file`, `key_file` when they differ."""

    def __init__(self, kube, namespace: str, name: str, cert_file: str, key_file: str, period: float = 30.0):
        super().__init__(name="webhook-secret-sync", daemon=True)
        self.kube, self.namespace, self.name, self.period = kube, namespace, name, period
        self.files = {"tls.crt": cert_file, "tls.key": key_file}
        self._stop = threading.Event()

    def sync_once(self) -> bool:
        """True when the files were rewritten from the Secret."""
        secret = self.kube.get("Secret", self.namespace, self.name)
        data = (secret or {}).get("data") or {}
        if not all(data.get(k) for k in self.files):
            raise ValueError("Secret %s/%s has no %s" % (self.namespace, self.name, " and ".join(sorted(self.files))))
        wanted = {k: base64.b64decode(data[k]) for k in self.files}
        current = {}
        for key, path in self.files.items():
            try:
                with open(path, "rb") as f:
                    current[key] = f.read()
            except OSError:
                current[key] = None
        if current == wanted:
            return False
        # both new files complete before either is swapped in: the reader sees a mixed pair for microseconds at most
        for key, path in self.files.items():
            fd = os.open(path + ".new", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(wanted[key])
        for key in ("tls.key", "tls.crt"):
            os.replace(self.files[key] + ".new", self.files[key])
        log.info("webhook certificate files updated from the Secret",
                 extra={"fields": {"secret": "%s/%s" % (self.namespace, self.name), "cert": self.files["tls.crt"]}})
        return True

    def run(self) -> None:
        while not self._stop.wait(self.period):
            try:
                self.sync_once()
            except (kube_client.ApiException, OSError, ValueError) as exc:  # tried again next period
                log.warning("cannot update the webhook certificate from its Secret",
                            extra={"fields": {"secret": "%s/%s" % (self.namespace, self.name), "error": str(exc)}})

    def stop(self) -> None:
        self._stop.set()


def start(kubeconfig, secret_ref: str, cert_file: str, key_file: str, period: float = 30.0) -> WebhookSecretSync:
    """The started sync of Secret `secret_ref` ("NS/NAME") in the cluster of `kubeconfig` (None: in-cluster);
    ValueError with a message naming the flag when it cannot be."""
    namespace, name = parse_secret_ref(secret_ref)
    try:
        kube = kube_client.Kube(kubeconfig)
    except kube_client.KubeError as exc:
        raise ValueError("--webhook-secret %s: %s" % (secret_ref, exc))
    sync = WebhookSecretSync(kube, namespace, name, cert_file, key_file, period)
    sync.start()
    return sync
