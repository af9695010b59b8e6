"""Agentless, light lab: two gateways on the user's own keys (spec.secretRef: the server's Secret
holds the raw 32 bytes as Liqo stores them, the client's the base64 text), Liqo's single-element ports lists,
serviceLabels, and the seeds' PublicKey labelling on one side reach Connected with pod traffic across; a
missing Secret is an Error naming spec.secretRef; no private key shows in any output."""
import base64
import json
import os
import shutil

import pytest

from tests.e2e import fabric
from tests.e2e.fabric import PeerServer, get, kubectl, playbook, seen_source, translate

pytestmark = pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl is not installed")
OUTPUTS = []
USER_KEYS = []   # the users' private keys (base64), never to be seen in an output
GROUP = "networking.liqo.io"
LABEL = "liqo.io/remote-cluster-id"


@pytest.fixture(scope="module")
def lab():
    with fabric.connected_pair(outputs=OUTPUTS, gateway_group="cluster_a_gateway",
                               remote_gateway_group="cluster_b_gateway") as lab_:
        yield lab_


def _reconcile(cluster, lab, wait=10, check=True):
    proc = playbook("reconcile_gateway", lab.inventory_path, check=check, gateway_group=f"cluster_{cluster}_gateway",
                    gateway_probe_wait=wait)
    OUTPUTS.append(proc.stdout + proc.stderr)
    return proc


def _cluster_id(cluster):
    return json.loads(kubectl(cluster, "get", "configmap", "-n", "liqo", "liqo-clusterid-configmap", "-o", "json"))["data"]["CLUSTER_ID"]


def _connection(cluster):
    (conn,) = get(cluster, "connections")
    return conn


def _established(conn):
    return next(c for c in conn["status"].get("conditions") or [] if c["type"] == "Established")


def _secret(cluster, namespace, name, private_bytes):
    kubectl(cluster, "apply", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace},
        "data": {"privateKey": base64.b64encode(private_bytes).decode()}}))


def _public(raw):
    from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.keys import public_key  # pylint: disable=import-outside-toplevel
    return public_key(base64.b64encode(raw).decode())


def test_user_keys_ports_lists_and_seed_labelling_reach_connected(lab):
    a, b = lab["a"], lab["b"]
    assert _connection(a)["status"]["value"] == "Connected"
    server, client = get(b, "gatewayservers")[0], get(a, "gatewayclients")[0]
    sns, cns = server["metadata"]["namespace"], client["metadata"]["namespace"]
    raw_server = os.urandom(32)                                   # Liqo's form: the raw bytes
    raw_client = os.urandom(32)
    _secret(b, sns, "my-keys", raw_server)
    _secret(a, cns, "my-keys", _public_text_private(raw_client))  # base64 text of the key
    port = server["spec"]["endpoint"]["port"]
    kubectl(b, "patch", "gatewayservers.%s" % GROUP, server["metadata"]["name"], "-n", sns, "--type", "merge", "-p",
            json.dumps({"spec": {"secretRef": {"name": "my-keys"}, "serviceLabels": {"team": "net"},
                                 "endpoint": {"port": None, "ports": [port]}}}))
    kubectl(a, "patch", "gatewayclients.%s" % GROUP, client["metadata"]["name"], "-n", cns, "--type", "merge", "-p",
            json.dumps({"spec": {"secretRef": {"name": "my-keys"},
                                 "endpoint": {"port": None, "ports": [client["spec"]["endpoint"]["port"]]}}}))
    # the peers' PublicKeys carry the new public keys; in a, the seeds' labelling (a's own id)
    pk_a, pk_b = get(a, "publickeies")[0], get(b, "publickeies")[0]
    kubectl(a, "patch", "publickeies.%s" % GROUP, pk_a["metadata"]["name"], "-n", pk_a["metadata"]["namespace"],
            "--type", "merge", "-p", json.dumps({"metadata": {"labels": {LABEL: _cluster_id(a)}},
                                                 "spec": {"publicKey": _public(raw_server)}}))
    kubectl(b, "patch", "publickeies.%s" % GROUP, pk_b["metadata"]["name"], "-n", pk_b["metadata"]["namespace"],
            "--type", "merge", "-p", json.dumps({"spec": {"publicKey": _public(raw_client)}}))
    _reconcile("b", lab, wait=2)
    _reconcile("a", lab, wait=15)
    _reconcile("b", lab, wait=10)
    for cluster in (a, b):
        conn = _connection(cluster)
        assert conn["status"]["value"] == "Connected", _established(conn)
    server = get(b, "gatewayservers")[0]
    assert server["status"]["secretRef"]["name"] == "my-keys" and server["status"]["endpoint"]["port"] == port
    assert get(a, "gatewayclients")[0]["status"]["secretRef"]["name"] == "my-keys"
    # pod traffic across, through the remap, on the user's keys
    pod_a, pod_b = a.gateway_nodes[0].pods[0], b.gateway_nodes[0].pods[0]
    remapped_in_a = get(a, "configurations")[0]["status"]["remote"]["cidr"]["pod"][0]
    remapped_in_b = get(b, "configurations")[0]["status"]["remote"]["cidr"]["pod"][0]
    with PeerServer(pod_b.netns):
        seen = seen_source(pod_a.netns, translate(pod_b.ip, b.pod_cidr, remapped_in_a))
        assert seen == translate(pod_a.ip, a.pod_cidr, remapped_in_b)
    USER_KEYS.extend([base64.b64encode(raw_server).decode(), base64.b64encode(raw_client).decode()])


def _public_text_private(raw):
    return base64.b64encode(raw)


def test_missing_user_secret_is_an_error_naming_the_field(lab):
    """The gateway was built before: the refused change holds it (its tunnel runs on, the Connection stays with
    the live probe) and the run fails naming the field."""
    b = lab["b"]
    server = get(b, "gatewayservers")[0]
    ref = ["gatewayservers.%s" % GROUP, server["metadata"]["name"], "-n", server["metadata"]["namespace"]]
    kubectl(b, "patch", *ref, "--type", "merge", "-p", json.dumps({"spec": {"secretRef": {"name": "absent"}}}))
    try:
        proc = _reconcile("b", lab, wait=2, check=False)
        out = proc.stdout + proc.stderr
        assert proc.returncode != 0 and "spec.secretRef: Secret" in out and "absent" in out, out[-3000:]
        assert "runs on as last built" in out, out[-3000:]
        assert _connection(b)["status"]["value"] == "Connected", _established(_connection(b))
    finally:
        kubectl(b, "patch", *ref, "--type", "merge", "-p", json.dumps({"spec": {"secretRef": {"name": "my-keys"}}}))
        _reconcile("b", lab, wait=10)
    assert _connection(b)["status"]["value"] == "Connected"


def test_no_private_key_in_any_output(lab):
    del lab
    assert len(USER_KEYS) == 2 and OUTPUTS
    for text in OUTPUTS:
        for key in USER_KEYS:
            assert key not in text and key[:24] not in text
