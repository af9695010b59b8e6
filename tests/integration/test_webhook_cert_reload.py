"""A running conversion webhook (controller/conversion.py) picks up a renewed serving certificate
without a restart, over real TLS: the files rotated as a Secret volume does it (a `..data` symlink swapped to a
new directory) and as plain files replaced in place; a new client connection verifies against the new CA. A new
pair that does not load (a key of another certificate) keeps the previous one and logs a warning."""
import json
import logging
import os
import shutil
import ssl
import time
import urllib.error
import urllib.request

import pytest

from controller.conversion import ConversionServer, ServingCert
from tests.lab.pki import make_pki, make_serving_cert

REVIEW = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
          "request": {"uid": "u", "desiredAPIVersion": "networking.liqo.io/v1beta1", "objects": []}}


class Files:
    """tls.crt/tls.key in `root`, laid out as a Secret volume (symlinks through ..data) or as plain files."""

    def __init__(self, root, layout):
        self.root, self.layout, self.version = root, layout, 0
        self.crt, self.key = os.path.join(root, "tls.crt"), os.path.join(root, "tls.key")

    def install(self, crt_src, key_src):
        self.version += 1
        if self.layout == "plain":  # what the lab or an operator does: each file replaced
            for src, dst in ((crt_src, self.crt), (key_src, self.key)):
                shutil.copyfile(src, dst + ".new")
                os.replace(dst + ".new", dst)
            return
        data = os.path.join(self.root, "..v%d" % self.version)  # the kubelet: a new directory, then one swap
        os.mkdir(data)
        shutil.copyfile(crt_src, os.path.join(data, "tls.crt"))
        shutil.copyfile(key_src, os.path.join(data, "tls.key"))
        os.symlink(os.path.basename(data), os.path.join(self.root, "..data_tmp"))
        os.replace(os.path.join(self.root, "..data_tmp"), os.path.join(self.root, "..data"))
        for name in ("tls.crt", "tls.key"):
            if not os.path.islink(os.path.join(self.root, name)):
                os.symlink(os.path.join("..data", name), os.path.join(self.root, name))


def ca_and_cert(directory, name):
    os.makedirs(directory)
    pki = make_pki(directory, name)
    cert = make_serving_cert(directory, pki["ca.crt"], pki["ca.key"], "webhook")
    return pki["ca.crt"], cert["crt"], cert["key"]


def answers(port, cafile):
    """True when a new connection verifies the server against `cafile` and gets a ConversionReview back."""
    req = urllib.request.Request("https://127.0.0.1:%d/convert" % port, data=json.dumps(REVIEW).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, context=ssl.create_default_context(cafile=cafile), timeout=5) as resp:
            return json.loads(resp.read())["response"]["result"]["status"] == "Success"
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, ssl.SSLCertVerificationError):
            return False
        raise


def wait_answers(port, cafile, timeout=10.0):
    started = time.monotonic()
    while not answers(port, cafile):
        assert time.monotonic() - started < timeout, "no connection verified against %s in %.0f s" % (cafile, timeout)
        time.sleep(0.05)
    return time.monotonic() - started


@pytest.mark.parametrize("layout", ["secret-volume", "plain"])
def test_renewed_certificate_serves_new_connections_without_a_restart(tmp_path, layout, caplog):
    old_ca, old_crt, old_key = ca_and_cert(str(tmp_path / "old"), "old")
    new_ca, new_crt, new_key = ca_and_cert(str(tmp_path / "new"), "new")
    other_ca, other_crt, dummy = ca_and_cert(str(tmp_path / "other"), "other")
    files = Files(str(tmp_path / "mounted"), layout)
    os.makedirs(files.root)
    files.install(old_crt, old_key)
    server = ConversionServer("127.0.0.1", 0, files.crt, files.key)
    server.start()
    try:
        assert answers(server.port, old_ca) and not answers(server.port, new_ca)

        files.install(new_crt, new_key)  # renewed: a new CA and a new serving certificate
        took = wait_answers(server.port, new_ca)
        assert not answers(server.port, old_ca)
        assert took <= ServingCert.CHECK_EVERY + 1.0, took

        caplog.set_level(logging.INFO, logger="liqo-fabric.conversion")
        files.install(other_crt, new_key)  # a bad pair: the key is not the certificate's
        time.sleep(ServingCert.CHECK_EVERY + 0.1)
        assert answers(server.port, new_ca) and not answers(server.port, other_ca)  # the previous pair still serves
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and "do not load" in warnings[0].getMessage(), caplog.records
        fields = warnings[0].fields
        assert fields["cert"] == files.crt and fields["key"] == files.key and fields["error"]
        with open(new_key, encoding="ascii") as f:
            assert f.read().splitlines()[1] not in caplog.text  # the key never reaches the log

        time.sleep(ServingCert.CHECK_EVERY + 0.1)
        assert answers(server.port, new_ca)  # the unchanged bad pair is not tried (nor warned about) again
        assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1
    finally:
        server.stop()


def test_first_pair_that_does_not_load_is_an_error(tmp_path):
    dummy, crt, dummy_key = ca_and_cert(str(tmp_path / "a"), "a")
    dummy, dummy_crt, key = ca_and_cert(str(tmp_path / "b"), "b")
    with pytest.raises(ssl.SSLError):
        ServingCert(crt, key)
