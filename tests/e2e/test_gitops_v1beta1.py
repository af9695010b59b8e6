"""GitOps in Liqo's shapes: the v1beta1 YAML committed under tests/e2e/data/liqo-v1beta1/
(list CIDRs, the gateways' own keys as raw bytes behind spec.secretRef, ports/nodePorts lists, PublicKeys
labelled with their owner's id) applied with kubectl to two lab clusters, the controller running, no playbook run
by hand: both Connections end Connected on the user's keys and pods talk across. Every applied object reads in
v1alpha1 through the lab's conversion webhook, and applying back what was read (in v1alpha1, then in v1beta1)
changes nothing. The user's key Secrets are never written; no private key, in any form, shows in the controller's
log, its playbook runs' output or a kubectl output."""
import base64
import contextlib
import json
import os
import re
import shutil
import subprocess

import pytest
import yaml

from ansible_collections.liqo.fabric.plugins.module_utils.api.conversion import ANNOTATION
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.keys import generate_private_key, public_key
from tests.conftest import ROOT
from tests.e2e import fabric
from tests.e2e.api_forward import ApiIntoNetns
from tests.e2e.fabric import applyable, get, translate, wait_for
from tests.e2e.test_controller import ControllerProc

pytestmark = pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl is not installed")
DATA = os.path.join(ROOT, "tests", "e2e", "data", "liqo-v1beta1")
PLACEHOLDER = re.compile(r"\$\{([A-Z_]+)\}")
GROUP = "networking.liqo.io"
PLURAL = {"Configuration": "configurations", "GatewayServer": "gatewayservers", "GatewayClient": "gatewayclients",
          "PublicKey": "publickeies"}
NODE_PORT = 32133          # the server's nodePorts in the files (and the client's ports)
OUTPUTS = []               # every kubectl output of the run (stdout and stderr)


@pytest.fixture(scope="module")
def lab():
    with fabric.lab_pair(nodes=2) as lab_, contextlib.ExitStack() as stack:
        # a gateway host reaches its cluster's API (the light lab's is on the host's loopback): the health probe
        # process writes the server's Connection when the client comes up after the server's run
        for c in (lab_["a"], lab_["b"]):
            stack.enter_context(ApiIntoNetns(c.gateway_nodes[0].netns, c.kubeconfig))
        yield lab_


def kubectl(cluster, *args, stdin=None, check=True):
    proc = subprocess.run(["kubectl", "--kubeconfig", cluster.kubeconfig, *args], input=stdin, capture_output=True,
                          text=True, check=False)
    OUTPUTS.append(proc.stdout + proc.stderr)
    if check and proc.returncode != 0:
        raise AssertionError("kubectl %s: %s" % (" ".join(args), proc.stderr))
    return proc.stdout


def render(side, values, dest):
    """The committed files of `side`, placeholders substituted (an unknown one fails), written to `dest`."""
    os.makedirs(dest)
    for name in sorted(os.listdir(os.path.join(DATA, side))):
        with open(os.path.join(DATA, side, name), encoding="utf-8") as f:
            text = PLACEHOLDER.sub(lambda m: values[m.group(1)], f.read())
        with open(os.path.join(dest, name), "w", encoding="utf-8") as f:
            f.write(text)
    return dest


def keypair():
    """(raw private bytes, Secret data of the private key, public key): the Secret data is the base64 of the raw
    32 bytes, which is also the key's usual text form."""
    private = generate_private_key()
    return base64.b64decode(private), private, public_key(private)


def applied_objects():
    """(side, kind, namespace, name) of every networking.liqo.io object in the files."""
    out = []
    for side in ("cluster-a", "cluster-b"):
        for name in sorted(os.listdir(os.path.join(DATA, side))):
            with open(os.path.join(DATA, side, name), encoding="utf-8") as f:
                for doc in yaml.safe_load_all(f):
                    if doc and doc["apiVersion"].startswith(GROUP + "/"):
                        assert doc["apiVersion"] == GROUP + "/v1beta1", name
                        out.append((side[-1], doc["kind"], doc["metadata"]["namespace"], doc["metadata"]["name"]))
    return out


def read(cluster, kind, version, ns, name):
    return yaml.safe_load(kubectl(cluster, "get", "%s.%s.%s" % (PLURAL[kind], version, GROUP), name, "-n", ns,
                                  "-o", "yaml"))


def secret_version(cluster, ns):
    """resourceVersion of the user's key Secret (read alone: the data never enters an output)."""
    return kubectl(cluster, "get", "secret", "gateway-keys", "-n", ns, "-o", "jsonpath={.metadata.resourceVersion}")


def state(*clusters):
    """The gateways' and Connections' status, for a failure's message."""
    return yaml.safe_dump({c.name: {k: [{"name": o["metadata"]["name"], "status": o.get("status")} for o in get(c, k)]
                                    for k in ("gatewayservers", "gatewayclients", "connections")} for c in clusters})


def connected(*clusters):
    conns = [get(c, "connections") for c in clusters]
    return all(c and c[0].get("status", {}).get("value") == "Connected" for c in conns)


def test_liqo_v1beta1_files_and_the_controller_connect_two_clusters(lab, tmp_path):
    a, b = lab["a"], lab["b"]
    server_raw, server_private, server_public = keypair()
    client_raw, client_private, client_public = keypair()
    values = {"CLUSTER_ID_A": a.cluster_id, "CLUSTER_ID_B": b.cluster_id,
              "SERVER_PRIVATE_KEY": server_private, "SERVER_PUBLIC_KEY": server_public,
              "CLIENT_PRIVATE_KEY": client_private, "CLIENT_PUBLIC_KEY": client_public}
    ctl = ControllerProc(str(tmp_path), {"a": a.kubeconfig, "b": b.kubeconfig}, inventory=lab.inventory_path)
    ctl.start()
    try:
        # the server's side first, then its endpoint read from the status (as the seeds' script does) for the client's
        kubectl(b, "apply", "-f", render("cluster-b", values, str(tmp_path / "b")))
        endpoint = wait_for(lambda: ((get(b, "gatewayservers", "liqo-tenant-cluster-a") or [{}])[0].get("status") or {})
                            .get("endpoint"), 240, what="GatewayServer status.endpoint")
        assert endpoint["port"] == NODE_PORT and endpoint["addresses"], endpoint   # nodePorts honoured
        kubectl(a, "apply", "-f", render("cluster-a", dict(values, SERVER_ADDRESS=endpoint["addresses"][0]),
                                         str(tmp_path / "a")))
        tenants = ((a, "liqo-tenant-cluster-b"), (b, "liqo-tenant-cluster-a"))
        secrets = {(c, ns): secret_version(c, ns) for c, ns in tenants}
        try:
            wait_for(lambda: connected(a, b), 300, interval=1, what="both Connections Connected")
        except AssertionError as exc:
            raise AssertionError("%s\n%s\n%s" % (exc, state(a, b), ctl.log_tail(60))) from None

        # the user's keys: the status names their Secret; the handshake itself proves the keys are the files'
        # (each peer holds only the public key of the user's Secret of the other side)
        (server,) = get(b, "gatewayservers")
        (client,) = get(a, "gatewayclients")
        for gw in (server, client):
            assert gw["status"]["secretRef"]["name"] == "gateway-keys", gw["status"]
            ready = [c for c in gw["status"].get("conditions", []) if c["type"] == "Ready"]
            assert ready and ready[0]["status"] == "True", gw["status"]
        # the IPAM remapped the overlapping pod CIDR and wrote it in v1beta1's shape (Liqo's list of one)
        remap = {}
        for cluster in (a, b):
            (conf,) = get(cluster, "configurations")
            pod = conf["status"]["remote"]["cidr"]["pod"]
            assert isinstance(pod, list) and len(pod) == 1 and pod[0] != "10.243.0.0/16", conf["status"]
            remap[cluster.name] = pod[0]
        # pods on non-gateway nodes (the overlay too), both ways, at the remapped address
        pod_a, pod_b = a.nodes[1].pods[0], b.nodes[1].pods[0]
        to_b, to_a = translate(pod_b.ip, b.pod_cidr, remap["a"]), translate(pod_a.ip, a.pod_cidr, remap["b"])
        try:
            wait_for(lambda: a.ping(pod_a.netns, to_b), 120, interval=1, what="a pod of a reaching a pod of b")
            wait_for(lambda: b.ping(pod_b.netns, to_a), 120, interval=1, what="a pod of b reaching a pod of a")
        except AssertionError as exc:
            raise AssertionError("%s\n%s\n%s\n%s\n%s" % (exc, state(a, b), fabric.lab_path_state(a, to_b),
                                                         fabric.lab_path_state(b, to_a), ctl.log_tail(120))) from None

        round_trips_through_v1alpha1(lab)
        # nothing the round trips did moved the fabric; the users' Secrets were only read
        assert connected(a, b)
        assert a.ping(pod_a.netns, to_b)
        assert {k: secret_version(*k) for k in secrets} == secrets
    finally:
        ctl.stop()
        ctl.reap_orphans()
    no_private_key_anywhere(ctl, [(server_raw, server_private), (client_raw, client_private)],
                            [str(tmp_path / side / "20-gateway-keys.yaml") for side in ("b", "a")])


def round_trips_through_v1alpha1(lab):
    """Each applied object read in v1alpha1 (the conversion webhook: the seeds' shapes, what v1alpha1 cannot hold
    in the annotation), that read applied back in v1alpha1, then the v1beta1 read applied back: the stored object
    is unchanged each time (spec, labels, generation)."""
    objects = applied_objects()
    kinds = sorted(obj[1] for obj in objects)
    assert kinds == ["Configuration", "Configuration", "GatewayClient", "GatewayServer", "PublicKey", "PublicKey"]
    for side, kind, ns, name in objects:
        cluster = lab[side]
        stored = read(cluster, kind, "v1beta1", ns, name)
        alpha = read(cluster, kind, "v1alpha1", ns, name)
        assert alpha["apiVersion"] == GROUP + "/v1alpha1" and alpha["metadata"]["uid"] == stored["metadata"]["uid"]
        kept = json.loads((alpha["metadata"].get("annotations") or {}).get(ANNOTATION, "{}"))
        spec = alpha["spec"]
        if kind == "Configuration":
            assert spec["remote"]["cidr"] == {"pod": "10.243.0.0/16", "external": "10.70.0.0/16"}, alpha
            assert stored["spec"]["remote"]["cidr"] == {"pod": ["10.243.0.0/16"], "external": ["10.70.0.0/16"]}
        elif kind == "GatewayServer":
            assert spec["endpoint"]["port"] == 51820 and spec["endpoint"]["nodePort"] == NODE_PORT, alpha
            assert "ports" not in spec["endpoint"] and "nodePorts" not in spec["endpoint"] and "secretRef" not in spec
            assert kept["spec.secretRef"] == {"name": "gateway-keys"}, kept
        elif kind == "GatewayClient":
            assert spec["endpoint"]["port"] == NODE_PORT and "ports" not in spec["endpoint"], alpha
            assert "secretRef" not in spec and kept["spec.secretRef"] == {"name": "gateway-keys"}, kept
        else:
            assert spec == stored["spec"], alpha
        for back in (alpha, stored):
            out = kubectl(cluster, "apply", "-f", "-", stdin=yaml.safe_dump(applyable(back)))
            after = read(cluster, kind, "v1beta1", ns, name)
            what = "%s %s/%s in %s: applying back its %s read" % (kind, ns, name, side, back["apiVersion"])
            assert applyable(after) == applyable(stored), "%s changed it:\n%s\n%s" % (what, out, yaml.safe_dump(applyable(after)))
            assert after["metadata"]["generation"] == stored["metadata"]["generation"], what


def key_forms(raw, text):
    """A private key as it could leak: raw bytes, base64 text (and its first 24 characters), hex (WireGuard's UAPI)."""
    return (raw, text.encode(), text[:24].encode(), raw.hex().encode(), raw.hex().upper().encode())


def no_private_key_anywhere(ctl, keys, rendered):
    """No form of the keys is in the controller's log, nor in its runtime directory (the playbook runs' output and
    artifacts), nor in any kubectl output of the run; the same search finds them in the rendered Secrets."""
    runtime = os.path.join(ctl.workdir, "rt-" + ctl.name)
    files = [ctl.log_path] + [os.path.join(d, f) for d, _dirs, fs in os.walk(runtime) for f in fs]
    texts = [t.encode() for t in OUTPUTS]
    for path in files:
        with open(path, "rb") as f:
            texts.append(f.read())
    runs = texts[len(OUTPUTS) + 1:]
    assert texts[len(OUTPUTS)] and len(OUTPUTS) > 20 and any(b"reconcile_gateway" in t for t in runs)
    for (raw, text), secret in zip(keys, rendered):
        with open(secret, "rb") as f:
            assert text.encode() in f.read()   # the search works: the user's own Secret file holds the key
        for form in key_forms(raw, text):
            assert not [t for t in texts if form in t], "a private key shows in an output"
