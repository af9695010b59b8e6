"""The controller's conversion webhook (controller/conversion.py): ConversionReview v1 over HTTPS."""
import json
import ssl
import urllib.error
import urllib.request

import pytest

from controller.conversion import ConversionServer, review
from plugins.module_utils.api.conversion import ANNOTATION
from tests.lab.pki import make_pki, make_serving_cert

A = "networking.liqo.io/v1alpha1"
B = "networking.liqo.io/v1beta1"


def request(objects, desired=B, uid="u-1"):
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objects}}


def conf(version, pod):
    return {"apiVersion": version, "kind": "Configuration", "metadata": {"name": "c", "namespace": "t"},
            "spec": {"remote": {"cidr": {"pod": pod}}}}


def test_review_converts_every_object_and_echoes_the_uid():
    out = review(request([conf(A, "10.1.0.0/16"), conf(A, "10.2.0.0/16")]))
    assert out["apiVersion"] == "apiextensions.k8s.io/v1" and out["kind"] == "ConversionReview"
    resp = out["response"]
    assert resp["uid"] == "u-1" and resp["result"] == {"status": "Success"}
    assert [o["spec"]["remote"]["cidr"]["pod"] for o in resp["convertedObjects"]] == [["10.1.0.0/16"], ["10.2.0.0/16"]]
    assert all(o["apiVersion"] == B for o in resp["convertedObjects"])


@pytest.mark.parametrize("body,message", [
    (request([conf(A, "10.1.0.0/16"), conf(A, ["10.1.0.0/16"])]),
     "cannot convert Configuration t/c to networking.liqo.io/v1beta1: spec.remote.cidr.pod must be one CIDR string"),
    ({"apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "ConversionReview", "request": {"uid": "x"}},
     "expected a ConversionReview of apiextensions.k8s.io/v1"),
    ({"kind": "ConversionReview"}, "request is missing"),
    (request([conf(A, "10.1.0.0/16")], desired="networking.liqo.io/v9"), "apiVersion 'networking.liqo.io/v9'"),
])
def test_review_failures_name_object_and_field(body, message):
    resp = review(body)["response"]
    assert resp["result"]["status"] == "Failure"
    assert message in resp["result"]["message"]
    assert "convertedObjects" not in resp, "all or nothing"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("webhook"))
    pki = make_pki(workdir, "webhook-test")
    cert = make_serving_cert(workdir, pki["ca.crt"], pki["ca.key"], "conversion-webhook")
    srv = ConversionServer("127.0.0.1", 0, cert["crt"], cert["key"])
    srv.start()
    yield srv, pki["ca.crt"]
    srv.stop()


def post(server, body, path="/convert"):
    srv, ca = server
    req = urllib.request.Request("https://127.0.0.1:%d%s" % (srv.port, path), data=body,
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, context=ssl.create_default_context(cafile=ca), timeout=10) as resp:
        return resp.status, json.loads(resp.read())


def test_https_round_trip_with_the_lab_ca(server):
    b = {"apiVersion": B, "kind": "GatewayClient", "metadata": {"name": "g", "namespace": "t"},
         "spec": {"endpoint": {"addresses": ["10.42.3.54"], "ports": [32133], "protocol": "UDP"}, "secretRef": {"name": "k"}}}
    status, out = post(server, json.dumps(request([b], desired=A)).encode())
    assert status == 200 and out["response"]["result"]["status"] == "Success"
    a = out["response"]["convertedObjects"][0]
    assert a["spec"] == {"endpoint": {"addresses": ["10.42.3.54"], "port": 32133, "protocol": "UDP"}}
    assert ANNOTATION in a["metadata"]["annotations"]
    status, out = post(server, json.dumps(request([a], desired=B)).encode())
    assert out["response"]["convertedObjects"] == [b]


def test_https_rejects_bad_requests(server):
    with pytest.raises(urllib.error.HTTPError) as err:
        post(server, b"{not json")
    assert err.value.code == 400 and "not JSON" in err.value.read().decode()
    with pytest.raises(urllib.error.HTTPError) as err:
        post(server, b"{}", path="/other")
    assert err.value.code == 404


def test_untrusted_ca_is_refused(server, tmp_path):
    srv, dummy = server
    other = make_pki(str(tmp_path), "other")
    req = urllib.request.Request("https://127.0.0.1:%d/convert" % srv.port, data=b"{}", method="POST")
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        urllib.request.urlopen(req, context=ssl.create_default_context(cafile=other["ca.crt"]), timeout=10)


def test_in_cluster_certificate_checks():
    """plugins/module_utils/kube/webhook_cert: the certificate the deploy makes, and when it is made again."""
    import datetime  # pylint: disable=import-outside-toplevel
    from plugins.module_utils.kube import webhook_cert  # pylint: disable=import-outside-toplevel
    pems = webhook_cert.make("liqo-fabric-webhook", "liqo", days=365)
    assert webhook_cert.usable(pems, "liqo-fabric-webhook", "liqo") == ""
    assert webhook_cert.usable(pems, "other", "liqo") == "tls.crt is not for other.liqo.svc"
    later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=340)
    assert webhook_cert.usable(pems, "liqo-fabric-webhook", "liqo", now=later).startswith("expires ")
    assert webhook_cert.usable(dict(pems, **{"tls.key": b""}), "liqo-fabric-webhook", "liqo") == "missing tls.key"
    other = webhook_cert.make("liqo-fabric-webhook", "liqo")
    assert webhook_cert.usable(dict(pems, **{"ca.crt": other["ca.crt"]}), "liqo-fabric-webhook", "liqo") == \
        "tls.crt is not signed by ca.crt"
    assert webhook_cert.usable(dict(pems, **{"tls.crt": b"junk"}), "liqo-fabric-webhook", "liqo").startswith("unreadable")
