"""The CRD conversion webhook on a lab kube-apiserver (tests.lab.apiserver, its webhook `python -m controller --mode
webhook`), as tests/e2e/test_crds_apiserver.py runs it:

1. liqo.fabric.diagnose's "CRD conversion webhook" check (a v1alpha1 dry-run create of each of the 3 converted
   kinds through the webhook), with the webhook up and with it down: medians of ROUNDS;
2. in-cluster renewal: a running webhook serving files kept equal to its Secret (--webhook-secret,
   controller/webhook_sync.py) and the Configuration CRD pointing at it; the Secret and the CRD's caBundle renewed
   with a new CA -> v1alpha1 reads through the same running webhook again: ROUNDS renewals, median;
3. the webhook's own reload, no apiserver (as tests/integration/test_webhook_cert_reload.py runs it): its files
   rotated as a Secret volume does it and as plain files replaced in place -> a new TLS connection verifies
   against the new CA: ROUNDS rotations per layout, median.
ROUNDS: LIQO_FABRIC_WEBHOOK_ROUNDS, default 3.
"""
import base64
import json
import os
import shutil
import statistics
import tempfile
import time

import yaml

from tests.benchmarks.report import figure
from tests.e2e.test_crds_apiserver import GROUP, KUBECTL, crds_for, kubectl
from tests.lab.apiserver import ApiServer

ROUNDS = int(os.environ.get("LIQO_FABRIC_WEBHOOK_ROUNDS", "3"))
SECRET = "bench-webhook-tls"
CONFIGURATION = {"apiVersion": f"{GROUP}/v1beta1", "kind": "Configuration",
                 "metadata": {"name": "bench-webhook", "namespace": "default"},
                 "spec": {"remote": {"cidr": {"pod": ["10.71.0.0/16"], "external": ["10.72.0.0/16"]}}}}


def diagnose_probe(api) -> dict:
    """Seconds of the diagnose conversion check, per round, webhook up and down."""
    from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import Kube  # pylint: disable=import-outside-toplevel
    from ansible_collections.liqo.fabric.plugins.module_utils.verify import diagnose  # pylint: disable=import-outside-toplevel
    from ansible_collections.liqo.fabric.plugins.modules.diagnose_api import conversion_probe  # pylint: disable=import-outside-toplevel

    def checks():
        kube = Kube(api.kubeconfig)
        try:
            t0 = time.monotonic()
            out = [c for c in diagnose.crd_checks("lab", kube.list("CustomResourceDefinition"), "install-it",
                                                  probe=conversion_probe(kube)) if c["check"] == "CRD conversion webhook"]
            return out, time.monotonic() - t0
        finally:
            kube.close()

    def answering():   # the restarted webhook answers before the next round
        deadline = time.monotonic() + 30
        while not all(c["ok"] for c in checks()[0]):
            if time.monotonic() > deadline:
                raise RuntimeError("the restarted webhook never answered")
            time.sleep(0.2)

    got: dict = {"up": [], "down": []}
    for _round in range(ROUNDS):
        out, took = checks()
        if len(out) != 3 or not all(c["ok"] for c in out):
            raise RuntimeError(f"webhook up: {out}")
        got["up"].append(took)
        api.stop_webhook()
        try:
            out, took = checks()
        finally:
            api.restart_webhook()
        if len(out) != 3 or any(c["ok"] for c in out):
            raise RuntimeError(f"webhook down: {out}")
        got["down"].append(took)
        answering()
    return got


def renewal(api, tmp: str) -> list:
    """Seconds from each renewal (the Secret and the CRD's caBundle) to v1alpha1 reads through the running
    webhook with the new certificate."""
    from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import Kube  # pylint: disable=import-outside-toplevel
    from controller import webhook_sync  # pylint: disable=import-outside-toplevel
    from controller.conversion import ConversionServer  # pylint: disable=import-outside-toplevel
    from tests.lab.pki import make_pki, make_serving_cert  # pylint: disable=import-outside-toplevel

    def pair(name):
        d = os.path.join(tmp, name)
        os.mkdir(d)
        pki = make_pki(d, name)
        cert = make_serving_cert(d, pki["ca.crt"], pki["ca.key"], "webhook")
        out = {}
        for k, p in (("ca.crt", pki["ca.crt"]), ("tls.crt", cert["crt"]), ("tls.key", cert["key"])):
            with open(p, "rb") as f:
                out[k] = f.read()
        return out

    def put_secret(pems):
        kubectl(api, "apply", "-f", "-", stdin=yaml.safe_dump({
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": SECRET, "namespace": "liqo"},
            "data": {k: base64.b64encode(v).decode() for k, v in pems.items()}}))

    def point_crd(url, pems):
        kubectl(api, "patch", "crd", crd, "--type=merge", "-p", json.dumps({"spec": {"conversion": {"webhook": {
            "clientConfig": {"url": url, "caBundle": base64.b64encode(pems["ca.crt"]).decode()}}}}}))

    def reads_in_v1alpha1():   # an object to convert: an empty list would not call the webhook
        proc = kubectl(api, "get", f"configurations.v1alpha1.{GROUP}", "-A", "-o", "name", check=False)
        return proc.returncode == 0 and proc.stdout.strip() != ""

    def reads_within(seconds):
        started = time.monotonic()
        while not reads_in_v1alpha1():
            if time.monotonic() - started > seconds:
                raise RuntimeError("no v1alpha1 read through the running webhook")
            time.sleep(0.1)
        return time.monotonic() - started

    crd = f"configurations.{GROUP}"
    kubectl(api, "create", "namespace", "liqo", check=False)
    kubectl(api, "apply", "-f", "-", stdin=yaml.safe_dump(CONFIGURATION))
    pems = pair("r0")
    put_secret(pems)
    kube = Kube(api.kubeconfig)
    files = (os.path.join(tmp, "tls.crt"), os.path.join(tmp, "tls.key"))
    before = json.loads(kubectl(api, "get", "crd", crd, "-o", "json").stdout)["spec"]["conversion"]
    sync = webhook_sync.WebhookSecretSync(kube, "liqo", SECRET, *files, period=0.2)
    sync.sync_once()
    server = ConversionServer("127.0.0.1", 0, *files)
    server.start()
    sync.start()
    took = []
    try:
        url = f"https://127.0.0.1:{server.port}/convert"
        point_crd(url, pems)
        reads_within(30)
        for r in range(ROUNDS):
            pems = pair(f"r{r + 1}")
            put_secret(pems)   # renewed by "another replica"
            t0 = time.monotonic()
            point_crd(url, pems)
            reads_within(30)
            took.append(time.monotonic() - t0)
            with open(files[0], "rb") as f:
                if f.read() != pems["tls.crt"]:
                    raise RuntimeError("the webhook's files are not the renewed Secret's")
    finally:
        sync.stop()
        server.stop()
        kube.close()
        kubectl(api, "patch", "crd", crd, "--type=merge", "-p", json.dumps({"spec": {"conversion": before}}))
        kubectl(api, "delete", "secret", "-n", "liqo", SECRET, check=False)
        kubectl(api, "delete", f"configurations.{GROUP}", "-n", "default", CONFIGURATION["metadata"]["name"], check=False)
    return took


def file_reload(tmp: str) -> dict:
    """Seconds from each rotation of the serving files to a new connection verified against the new CA, per layout."""
    from controller.conversion import ConversionServer  # pylint: disable=import-outside-toplevel
    from tests.integration.test_webhook_cert_reload import Files, ca_and_cert, wait_answers  # pylint: disable=import-outside-toplevel

    got = {}
    for layout in ("secret-volume", "plain"):
        pairs = [ca_and_cert(os.path.join(tmp, f"{layout}-{i}"), f"r{i}") for i in range(ROUNDS + 1)]
        files = Files(os.path.join(tmp, f"{layout}-mounted"), layout)
        os.makedirs(files.root)
        files.install(*pairs[0][1:])
        server = ConversionServer("127.0.0.1", 0, files.crt, files.key)
        server.start()
        got[layout] = []
        try:
            wait_answers(server.port, pairs[0][0])
            for ca, crt, key in pairs[1:]:
                files.install(crt, key)
                got[layout].append(wait_answers(server.port, ca))
        finally:
            server.stop()
    return got


def run():
    from controller.conversion import ServingCert  # pylint: disable=import-outside-toplevel
    workdir = tempfile.mkdtemp(prefix="lfab-bwh-files-")
    try:
        reloaded = file_reload(workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    for layout, took in reloaded.items():
        figure(f"{layout} files rotated -> new cert served, median of {ROUNDS}", statistics.median(took),
               "s", target=ServingCert.CHECK_EVERY + 1.0)
    if not os.access(KUBECTL, os.X_OK):
        print("  skipped: kubectl is not installed")
        return
    workdir = tempfile.mkdtemp(prefix="lfab-bwh-")
    api = ApiServer("lfabbwh", workdir)
    try:
        api.start()
        kubectl(api, "apply", "-f", "-", stdin=crds_for(api))
        kubectl(api, "wait", "--for", "condition=Established", "--timeout", "60s", "crd", "-l",
                "app.kubernetes.io/part-of=liqo-fabric")
        probe = diagnose_probe(api)
        renewed = renewal(api, workdir)
    finally:
        api.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    print("  diagnose webhook probe (3 CRDs): up " + " / ".join(f"{x * 1000:.0f}" for x in probe["up"]) + " ms, down "
          + " / ".join(f"{x * 1000:.0f}" for x in probe["down"]) + " ms")
    figure(f"diagnose conversion check, webhook up (3 CRDs), median of {ROUNDS}", statistics.median(probe["up"]) * 1000, "ms")
    figure(f"diagnose conversion check, webhook down (3 CRDs), median of {ROUNDS}",
           statistics.median(probe["down"]) * 1000, "ms")
    print("  renewed webhook Secret trusted through the running webhook after "
          + " / ".join(f"{x:.1f}" for x in renewed) + " s")
    figure(f"webhook Secret renewed -> trusted through the running webhook, median of {ROUNDS}",
           statistics.median(renewed), "s")
