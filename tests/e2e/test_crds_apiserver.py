"""The API: the CRDs on a real kube-apiserver (v1.20, tests.lab.apiserver).

CRDs become Established; every YAML example of the seeds applies verbatim with kubectl and reads back
through v1beta1 (the storage version); invalid objects are rejected with 422; `kubectl get` prints
the columns the seeds show. The conversion webhook (the lab apiserver's, `python -m controller
--mode webhook`) converts between the versions: apply in one, read in the other, apply back, no diff; the
webhook down, the apiserver's error names it and nothing is written; back, everything converges.
"""
import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time

import pytest
import yaml

from plugins.module_utils.api.conversion import ANNOTATION, convert
from tests.e2e.fabric import applyable
from tests.lab.apiserver import ApiServer, ApiServerError
from tests.unit.seed_examples import seed_examples

pytestmark = pytest.mark.e2e

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GROUP = "networking.liqo.io"
PLURAL = {"Configuration": "configurations", "GatewayServer": "gatewayservers", "GatewayClient": "gatewayclients",
          "PublicKey": "publickeies", "Connection": "connections"}
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"


@contextlib.contextmanager
def lab_apiserver(name):
    """A lab kube-apiserver + etcd (and its conversion webhook) in a temporary directory, removed afterwards; the
    test skips when kubectl or the apiserver is missing."""
    if not os.access(KUBECTL, os.X_OK):
        pytest.skip("kubectl is not installed")
    workdir = tempfile.mkdtemp(prefix="lfab-%s-" % name)
    srv = ApiServer(name, workdir)
    try:
        srv.start()
    except ApiServerError as exc:
        srv.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        pytest.skip("no kube-apiserver: %s" % str(exc).splitlines()[0])
    try:
        yield srv
    finally:
        srv.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def api():
    with lab_apiserver("lfabcrds") as srv:
        kubectl(srv, "apply", "-f", "-", stdin=crds_for(srv))
        kubectl(srv, "wait", "--for", "condition=Established", "--timeout", "60s", "crd", "-l", "app.kubernetes.io/part-of=liqo-fabric")
        yield srv


def crds_for(srv):
    """deploy/crds with the conversion webhook's clientConfig pointing at the lab apiserver's webhook (by URL, the
    lab's CA), as liqo.fabric.install sets it from ConfigMap kube-system/liqo-fabric-conversion-webhook."""
    docs = []
    for name in sorted(os.listdir(os.path.join(ROOT, "deploy", "crds"))):
        if name.endswith(".yaml"):
            with open(os.path.join(ROOT, "deploy", "crds", name), encoding="utf-8") as f:
                crd = yaml.safe_load(f)
            if crd["spec"]["conversion"]["strategy"] == "Webhook":
                crd["spec"]["conversion"]["webhook"]["clientConfig"] = {"url": srv.webhook_url, "caBundle": srv.webhook_ca_bundle}
            docs.append(crd)
    return yaml.safe_dump_all(docs)


def kubectl(srv, *args, stdin=None, check=True):
    proc = subprocess.run([KUBECTL, "--kubeconfig", srv.kubeconfig, *args], input=stdin, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise AssertionError("kubectl %s failed: %s" % (" ".join(args), proc.stderr))
    return proc


def custom_api(srv):
    from kubernetes import client, config  # pylint: disable=import-outside-toplevel
    return client.CustomObjectsApi(config.new_client_from_config(config_file=srv.kubeconfig))


def test_crds_established_and_v1beta1_stored(api):
    crds = json.loads(kubectl(api, "get", "crd", "-o", "json").stdout)["items"]
    ours = {c["metadata"]["name"]: c for c in crds if c["spec"]["group"] == GROUP}
    plurals = ("configurations", "gatewayservers", "gatewayclients", "connections", "publickeies",
               "wggatewayservertemplates", "wggatewayclienttemplates")
    assert set(ours) == {"%s.%s" % (p, GROUP) for p in plurals}
    for name, crd in ours.items():
        conds = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert conds.get("Established") == "True" and conds.get("NamesAccepted") == "True", name
        assert "NonStructuralSchema" not in conds, name
        assert crd["status"]["storedVersions"] == ["v1beta1"], name


def test_seed_examples_apply_verbatim_and_read_back_via_v1beta1(api):
    examples = seed_examples()
    for text, dummy in examples:
        proc = kubectl(api, "apply", "-f", "-", stdin=text)
        assert re.search(r"(created|configured|unchanged)", proc.stdout), proc.stdout
    for dummy, obj in examples:
        plural = PLURAL[obj["kind"]]
        ns = obj["metadata"].get("namespace", "default")
        back = json.loads(kubectl(api, "get", "-n", ns, "%s.v1beta1.%s" % (plural, GROUP), obj["metadata"]["name"], "-o", "json").stdout)
        assert back["apiVersion"] == GROUP + "/v1beta1"
        assert back["kind"] == obj["kind"]
        _assert_subset(convert(obj, back["apiVersion"])["spec"], back["spec"], obj["kind"])  # CIDRs: lists of one
        assert back["metadata"]["labels"] == obj["metadata"]["labels"]
    # defaults from the schema were applied (Liqo's defaults where the seeds are silent)
    client = json.loads(kubectl(api, "get", "gatewayclients.v1beta1.%s" % GROUP, "client", "-o", "json").stdout)
    assert client["spec"]["mtu"] == 1340 and client["spec"]["endpoint"]["protocol"] == "UDP"


def _assert_subset(want, got, where):
    if isinstance(want, dict):
        assert isinstance(got, dict), where
        for k, v in want.items():
            assert k in got, "%s.%s missing" % (where, k)
            _assert_subset(v, got[k], "%s.%s" % (where, k))
    else:
        assert want == got, "%s: %r != %r" % (where, want, got)


def test_default_templates_apply(api):
    kubectl(api, "create", "namespace", "liqo", check=False)
    kubectl(api, "apply", "-f", os.path.join(ROOT, "deploy", "templates"))
    names = kubectl(api, "get", "-n", "liqo", "wggatewayservertemplates,wggatewayclienttemplates", "-o", "name").stdout.split()
    assert sorted(names) == ["wggatewayclienttemplate.networking.liqo.io/wireguard-client",
                             "wggatewayservertemplate.networking.liqo.io/wireguard-server"]
    got = json.loads(kubectl(api, "get", "-n", "liqo", "wggatewayservertemplate", "wireguard-server", "-o", "json").stdout)
    with open(os.path.join(ROOT, "deploy", "templates", "wireguard-server.yaml"), encoding="utf-8") as f:
        assert got["spec"]["template"] == yaml.safe_load(f)["spec"]["template"]  # free-form part kept, not pruned


def _seed(kind):
    return next(json.loads(json.dumps(o)) for dummy, o in seed_examples() if o["kind"] == kind)


def _mutate(kind, field, value, name, version="v1alpha1"):
    """The seeds' example of `kind` in `version` (as the webhook converts it), with `field` set to `value`."""
    obj = convert(_seed(kind), "%s/%s" % (GROUP, version))
    obj["metadata"] = {"name": name}
    node = obj
    parts = field.split(".")
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    node[parts[-1]] = value
    return obj


INVALID = [
    ("Configuration", "spec.remote.cidr.pod", "10.243.0.300/16", "spec.remote.cidr.pod"),
    ("Configuration", "spec.remote.cidr.external", "10.70.0.0/33", "spec.remote.cidr.external"),
    ("Configuration", "spec.remote.cidr.pod", ["10.243.0.0/16", "10.244.0.0/16"], "spec.remote.cidr.pod"),
    ("Configuration", "spec.remote.cidr.pod", ["10.243.0.0/33"], "spec.remote.cidr.pod"),
    ("Configuration", "spec.remote.cidr.pod", [], "spec.remote.cidr.pod"),
    ("Configuration", "spec.local.cidr.external", ["10.70.0.0/16", "10.71.0.0/16"], "spec.local.cidr.external"),
    ("Configuration", "spec.remote.cidr.pod", 5, "spec.remote.cidr.pod"),
    ("Configuration", "spec.remote.cidr.pod", {"a": "b"}, "spec.remote.cidr.pod"),
    ("GatewayServer", "spec.mtu", 70000, "spec.mtu"),
    ("GatewayClient", "spec.mtu", 70000, "spec.mtu"),
    ("GatewayServer", "spec.mtu", "Auto", "spec.mtu"),
    ("GatewayClient", "spec.mtu", "1400", "spec.mtu"),
    ("GatewayClient", "spec.mtu", 500, "spec.mtu"),
    ("GatewayServer", "spec.endpoint.port", 0, "spec.endpoint.port"),
    ("GatewayClient", "spec.endpoint.port", 0, "spec.endpoint.port"),
    ("GatewayClient", "spec.endpoint.addresses", ["10.42.3.540"], "spec.endpoint.addresses"),
    ("PublicKey", "spec.publicKey", "GExyYe7RJ3Lo5nQVa6K2Tp9zobXCvWmJawsLxu7hn1=", "spec.publicKey"),
    ("PublicKey", "spec.publicKey", "not-a-key", "spec.publicKey"),
]


@pytest.mark.parametrize("version", ["v1alpha1", "v1beta1"])
@pytest.mark.parametrize("kind, field, value, path", INVALID, ids=["%s:%s=%r" % i[:3] for i in INVALID])
def test_invalid_objects_rejected_with_422(api, version, kind, field, value, path):
    from kubernetes.client.rest import ApiException  # pylint: disable=import-outside-toplevel
    obj = _mutate(kind, field, value, "bad-%s" % version, version)
    with pytest.raises(ApiException) as err:
        custom_api(api).create_namespaced_custom_object(GROUP, version, "default", PLURAL[kind], obj)
    assert err.value.status == 422
    assert path in err.value.body


@pytest.mark.parametrize("version", ["v1alpha1", "v1beta1"])
def test_mtu_auto_accepted_and_its_status_kept(api, version):
    """spec.mtu auto (int-or-string) in both versions; status.mtu (what the probe found, its source) is not pruned."""
    cust = custom_api(api)
    for kind in ("GatewayServer", "GatewayClient"):
        name = "auto-%s-%s" % (kind.lower(), version)
        cust.create_namespaced_custom_object(GROUP, version, "default", PLURAL[kind],
                                             _mutate(kind, "spec.mtu", "auto", name, version))
        mtu = {"value": 1312, "source": "probed", "probed": 1312, "pathMTU": 1372}
        cust.patch_namespaced_custom_object_status(GROUP, version, "default", PLURAL[kind], name, {"status": {"mtu": mtu}})
        got = cust.get_namespaced_custom_object(GROUP, "v1beta1", "default", PLURAL[kind], name)
        assert got["spec"]["mtu"] == "auto" and got["status"]["mtu"] == mtu, got
        cust.delete_namespaced_custom_object(GROUP, version, "default", PLURAL[kind], name)


def test_invalid_status_rejected_with_422(api):
    from kubernetes.client.rest import ApiException  # pylint: disable=import-outside-toplevel
    cust = custom_api(api)
    obj = _mutate("Configuration", "spec.remote.cidr.pod", ["10.243.0.0/16"], "status-check", "v1beta1")
    cust.create_namespaced_custom_object(GROUP, "v1beta1", "default", "configurations", obj)
    for bad in (["10.71.0.0/99"], "10.71.0.0/16", ["10.71.0.0/16", "10.72.0.0/16"]):
        with pytest.raises(ApiException) as err:
            cust.patch_namespaced_custom_object_status(GROUP, "v1beta1", "default", "configurations", "status-check",
                                                       {"status": {"remote": {"cidr": {"pod": bad}}}})
        assert err.value.status == 422 and "status.remote.cidr.pod" in err.value.body, bad
    cust.delete_namespaced_custom_object(GROUP, "v1beta1", "default", "configurations", "status-check")


def _table(text):
    lines = [line for line in text.splitlines() if line.strip()]
    return [re.split(r"\s{2,}", line.strip()) for line in lines]


def test_kubectl_get_prints_the_seed_columns(api):
    kubectl(api, "apply", "-f", "-", stdin=seed_examples()[0][0])  # Configuration dry-paper
    kubectl(api, "apply", "-f", "-", stdin=seed_examples()[1][0])  # GatewayServer server
    kubectl(api, "apply", "-f", "-", stdin=seed_examples()[2][0])  # GatewayClient client
    kubectl(api, "patch", "configurations.%s" % GROUP, "dry-paper", "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": {"remote": {"cidr": {"pod": ["10.71.0.0/16"], "external": ["10.72.0.0/16"]}}}}))
    kubectl(api, "patch", "gatewayservers.%s" % GROUP, "server", "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": {"endpoint": {"addresses": ["10.42.3.54"], "port": 32133, "protocol": "UDP"}}}))
    conn = {"apiVersion": GROUP + "/v1alpha1", "kind": "Connection", "metadata": {"name": "crimson-field"},
            "spec": {"type": "Client", "gatewayRef": {"apiVersion": GROUP + "/v1beta1", "kind": "GatewayClient", "name": "client"}}}
    kubectl(api, "apply", "-f", "-", stdin=yaml.safe_dump(conn))
    kubectl(api, "patch", "connections.%s" % GROUP, "crimson-field", "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": {"value": "Connected", "latency": {"value": "1.1ms"}}}))

    expected = {
        "configurations": (["NAMESPACE", "NAME", "DESIRED POD CIDR", "REMAPPED POD CIDR", "AGE"],
                           ["default", "dry-paper", "10.243.0.0/16", "10.71.0.0/16"]),
        "gatewayservers": (["NAMESPACE", "NAME", "TEMPLATE NAME", "IP", "PORT", "AGE"],
                           ["default", "server", "wireguard-server", "10.42.3.54", "32133"]),
        "gatewayclients": (["NAMESPACE", "NAME", "TEMPLATE NAME", "IP", "PORT", "AGE"],
                           ["default", "client", "wireguard-client", "10.42.3.54", "32133"]),
        "connections": (["NAMESPACE", "NAME", "TYPE", "STATUS", "AGE"], ["default", "crimson-field", "Client", "Connected"]),
    }
    for plural, (header, row) in expected.items():
        for version in ("", ".v1beta1", ".v1alpha1"):  # kubectl's default (v1beta1, preferred) and each version
            table = _table(kubectl(api, "get", "%s%s.%s" % (plural, version, GROUP), "-A").stdout)
            assert table[0] == header, plural
            rows = [r for r in table[1:] if r[1] == row[1]]
            assert len(rows) == 1 and rows[0][:-1] == row and re.fullmatch(r"\d+[smhd]\w*", rows[0][-1]), (plural, version, table)
    wide = _table(kubectl(api, "get", "configurations.v1beta1.%s" % GROUP, "-A", "-o", "wide").stdout)
    assert [r for r in wide if r[1] == "dry-paper"][0][5:7] == ["10.70.0.0/16", "10.72.0.0/16"], wide


# ------------------------------------------------------------------ Liqo-shaped gateways honoured
LOCAL_ID, PEER_ID = "11111111-aaaa-4bbb-8ccc-000000000001", "22222222-aaaa-4bbb-8ccc-000000000002"


def _liqo_objects(raw_server, raw_client):
    """Liqo-shaped (v1beta1) objects written for this test: keys as Liqo stores them (32 raw bytes), ports lists,
    serviceLabels/serviceAnnotations, a Configuration without external, PublicKeys in both labellings."""
    import base64  # pylint: disable=import-outside-toplevel
    key = "GExyYe7RJ3Lo5nQVa6K2Tp9zobXCvWmJawsLxu7hn10="
    b1 = GROUP + "/v1beta1"
    ref = {"apiVersion": b1, "kind": "WgGatewayServerTemplate", "name": "wireguard-server", "namespace": "liqo"}
    cref = {"apiVersion": b1, "kind": "WgGatewayClientTemplate", "name": "wireguard-client", "namespace": "liqo"}
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "liqo-clusterid-configmap", "namespace": "liqo"},
         "data": {"CLUSTER_ID": LOCAL_ID}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "liqo-tenant-s"}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "liqo-tenant-c"}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "gw-keys", "namespace": "liqo-tenant-s"},
         "data": {"privateKey": base64.b64encode(raw_server).decode()}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "gw-keys", "namespace": "liqo-tenant-c"},
         "data": {"privateKey": base64.b64encode(raw_client).decode()}},
        {"apiVersion": b1, "kind": "GatewayServer",
         "metadata": {"name": "server", "namespace": "liqo-tenant-s", "labels": {"liqo.io/remote-cluster-id": PEER_ID}},
         "spec": {"endpoint": {"ports": [51840], "nodePorts": [30840], "serviceType": "NodePort"}, "mtu": 1340,
                  "secretRef": {"name": "gw-keys"}, "serverTemplateRef": ref,
                  "serviceLabels": {"team": "net"}, "serviceAnnotations": {"lb.example/type": "nlb"}}},
        {"apiVersion": b1, "kind": "GatewayClient",
         "metadata": {"name": "client", "namespace": "liqo-tenant-c", "labels": {"liqo.io/remote-cluster-id": PEER_ID}},
         "spec": {"endpoint": {"addresses": ["10.42.3.54"], "ports": [32133], "protocol": "UDP"}, "mtu": 1340,
                  "secretRef": {"name": "gw-keys"}, "clientTemplateRef": cref}},
    ] + [
        {"apiVersion": b1, "kind": "Configuration",
         "metadata": {"name": "peer", "namespace": ns, "labels": {"liqo.io/remote-cluster-id": PEER_ID}},
         "spec": {"remote": {"cidr": {"pod": ["10.243.0.0/16"]}}}} for ns in ("liqo-tenant-s", "liqo-tenant-c")
    ] + [
        # the seeds' labelling (this cluster's id) in the server's namespace, Liqo's (the owner's) in the client's
        {"apiVersion": b1, "kind": "PublicKey", "metadata": {"name": "peer", "namespace": "liqo-tenant-s", "labels": {
            "liqo.io/remote-cluster-id": LOCAL_ID, "networking.liqo.io/gateway-resource": "true"}}, "spec": {"publicKey": key}},
        {"apiVersion": b1, "kind": "PublicKey", "metadata": {"name": "peer", "namespace": "liqo-tenant-c", "labels": {
            "liqo.io/remote-cluster-id": PEER_ID, "networking.liqo.io/gateway-resource": "true"}}, "spec": {"publicKey": key}},
    ]


def test_liqo_shaped_gateways_are_honoured(api):
    """A Liqo-shaped GatewayServer/GatewayClient with secretRef (raw 32-byte keys), ports lists and
    serviceLabels: the Service and Deployment rendered and applied carry them, the keys are the user's."""
    from ansible_collections.liqo.fabric.plugins.module_utils.gateway import api as gateway_api  # pylint: disable=import-outside-toplevel
    from ansible_collections.liqo.fabric.plugins.module_utils.gateway import incluster as gateway_incluster  # pylint: disable=import-outside-toplevel
    from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import Kube  # pylint: disable=import-outside-toplevel
    from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.keys import public_key  # pylint: disable=import-outside-toplevel
    raw_server, raw_client = os.urandom(32), os.urandom(32)
    kubectl(api, "create", "namespace", "liqo", check=False)
    kubectl(api, "apply", "-f", os.path.join(ROOT, "deploy", "templates"))
    for obj in _liqo_objects(raw_server, raw_client):
        kubectl(api, "apply", "-f", "-", stdin=yaml.safe_dump(obj))   # a Configuration without external: accepted
    kube = Kube(api.kubeconfig)
    import base64  # pylint: disable=import-outside-toplevel
    server_pub = public_key(base64.b64encode(raw_server).decode())
    client_pub = public_key(base64.b64encode(raw_client).decode())

    out = gateway_incluster.controller_side(kube, "GatewayServer", "liqo-tenant-s", "server", "10.80.0.0/16")
    assert out["error"] is None, out["error"]
    assert sorted(out["applied"]) == ["Deployment/gw-server", "Service/gw-server"]
    assert out["plan"]["public_key"] == server_pub and out["plan"]["secret_name"] == "gw-keys"
    svc = json.loads(kubectl(api, "get", "-n", "liqo-tenant-s", "service", "gw-server", "-o", "json").stdout)
    port = svc["spec"]["ports"][0]
    assert (svc["spec"]["type"], port["port"], port["targetPort"], port["nodePort"]) == ("NodePort", 51840, 51840, 30840)
    assert svc["metadata"]["labels"]["team"] == "net" and svc["metadata"]["annotations"]["lb.example/type"] == "nlb"
    dep = json.loads(kubectl(api, "get", "-n", "liqo-tenant-s", "deployment", "gw-server", "-o", "json").stdout)
    assert dep["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] == 51840
    secrets = kubectl(api, "get", "secrets", "-A", "-o", "name").stdout.split()
    assert not [s for s in secrets if "wg-server" in s or "wg-client" in s]   # no key generated: the user's are used

    for ns in ("liqo-tenant-s", "liqo-tenant-c"):   # what the IPAM writes
        kube.patch("Configuration", ns, "peer", {"status": {"remote": {"cidr": {"pod": ["10.71.0.0/16"]}}}}, subresource="status")
    out = gateway_incluster.controller_side(kube, "GatewayClient", "liqo-tenant-c", "client", "10.80.0.0/16")
    assert out["error"] is None, out["error"]
    plans, keys = gateway_incluster.pod_side(kube, "GatewayClient", "liqo-tenant-c", "client", None, "10.80.0.0/16")
    assert plans[0]["public_key"] == client_pub and list(keys.values()) == [base64.b64encode(raw_client).decode()]
    assert plans[0]["peer"]["endpoint"] == "10.42.3.54:32133"

    # the agentless plan: user keys, the port of the list, both PublicKey labellings, no external CIDR
    plans, keys, changed = gateway_api.gateway_plans(kube, "192.0.2.10", "10.80.0.0/16", namespace="liqo-tenant-s")
    (p,) = plans
    assert p["ready"] and not changed, (p["waiting"], p["error"])
    assert p["listen_port"] == 30840 and p["public_key"] == server_pub and p["peer"]["public_key"].startswith("GExy")


@pytest.mark.parametrize("kind, name, patch, reason, field", [
    ("GatewayServer", "server", {"spec": {"endpoint": {"ports": [51840, 51841], "nodePorts": None}}}, "InvalidEndpoint",
     "spec.endpoint.ports"),
    ("GatewayServer", "server", {"spec": {"endpoint": {"serviceType": "ExternalName", "nodePorts": None}}},
     "UnsupportedServiceType", "spec.endpoint.serviceType"),
    ("GatewayClient", "client", {"spec": {"endpoint": {"protocol": "TCP"}}}, "UnsupportedProtocol", "spec.endpoint.protocol"),
    ("GatewayServer", "server", {"spec": {"secretRef": {"name": "absent"}}}, "SecretNotFound", "spec.secretRef"),
])
def test_liqo_values_accepted_by_the_api_refused_by_the_gateway(api, kind, name, patch, reason, field):
    from ansible_collections.liqo.fabric.plugins.module_utils.gateway import incluster as gateway_incluster  # pylint: disable=import-outside-toplevel
    from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import Kube  # pylint: disable=import-outside-toplevel
    ns = "liqo-tenant-s" if kind == "GatewayServer" else "liqo-tenant-c"
    plural = PLURAL[kind]
    before = json.loads(kubectl(api, "get", "-n", ns, "%s.v1beta1.%s" % (plural, GROUP), name, "-o", "json").stdout)
    try:
        kubectl(api, "patch", "-n", ns, "%s.v1beta1.%s" % (plural, GROUP), name, "--type=merge", "-p", json.dumps(patch))
        out = gateway_incluster.controller_side(Kube(api.kubeconfig), kind, ns, name, "10.80.0.0/16")
        assert out["error"]["reason"] == reason and out["error"]["message"].startswith(field), out["error"]
        assert out["applied"] == []
    finally:
        restore = {"spec": before["spec"]}
        kubectl(api, "patch", "-n", ns, "%s.v1beta1.%s" % (plural, GROUP), name, "--type=merge", "-p", json.dumps(restore))


def test_a_gateway_roll_waits_for_the_node_agents_roll(api):
    """A template change that would roll a gateway's Deployment (a new image) is held while the node-agent DaemonSet
    is not rolled out: the live Deployment is left as it is (its hold's start recorded on it), the Service still
    applied; once the DaemonSet has rolled out, the next run applies it and the mark goes; a hold older than
    HOLD_MAX rolls anyway. A DaemonSet that does not carry the node agents' label holds nothing."""
    from ansible_collections.liqo.fabric.plugins.module_utils.gateway import incluster as gateway_incluster  # pylint: disable=import-outside-toplevel
    from ansible_collections.liqo.fabric.plugins.module_utils.gateway import rollout  # pylint: disable=import-outside-toplevel
    from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import Kube  # pylint: disable=import-outside-toplevel
    kube, ns = Kube(api.kubeconfig), "liqo-tenant-s"
    kubectl(api, "create", "namespace", "liqo", check=False)
    kubectl(api, "apply", "-f", os.path.join(ROOT, "deploy", "templates"))
    for obj in _liqo_objects(os.urandom(32), os.urandom(32)):
        kubectl(api, "apply", "-f", "-", stdin=yaml.safe_dump(obj))
    assert gateway_incluster.controller_side(kube, "GatewayServer", ns, "server", "10.80.0.0/16")["error"] is None

    def daemonset(name, labels):   # no DaemonSet controller on this lab: the status is what the test writes
        kubectl(api, "apply", "-f", "-", stdin=yaml.safe_dump({
            "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": "liqo", "labels": labels},
            "spec": {"selector": {"matchLabels": {"app": name}}, "template": {
                "metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}))

    def status(name, updated, available):
        generation = kube.get("DaemonSet", "liqo", name)["metadata"]["generation"]
        kube.patch("DaemonSet", "liqo", name, {"status": {
            "observedGeneration": generation, "desiredNumberScheduled": 3, "currentNumberScheduled": 3,
            "numberMisscheduled": 0, "numberReady": available, "updatedNumberScheduled": updated,
            "numberAvailable": available}}, subresource="status")

    def image():
        dep = kube.get("Deployment", ns, "gw-server")
        return dep["spec"]["template"]["spec"]["containers"][0]["image"], rollout.held_since(dep)

    template = kube.get("WgGatewayServerTemplate", "liqo", "wireguard-server")
    before = image()[0]
    changed = json.loads(json.dumps(template).replace(before, before + "-next"))
    try:
        daemonset("other", {"app.kubernetes.io/name": "something-else"})
        status("other", 0, 0)
        daemonset("liqo-fabric-node-agent", {"app.kubernetes.io/name": "liqo-fabric-node-agent"})
        status("liqo-fabric-node-agent", 1, 2)
        kube.replace({k: v for k, v in changed.items() if k != "status"})
        out = gateway_incluster.controller_side(kube, "GatewayServer", ns, "server", "10.80.0.0/16")
        assert out["error"] is None and out["applied"] == ["Service/gw-server"], out
        assert out["held"] == {"Deployment/gw-server": "node agents rolling "
                                                       "(liqo/liqo-fabric-node-agent: 1 of 3 agents updated, 2 available)"}
        held_image, since = image()
        assert held_image == before and since is not None
        # still rolling: held again, from the same start
        assert gateway_incluster.controller_side(kube, "GatewayServer", ns, "server", "10.80.0.0/16")["held"]
        assert image() == (before, since)
        status("liqo-fabric-node-agent", 3, 3)
        out = gateway_incluster.controller_side(kube, "GatewayServer", ns, "server", "10.80.0.0/16")
        assert out["held"] == {} and "Deployment/gw-server" in out["applied"] and out["changed"], out
        assert image() == (before + "-next", None)
        # an agents' roll that never ends (a node down): a hold older than HOLD_MAX lets the gateway roll anyway
        status("liqo-fabric-node-agent", 2, 2)
        kube.replace(json.loads(json.dumps(kube.get("WgGatewayServerTemplate", "liqo", "wireguard-server")).replace(
            before + "-next", before + "-third")))
        assert gateway_incluster.controller_side(kube, "GatewayServer", ns, "server", "10.80.0.0/16")["held"]
        kube.patch("Deployment", ns, "gw-server", {"metadata": {"annotations": {
            rollout.HELD_SINCE: "%.0f" % (time.time() - rollout.HOLD_MAX - 5)}}})
        out = gateway_incluster.controller_side(kube, "GatewayServer", ns, "server", "10.80.0.0/16")
        assert out["held"] == {} and "Deployment/gw-server" in out["applied"], out
        assert image() == (before + "-third", None)
    finally:
        kubectl(api, "delete", "daemonset", "-n", "liqo", "other", "liqo-fabric-node-agent", "--ignore-not-found")
        template = json.dumps(kube.get("WgGatewayServerTemplate", "liqo", "wireguard-server"))
        kube.replace(json.loads(template.replace(before + "-next", before).replace(before + "-third", before)))


def test_liqo_configuration_with_list_cidrs_and_no_external_is_served(api):
    """Liqo's v1beta1 Configuration (list CIDRs, spec.local too) and one without external are accepted;
    the IPAM reads both and writes the remapped CIDRs in v1beta1's shape (lists of one), read as strings in v1alpha1."""
    from ansible_collections.liqo.fabric.plugins.module_utils.ipam import store as ipam_store  # pylint: disable=import-outside-toplevel
    from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import Kube  # pylint: disable=import-outside-toplevel
    kubectl(api, "create", "namespace", "liqo", check=False)
    kubectl(api, "create", "namespace", "liqo-tenant-l", check=False)
    liqo = {"apiVersion": GROUP + "/v1beta1", "kind": "Configuration",
            "metadata": {"name": "liqo-shaped", "namespace": "liqo-tenant-l", "labels": {"liqo.io/remote-cluster-id": "peer-l1"}},
            "spec": {"local": {"cidr": {"pod": ["10.200.0.0/16"], "external": ["10.70.0.0/16"]}},
                     "remote": {"cidr": {"pod": ["10.243.0.0/16"], "external": ["10.201.0.0/16"]}}}}
    bare = {"apiVersion": GROUP + "/v1alpha1", "kind": "Configuration",
            "metadata": {"name": "no-external", "namespace": "liqo-tenant-l", "labels": {"liqo.io/remote-cluster-id": "peer-l2"}},
            "spec": {"remote": {"cidr": {"pod": "10.244.0.0/16"}}}}
    for obj in (liqo, bare):
        kubectl(api, "apply", "-f", "-", stdin=yaml.safe_dump(obj))
    kube = Kube(api.kubeconfig)
    ipam_store.reconcile(kube, dict(ipam_store.DEFAULT_LOCAL, pod_cidrs=["10.200.0.0/16"], service_cidr="10.96.0.0/12"),
                         namespace="liqo-tenant-l")
    got = {o["metadata"]["name"]: o for o in kube.list("Configuration", "liqo-tenant-l")}
    assert got["liqo-shaped"]["status"]["remote"]["cidr"] == {"pod": ["10.243.0.0/16"], "external": ["10.201.0.0/16"]}
    assert got["no-external"]["status"]["remote"]["cidr"] == {"pod": ["10.244.0.0/16"]}
    assert _get(api, "Configuration", "v1alpha1", "liqo-tenant-l", "no-external")["status"]["remote"]["cidr"] == {"pod": "10.244.0.0/16"}
    table = _table(kubectl(api, "get", "configurations.%s" % GROUP, "-n", "liqo-tenant-l").stdout)
    assert ["no-external", "10.244.0.0/16", "10.244.0.0/16"] == table[[r[0] for r in table].index("no-external")][:3]


# ------------------------------------------------------------------ the conversion webhook


def _get(api, kind, version, ns, name):
    return json.loads(kubectl(api, "get", "-n", ns, "%s.%s.%s" % (PLURAL[kind], version, GROUP), name, "-o", "json").stdout)


def _liqo_v1beta1_examples():
    """tests/unit/data: Liqo-shaped v1beta1 objects written for this project."""
    with open(os.path.join(ROOT, "tests", "unit", "data", "liqo_v1beta1_examples.yaml"), encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d]


def _round_trip(api, obj, ns):
    """Apply `obj` in its version, read it in the other one, apply that back: no diff in either version."""
    mine = obj["apiVersion"].split("/")[1]
    other = "v1alpha1" if mine == "v1beta1" else "v1beta1"
    kind, name = obj["kind"], obj["metadata"]["name"]
    ns = obj["metadata"].get("namespace", ns)
    kubectl(api, "apply", "-n", ns, "-f", "-", stdin=yaml.safe_dump(obj))
    stored = _get(api, kind, "v1beta1", ns, name)
    there = _get(api, kind, other, ns, name)
    assert there["apiVersion"] == "%s/%s" % (GROUP, other)
    back = _get(api, kind, mine, ns, name)
    _assert_subset(obj["spec"], back["spec"], "%s %s read back in %s" % (kind, name, mine))
    proc = kubectl(api, "diff", "-n", ns, "-f", "-", stdin=yaml.safe_dump(applyable(there)), check=False)
    assert proc.returncode == 0, "%s %s: %s" % (kind, name, proc.stdout + proc.stderr)
    proc = kubectl(api, "apply", "-n", ns, "-f", "-", stdin=yaml.safe_dump(applyable(there)))
    after = _get(api, kind, "v1beta1", ns, name)
    # only kubectl's last-applied annotation moved (it records the apiVersion applied)
    assert applyable(after) == applyable(stored), "%s %s: applying back its %s form changed the object" % (kind, name, other)
    return stored, there


def test_seed_objects_round_trip_through_v1beta1(api):
    """The seeds' v1alpha1 objects, verbatim: stored in v1beta1 (a CIDR string as Liqo's list of one), read in
    v1beta1, applied back in v1beta1: no diff, nothing written."""
    kubectl(api, "create", "namespace", "seeds-rt", check=False)
    for dummy, obj in seed_examples():
        stored, there = _round_trip(api, obj, "seeds-rt")
        assert ANNOTATION not in (there["metadata"].get("annotations") or {}), obj["kind"]
        if obj["kind"] == "Configuration":
            assert stored["spec"]["remote"]["cidr"] == {"pod": ["10.243.0.0/16"], "external": ["10.70.0.0/16"]}


def test_liqo_v1beta1_objects_round_trip_through_v1alpha1(api):
    """Liqo-shaped v1beta1 objects (list CIDRs, ports/nodePorts lists, secretRef, service labels): read in v1alpha1
    as the seeds' shapes with what v1alpha1 cannot hold in the annotation, applied back in v1alpha1: no diff, the
    stored v1beta1 object unchanged."""
    kubectl(api, "create", "namespace", "liqo-rt", check=False)
    for obj in _liqo_v1beta1_examples():
        stored, there = _round_trip(api, obj, "liqo-rt")
        if obj["kind"] == "GatewayServer" and obj["metadata"]["name"] == "server":
            assert there["spec"]["endpoint"]["port"] == 51820 and there["spec"]["endpoint"]["nodePort"] == 32133
            assert "ports" not in there["spec"]["endpoint"] and "secretRef" not in there["spec"]
            assert json.loads(there["metadata"]["annotations"][ANNOTATION])["spec.secretRef"] == {"name": "server-keys"}
            assert stored["spec"]["endpoint"]["ports"] == [51820] and stored["spec"]["secretRef"] == {"name": "server-keys"}
        if obj["kind"] == "Configuration" and obj["metadata"]["name"] == "remote-b":
            assert there["spec"]["remote"]["cidr"] == {"pod": "10.243.0.0/16", "external": "10.71.0.0/16"}
            assert stored["spec"]["remote"]["cidr"] == {"pod": ["10.243.0.0/16"], "external": ["10.71.0.0/16"]}


def test_edit_in_v1alpha1_reaches_v1beta1(api):
    """An edit made in the seeds' version lands in the stored object (the edited port replaces the ports list)."""
    kubectl(api, "create", "namespace", "liqo-edit", check=False)
    server = next(o for o in _liqo_v1beta1_examples() if o["kind"] == "GatewayServer")
    kubectl(api, "apply", "-n", "liqo-edit", "-f", "-", stdin=yaml.safe_dump(server))
    kubectl(api, "patch", "-n", "liqo-edit", "gatewayservers.v1alpha1.%s" % GROUP, server["metadata"]["name"],
            "--type=merge", "-p", json.dumps({"spec": {"endpoint": {"port": 40000}}}))
    stored = _get(api, "GatewayServer", "v1beta1", "liqo-edit", server["metadata"]["name"])
    assert stored["spec"]["endpoint"]["port"] == 40000 and "ports" not in stored["spec"]["endpoint"]
    assert stored["spec"]["secretRef"] == {"name": "server-keys"}  # kept through the v1alpha1 patch


def test_webhook_down_clear_error_nothing_written_then_converges(api):
    """The webhook stopped: a v1alpha1 write and a v1alpha1 read fail with the apiserver's error naming the
    conversion webhook, nothing is written, v1beta1 keeps working; the webhook back, the same apply succeeds."""
    ns = "webhook-down"
    kubectl(api, "create", "namespace", ns, check=False)
    seed_conf = next(text for text, o in seed_examples() if o["kind"] == "Configuration")
    conf = yaml.safe_load(seed_conf)
    conf["metadata"]["name"] = "while-down"
    existing = next(o for o in _liqo_v1beta1_examples() if o["kind"] == "GatewayClient")
    kubectl(api, "apply", "-n", ns, "-f", "-", stdin=yaml.safe_dump(existing))
    before = _get(api, "GatewayClient", "v1beta1", ns, existing["metadata"]["name"])
    api.stop_webhook()
    try:
        proc = kubectl(api, "apply", "-n", ns, "-f", "-", stdin=yaml.safe_dump(conf), check=False)
        assert proc.returncode != 0
        assert "conversion webhook" in proc.stderr and "Configuration" in proc.stderr, proc.stderr
        proc = kubectl(api, "get", "-n", ns, "configurations.v1beta1.%s" % GROUP, "while-down", check=False)
        assert proc.returncode != 0 and "NotFound" in proc.stderr, "half-written: %s" % proc.stdout
        proc = kubectl(api, "get", "-n", ns, "gatewayclients.v1alpha1.%s" % GROUP, existing["metadata"]["name"], "-o", "json", check=False)
        assert proc.returncode != 0 and "conversion webhook" in proc.stderr, proc.stderr
        proc = kubectl(api, "patch", "-n", ns, "gatewayclients.v1alpha1.%s" % GROUP, existing["metadata"]["name"],
                       "--type=merge", "-p", json.dumps({"spec": {"mtu": 1400}}), check=False)
        assert proc.returncode != 0 and "conversion webhook" in proc.stderr, proc.stderr
        assert _get(api, "GatewayClient", "v1beta1", ns, existing["metadata"]["name"]) == before  # v1beta1 served
    finally:
        api.restart_webhook()
    deadline = time.monotonic() + 30
    while True:
        proc = kubectl(api, "apply", "-n", ns, "-f", "-", stdin=yaml.safe_dump(conf), check=False)
        if proc.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert proc.returncode == 0, proc.stderr
    assert _get(api, "Configuration", "v1beta1", ns, "while-down")["spec"]["remote"]["cidr"]["pod"] == ["10.243.0.0/16"]
    kubectl(api, "patch", "-n", ns, "gatewayclients.v1alpha1.%s" % GROUP, existing["metadata"]["name"],
            "--type=merge", "-p", json.dumps({"spec": {"mtu": 1400}}))
    after = _get(api, "GatewayClient", "v1beta1", ns, existing["metadata"]["name"])
    assert after["spec"]["mtu"] == 1400 and after["spec"]["secretRef"] == before["spec"]["secretRef"]
    assert after["spec"]["endpoint"]["ports"] == before["spec"]["endpoint"]["ports"]


def test_in_cluster_webhook_certificate_made_once_and_trusted_by_the_crds(api):
    """What the controller's init container does in-cluster (liqo.fabric.webhook_certificate): Secret
    liqo/liqo-fabric-webhook-tls made once (two racing replicas end with the same one), its CA the caBundle of
    the three converted CRDs (the URL and the other fields untouched); a second run changes nothing."""
    import concurrent.futures  # pylint: disable=import-outside-toplevel
    from ansible_collections.liqo.fabric.plugins.module_utils.kube import webhook_cert  # pylint: disable=import-outside-toplevel
    from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import Kube  # pylint: disable=import-outside-toplevel
    import base64  # pylint: disable=import-outside-toplevel
    crds = ["configurations.%s" % GROUP, "gatewayservers.%s" % GROUP, "gatewayclients.%s" % GROUP]
    kubectl(api, "create", "namespace", "liqo", check=False)
    before = {n: json.loads(kubectl(api, "get", "crd", n, "-o", "json").stdout)["spec"]["conversion"] for n in crds}
    try:
        def run(dummy):
            kube = Kube(api.kubeconfig)
            try:
                return webhook_cert.ensure(kube, "liqo", "liqo-fabric-webhook-tls", "liqo-fabric-webhook", crds)
            finally:
                kube.close()
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            results = list(pool.map(run, range(2)))
        assert results[0][0] == results[1][0]  # one certificate for both replicas
        made = [c for pems, changes in results for c in changes if c.startswith("Secret")]
        assert made == ["Secret liqo/liqo-fabric-webhook-tls: made"], made
        pems = results[0][0]
        assert webhook_cert.usable(pems, "liqo-fabric-webhook", "liqo") == ""
        for name in crds:
            conversion = json.loads(kubectl(api, "get", "crd", name, "-o", "json").stdout)["spec"]["conversion"]
            assert base64.b64decode(conversion["webhook"]["clientConfig"]["caBundle"]) == pems["ca.crt"]
            assert conversion["webhook"]["clientConfig"]["url"] == api.webhook_url
        assert run(0)[1] == []  # nothing to do the second time
    finally:
        for name, conversion in before.items():
            kubectl(api, "patch", "crd", name, "--type=merge", "-p", json.dumps({"spec": {"conversion": conversion}}))
        kubectl(api, "delete", "secret", "-n", "liqo", "liqo-fabric-webhook-tls", check=False)


@pytest.mark.parametrize("kind, field, value", [
    ("Configuration", "spec.remote.cidr.pod", ["10.243.0.0/16"]),
    ("Configuration", "spec.remote.cidr.external", ["10.70.0.0/16"]),
    ("GatewayServer", "spec.endpoint.nodePorts", [30840]),
    ("GatewayServer", "spec.secretRef", {"name": "keys"}),
    ("GatewayServer", "spec.serviceLabels", {"team": "net"}),
    ("GatewayClient", "spec.endpoint.ports", [32133]),
    ("GatewayClient", "spec.secretRef", {"name": "keys"}),
])
def test_v1alpha1_is_the_seeds_shape_v1beta1_fields_are_refused(api, kind, field, value):
    """v1alpha1 takes the seeds' shape only: a CIDR list or a v1beta1-only field is refused with 422 naming the
    field (not pruned silently), and nothing is written; the same object is fine as v1beta1."""
    from kubernetes.client.rest import ApiException  # pylint: disable=import-outside-toplevel
    obj = _mutate(kind, field, value, "alpha-list")
    with pytest.raises(ApiException) as err:
        custom_api(api).create_namespaced_custom_object(GROUP, "v1alpha1", "default", PLURAL[kind], obj)
    assert err.value.status == 422 and field in err.value.body
    obj = _mutate(kind, field, value, "alpha-list", "v1beta1")
    if field == "spec.endpoint.ports":
        del obj["spec"]["endpoint"]["port"]  # v1beta1: exactly one of port and ports
    custom_api(api).create_namespaced_custom_object(GROUP, "v1beta1", "default", PLURAL[kind], obj)
    custom_api(api).delete_namespaced_custom_object(GROUP, "v1beta1", "default", PLURAL[kind], "alpha-list")


@pytest.mark.parametrize("field", ["spec.local.cidr.pod", "spec.remote.cidr.pod", "spec.remote.cidr.external",
                                   "status.remote.cidr.pod"])
def test_v1beta1_is_liqos_shape_a_cidr_string_is_refused(api, field):
    """v1beta1 takes Liqo's list only: one CIDR string there is refused with 422 naming the field (it would be
    stored as a string a Liqo client, whose type is a list, cannot decode); the list of one is accepted."""
    from kubernetes.client.rest import ApiException  # pylint: disable=import-outside-toplevel
    cust = custom_api(api)
    obj = _mutate("Configuration", field, "10.243.0.0/16", "beta-string", "v1beta1")
    with pytest.raises(ApiException) as err:
        if field.startswith("status."):  # the status is written through its subresource only
            cust.create_namespaced_custom_object(GROUP, "v1beta1", "default", "configurations", dict(obj, status={}))
            cust.patch_namespaced_custom_object_status(GROUP, "v1beta1", "default", "configurations", "beta-string",
                                                       {"status": obj["status"]})
        else:
            cust.create_namespaced_custom_object(GROUP, "v1beta1", "default", "configurations", obj)
    assert err.value.status == 422 and field in err.value.body and "must be of type array" in err.value.body, err.value.body
    kubectl(api, "delete", "configurations.%s" % GROUP, "beta-string", "--ignore-not-found")
    cust.create_namespaced_custom_object(GROUP, "v1beta1", "default", "configurations",
                                         _mutate("Configuration", field, ["10.243.0.0/16"], "beta-string", "v1beta1"))
    kubectl(api, "delete", "configurations.%s" % GROUP, "beta-string")


def test_diagnose_proves_the_webhook_answers_and_names_it_when_down(api):
    """liqo.fabric.diagnose's "CRD conversion webhook" check: beyond the CRDs' clientConfig, a v1alpha1 dry-run
    create of each converted kind goes through the webhook (nothing written). Up: three passing checks; down: three
    failed ones naming the URL and carrying the apiserver's error; back up: passing again."""
    from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import Kube  # pylint: disable=import-outside-toplevel
    from ansible_collections.liqo.fabric.plugins.module_utils.verify import diagnose  # pylint: disable=import-outside-toplevel
    from ansible_collections.liqo.fabric.plugins.modules.diagnose_api import conversion_probe  # pylint: disable=import-outside-toplevel
    kube = Kube(api.kubeconfig)

    def checks():
        return [c for c in diagnose.crd_checks("lab", kube.list("CustomResourceDefinition"), "install-it",
                                               probe=conversion_probe(kube)) if c["check"] == "CRD conversion webhook"]

    def written():
        return [n for p in ("configurations", "gatewayservers", "gatewayclients")
                for n in kubectl(api, "get", "%s.%s" % (p, GROUP), "-A", "-o", "name").stdout.split() if "diagnose" in n]
    try:
        up = checks()
        assert [c["object"].split()[1] for c in up] == ["configurations.%s" % GROUP, "gatewayclients.%s" % GROUP,
                                                        "gatewayservers.%s" % GROUP]
        assert all(c["ok"] and c["detail"].endswith("answers (a v1alpha1 dry-run create converted)") for c in up), up
        api.stop_webhook()
        down = checks()
        assert [c["ok"] for c in down] == [False] * 3, down
        for c in down:
            assert api.webhook_url in c["cause"] and "does not answer" in c["cause"], c
            assert re.search(r"conversion webhook for networking\.liqo\.io/v1\w+, Kind=\w+ failed: Post \"%s" % re.escape(api.webhook_url),
                             c["detail"]) and "connection refused" in c["detail"], c
            assert "--mode webhook" in c["fix"]
    finally:
        api.restart_webhook()
        kube.close()
    assert written() == []  # dry runs only
    kube = Kube(api.kubeconfig)
    try:
        deadline = time.monotonic() + 30
        while True:
            again = checks()
            if all(c["ok"] for c in again) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert all(c["ok"] for c in again), again
    finally:
        kube.close()


def test_renewed_webhook_secret_reaches_a_running_webhook_without_restart(api, tmp_path):
    """In-cluster renewal, on the lab apiserver: a webhook serving files kept equal to its Secret
    (--webhook-secret, controller/webhook_sync.py) and the Configuration CRD pointing at it; the Secret and the
    CRD's caBundle renewed with a new CA (what another replica's start does): v1alpha1 reads go on working through
    the same running webhook, which now presents the new certificate."""
    import base64  # pylint: disable=import-outside-toplevel
    from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import Kube  # pylint: disable=import-outside-toplevel
    from controller import webhook_sync  # pylint: disable=import-outside-toplevel
    from controller.conversion import ConversionServer  # pylint: disable=import-outside-toplevel
    from tests.lab.pki import make_pki, make_serving_cert  # pylint: disable=import-outside-toplevel

    def pair(name):
        d = tmp_path / name
        d.mkdir()
        pki = make_pki(str(d), name)
        cert = make_serving_cert(str(d), pki["ca.crt"], pki["ca.key"], "webhook")
        return {k: open(p, "rb").read() for k, p in (("ca.crt", pki["ca.crt"]), ("tls.crt", cert["crt"]), ("tls.key", cert["key"]))}

    def secret(pems):
        return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sync-test-tls", "namespace": "liqo"},
                "data": {k: base64.b64encode(v).decode() for k, v in pems.items()}}

    def point_crd(url, pems):
        kubectl(api, "patch", "crd", crd, "--type=merge", "-p", json.dumps({"spec": {"conversion": {"webhook": {
            "clientConfig": {"url": url, "caBundle": base64.b64encode(pems["ca.crt"]).decode()}}}}}))

    def reads_in_v1alpha1():
        proc = kubectl(api, "get", "configurations.v1alpha1.%s" % GROUP, "-A", "-o", "name", check=False)
        return proc.returncode == 0 and proc.stdout.strip() != ""

    crd = "configurations.%s" % GROUP
    old, new = pair("old"), pair("new")
    kubectl(api, "create", "namespace", "liqo", check=False)
    kubectl(api, "apply", "-f", "-", stdin=yaml.safe_dump(secret(old)))
    kube = Kube(api.kubeconfig)
    files = (str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
    before = json.loads(kubectl(api, "get", "crd", crd, "-o", "json").stdout)["spec"]["conversion"]
    sync = webhook_sync.WebhookSecretSync(kube, "liqo", "sync-test-tls", *files, period=0.2)
    assert sync.sync_once() and not sync.sync_once()  # what the init container wrote; then nothing to do
    server = ConversionServer("127.0.0.1", 0, *files)
    server.start()
    sync.start()
    try:
        point_crd("https://127.0.0.1:%d/convert" % server.port, old)
        deadline = time.monotonic() + 30
        while not reads_in_v1alpha1():
            assert time.monotonic() < deadline, "the apiserver never converted through the test webhook"
            time.sleep(0.2)
        kubectl(api, "apply", "-f", "-", stdin=yaml.safe_dump(secret(new)))  # renewed by "another replica"
        started = time.monotonic()
        point_crd("https://127.0.0.1:%d/convert" % server.port, new)
        while not reads_in_v1alpha1():
            assert time.monotonic() - started < 30, "the running webhook never served the renewed certificate"
            time.sleep(0.1)
        with open(files[0], "rb") as f:
            assert f.read() == new["tls.crt"]
    finally:
        sync.stop()
        server.stop()
        kube.close()
        kubectl(api, "patch", "crd", crd, "--type=merge", "-p", json.dumps({"spec": {"conversion": before}}))
        kubectl(api, "delete", "secret", "-n", "liqo", "sync-test-tls", check=False)
