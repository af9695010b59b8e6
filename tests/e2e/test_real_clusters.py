"""Against lab kube-apiservers: kubeconfigs as real clusters hand them out (a client
certificate; an exec credential plugin) run `install` and `connect`; a cluster without Liqo's identity ConfigMap
gets one from `install` (a UUID, never changed afterwards, and a friendly name); without -e kubeconfig the playbooks
take the local cluster from kubernetes.core's K8S_AUTH_* variables; an unreachable apiserver, a missing or malformed
kubeconfig and refused credentials (401) fail with one message naming the URL, the kubeconfig and the context."""
import json
import os
import shutil
import socket
import subprocess
import uuid

import pytest
import yaml

from tests.ansible_run import VENV_BIN, ansible_env
from tests.conftest import require_root
from tests.e2e.fabric import apply_yaml, get, kubectl, playbook
from tests.lab import Lab
from tests.lab.credentials import client_cert_kubeconfig, exec_kubeconfig

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl is not installed")]
IDENTITY = ("configmap", "-n", "liqo", "liqo-clusterid-configmap")


def identity(cluster):
    return json.loads(kubectl(cluster, "get", *IDENTITY, "-o", "json"))["data"]


@pytest.fixture(scope="module")
def lab():
    require_root()
    with Lab([{"name": "a"}, {"name": "b"}], pod_cidr="10.243.0.0/16", nodes=1, pods_per_node=1) as lab_:
        # cluster b stands for a cluster without Liqo: the identity ConfigMap the lab writes is removed before
        # anything of the fabric runs, so only `install` can give it one
        kubectl(lab_["b"], "delete", *IDENTITY)
        yield lab_


@pytest.fixture(scope="module")
def kubeconfigs(lab):
    """a: a client certificate (files beside the kubeconfig); b: an exec plugin. Neither holds a token."""
    a, b = lab["a"], lab["b"]
    cert = client_cert_kubeconfig(a.apiserver, os.path.join(a.apiserver.workdir, "cert.kubeconfig"))
    exe, runs = exec_kubeconfig(b.apiserver, os.path.join(b.apiserver.workdir, "exec.kubeconfig"))
    for path in (cert, exe):
        user = yaml.safe_load(open(path, encoding="utf-8"))["users"][0]["user"]
        assert "token" not in user and "tokenFile" not in user
    return {"a": cert, "b": exe, "b_runs": runs}


def test_install_gives_a_cluster_without_liqo_an_identity_once(lab, kubeconfigs):
    a, b = lab["a"], lab["b"]
    assert kubectl(b, "get", *IDENTITY, check=False) == ""
    for cluster, kubeconfig in ((a, kubeconfigs["a"]), (b, kubeconfigs["b"])):
        playbook("install", kubeconfig=kubeconfig, pod_cidr=cluster.pod_cidr, service_cidr=cluster.service_cidr,
                 reserved=[cluster.underlay_cidr])
    first = identity(b)
    assert str(uuid.UUID(first["CLUSTER_ID"])) == first["CLUSTER_ID"]
    assert first["CLUSTER_NAME"] == "b"  # the kubeconfig's name of the cluster
    assert identity(a)["CLUSTER_ID"] == a.cluster_id  # an existing identity (the lab's, as Liqo's would be) is kept
    assert identity(a)["CLUSTER_NAME"] == "a"
    # again, and with another name: the id never changes, the name does
    playbook("install", kubeconfig=kubeconfigs["b"], pod_cidr=b.pod_cidr, service_cidr=b.service_cidr,
             reserved=[b.underlay_cidr], cluster_name="rome")
    assert identity(b) == dict(first, CLUSTER_NAME="rome")
    b.cluster_id = first["CLUSTER_ID"]


def test_connect_with_a_client_certificate_and_an_exec_plugin(lab, kubeconfigs):
    runs_before = _runs(kubeconfigs["b_runs"])
    proc = playbook("connect", lab.inventory_path, kubeconfig=kubeconfigs["a"], remote_kubeconfig=kubeconfigs["b"],
                    gateway_group="cluster_a_gateway", remote_gateway_group="cluster_b_gateway", wait=True,
                    wait_timeout=30)
    assert "INFO   (local) Connection is established" in proc.stdout
    assert "INFO   (remote) Connection is established" in proc.stdout
    for cluster in (lab["a"], lab["b"]):
        conns = get(cluster, "connections")
        assert [c["status"]["value"] for c in conns] == ["Connected"], conns
    assert _runs(kubeconfigs["b_runs"]) > runs_before  # b was reached through the plugin's credential
    # tenant namespaces and names from the friendly names install wrote (b: rome, a: a); the ids stay in the labels
    assert_tenant(lab["a"], "rome", lab["b"].cluster_id)
    assert_tenant(lab["b"], "a", lab["a"].cluster_id)


def assert_tenant(cluster, name, remote_id):
    """In cluster, the tenant namespace liqo-tenant-<name> (labelled with remote_id) holds the Configuration, the
    gateway, the PublicKey and the Connection for the remote cluster, all named <name> and labelled with its id."""
    ns = "liqo-tenant-" + name
    labels = json.loads(kubectl(cluster, "get", "namespace", ns, "-o", "json"))["metadata"]["labels"]
    assert labels["liqo.io/remote-cluster-id"] == remote_id
    found = {kind: [(o["metadata"]["namespace"], o["metadata"]["name"],
                     o["metadata"]["labels"]["liqo.io/remote-cluster-id"]) for o in get(cluster, kind)]
             for kind in ("configurations", "gatewayclients", "gatewayservers", "publickeies", "connections")}
    one = [(ns, name, remote_id)]
    assert found["configurations"] == found["publickeies"] == found["connections"] == one, found
    assert found["gatewayclients"] + found["gatewayservers"] == one, found


def test_names_stay_when_the_friendly_name_changes_and_disconnect_removes_them(lab, kubeconfigs):
    """b renamed after connect: a rerun of connect finds b's tenant namespace on a by its id label (no second
    namespace, no second gateway); disconnect removes the gateways, PublicKeys and Connections from it, and from
    a tenant namespace named after the id (what connect made before it used names)."""
    a, b = lab["a"], lab["b"]
    playbook("install", kubeconfig=kubeconfigs["b"], pod_cidr=b.pod_cidr, service_cidr=b.service_cidr,
             reserved=[b.underlay_cidr], cluster_name="paris")
    args = {"kubeconfig": kubeconfigs["a"], "remote_kubeconfig": kubeconfigs["b"],
            "gateway_group": "cluster_a_gateway", "remote_gateway_group": "cluster_b_gateway"}
    playbook("connect", lab.inventory_path, **args, wait=True, wait_timeout=30)
    assert_tenant(a, "rome", b.cluster_id)
    namespaces = kubectl(a, "get", "namespaces", "-o", "name").split()
    assert "namespace/liqo-tenant-paris" not in namespaces and "namespace/liqo-tenant-rome" in namespaces
    assert [c["status"]["value"] for c in get(a, "connections")] == ["Connected"]
    playbook("disconnect", lab.inventory_path, **args, confirm="yes")
    for cluster in (a, b):
        for kind in ("gatewayclients", "gatewayservers", "publickeies", "connections"):
            assert get(cluster, kind) == [], (cluster.name, kind)
        assert len(get(cluster, "configurations")) == 1  # disconnect keeps them (reset removes them)

    # a connection made before names: liqo-tenant-<b's id>, not labelled, objects named after the id
    legacy = "liqo-tenant-" + b.cluster_id
    kubectl(a, "label", "namespace", "liqo-tenant-rome", "liqo.io/remote-cluster-id-")
    kubectl(a, "create", "namespace", legacy)
    kubectl(a, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "networking.liqo.io/v1beta1", "kind": kind,
         "metadata": {"name": b.cluster_id, "namespace": legacy, "labels": {"liqo.io/remote-cluster-id": b.cluster_id}},
         "spec": spec} for kind, spec in (("PublicKey", {"publicKey": "GExyYe7RJ3Lo5nQVa6K2Tp9zobXCvWmJawsLxu7hn10="}),
                                          ("Connection", {"type": "Client", "gatewayRef": {
                                              "apiVersion": "networking.liqo.io/v1beta1", "kind": "GatewayClient",
                                              "name": b.cluster_id, "namespace": legacy}}))]}))
    assert len(get(a, "publickeies", legacy)) == 1
    playbook("disconnect", lab.inventory_path, **args, confirm="yes")
    assert get(a, "publickeies", legacy) == [] and get(a, "connections", legacy) == []


def _runs(path):
    return len(open(path, encoding="utf-8").read().split()) if os.path.exists(path) else 0


# --- kubernetes.core's K8S_AUTH_* variables instead of -e kubeconfig ------------------------------------
def k8s_auth(**variables):
    """An environment giving a cluster through K8S_AUTH_<NAME> only: KUBECONFIG and every other K8S_AUTH_* of this
    process empty (unset for the fabric, as for kubernetes.core)."""
    env = {name: "" for name in os.environ if name.startswith("K8S_AUTH_")}
    env.update({"KUBECONFIG": "", **{"K8S_AUTH_" + name: value for name, value in variables.items()}})
    return env


@pytest.fixture(scope="module")
def bare_inventory(lab, tmp_path_factory):
    """The lab's inventory without its clusters' kubeconfig variables: no host has a kubeconfig to fall back on."""
    inventory = json.load(open(lab.inventory_path, encoding="utf-8"))
    for group in inventory["all"]["children"].values():
        del group["vars"]["kubeconfig"]
    path = tmp_path_factory.mktemp("inventory") / "inventory.json"
    path.write_text(json.dumps(inventory))
    return str(path)


def test_install_connect_disconnect_with_the_local_cluster_in_k8s_auth_kubeconfig(lab, bare_inventory):
    """No -e kubeconfig: install, connect and disconnect take the local cluster from K8S_AUTH_KUBECONFIG (its
    gateway host too, whose probe processes keep its Connection); the remote one from -e remote_kubeconfig."""
    a, b = lab["a"], lab["b"]
    env = k8s_auth(KUBECONFIG=a.kubeconfig)
    playbook("install", environ=env, pod_cidr=a.pod_cidr, service_cidr=a.service_cidr, reserved=[a.underlay_cidr],
             cluster_name="milan")
    assert identity(a) == {"CLUSTER_ID": a.cluster_id, "CLUSTER_NAME": "milan"}
    args = {"remote_kubeconfig": b.kubeconfig, "gateway_group": "cluster_a_gateway",
            "remote_gateway_group": "cluster_b_gateway"}
    proc = playbook("connect", bare_inventory, environ=env, **args, wait=True, wait_timeout=30)
    assert "INFO   (local) Connection is established" in proc.stdout
    for cluster in (a, b):
        assert [c["status"]["value"] for c in get(cluster, "connections")] == ["Connected"], cluster.name
    playbook("disconnect", bare_inventory, environ=env, **args, confirm="yes")
    for cluster in (a, b):
        for kind in ("gatewayclients", "gatewayservers", "publickeies", "connections"):
            assert get(cluster, kind) == [], (cluster.name, kind)


def test_k8s_auth_host_api_key_and_ca_for_a_one_cluster_playbook(lab, bare_inventory):
    """K8S_AUTH_HOST + K8S_AUTH_API_KEY + K8S_AUTH_SSL_CA_CERT (no kubeconfig file at all): reconcile_ipam remaps a
    new Configuration of that cluster. A two-cluster playbook refuses them by name (the token would reach the remote
    cluster too), and one without -e remote_kubeconfig says the environment gives only the local cluster."""
    a, b = lab["a"], lab["b"]
    kubectl(a, "create", "namespace", "auth-env")
    apply_yaml(a, json.dumps({
        "apiVersion": "networking.liqo.io/v1beta1", "kind": "Configuration",
        "metadata": {"name": "peer", "namespace": "auth-env", "labels": {"liqo.io/remote-cluster-id": "auth-env-peer"}},
        "spec": {"remote": {"cidr": {"pod": [a.pod_cidr], "external": ["10.70.0.0/16"]}}}}))
    env = k8s_auth(HOST=a.apiserver.url, API_KEY=a.apiserver.token, SSL_CA_CERT=a.apiserver.ca)
    playbook("reconcile_ipam", environ=env)
    remapped = get(a, "configurations", "auth-env")[0]["status"]["remote"]["cidr"]
    assert remapped["pod"] and remapped["pod"] != [a.pod_cidr], remapped  # overlaps a's own pod CIDR: remapped

    args = {"remote_kubeconfig": b.kubeconfig, "gateway_group": "cluster_a_gateway",
            "remote_gateway_group": "cluster_b_gateway"}
    proc = playbook("connect", bare_inventory, environ=env, check=False, **args)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "connect: K8S_AUTH_API_KEY: set, and the modules would apply it to remote_kubeconfig's cluster too" in out, out
    proc = playbook("disconnect", bare_inventory, environ=k8s_auth(KUBECONFIG=a.kubeconfig), check=False, confirm="yes")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "is undefined" not in out
    assert ("disconnect: remote_kubeconfig: missing (-e remote_kubeconfig=PATH, the remote cluster: the K8S_AUTH_* "
            "variables, KUBECONFIG and ~/.kube/config give one cluster, the local one)") in out, out
    assert get(a, "configurations", "auth-env")  # nothing written, nothing deleted


def test_a_401_names_the_server_and_where_the_credentials_came_from(lab, tmp_path):
    """A wrong token against the lab's kube-apiserver: the message names its URL and the kubeconfig and context, or
    K8S_AUTH_HOST and K8S_AUTH_API_KEY, like the TLS and exec-plugin errors."""
    a = lab["a"]
    conf = yaml.safe_load(open(a.kubeconfig, encoding="utf-8"))
    conf["users"][0]["user"]["token"] = "not-the-token"
    wrong = tmp_path / "wrong-token.kubeconfig"
    wrong.write_text(yaml.safe_dump(conf))
    out = _cluster_info(str(wrong))
    assert (f"the Kubernetes API at {a.apiserver.url} (kubeconfig '{wrong}', context '{conf['current-context']}') "
            "refused the credentials (token): 401 Unauthorized to GET /api/v1/") in out, out
    out = _cluster_info(None, k8s_auth(HOST=a.apiserver.url, API_KEY="not-the-token", SSL_CA_CERT=a.apiserver.ca))
    assert (f"the Kubernetes API at {a.apiserver.url} (K8S_AUTH_HOST) refused the credentials (K8S_AUTH_API_KEY): "
            "401 Unauthorized to GET /api/v1/") in out, out
    assert "Traceback" not in out and "Kubernetes API error" not in out


# --- errors (no lab needed) ----------------------------------------------------------------------
def _cluster_info(kubeconfig, environ=None):
    args = ["-a", json.dumps({"kubeconfig": kubeconfig})] if kubeconfig else []
    proc = subprocess.run([os.path.join(VENV_BIN, "ansible"), "localhost", "-m", "liqo.fabric.cluster_info", *args],
                          capture_output=True, text=True, check=False,
                          env=ansible_env({"ANSIBLE_LOCALHOST_WARNING": "false", **(environ or {})}), timeout=120)
    assert proc.returncode != 0, proc.stdout
    return proc.stdout + proc.stderr


def test_unreachable_apiserver_is_named_with_kubeconfig_and_context(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = tmp_path / "kc"
    path.write_text(yaml.safe_dump({
        "current-context": "prod", "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
        "contexts": [{"name": "prod", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "x"}}]}))
    out = _cluster_info(str(path))
    assert (f"cannot reach the Kubernetes API at https://127.0.0.1:{port} (kubeconfig '{path}', context 'prod'): "
            "Connection refused") in out
    assert "Traceback" not in out


@pytest.mark.parametrize("content,message", [
    (None, "kubeconfig '{p}': no such file"),
    ("clusters: [\n", "kubeconfig '{p}': not valid YAML"),
    ("current-context: x\n", "kubeconfig '{p}', context 'x': no such context (contexts: none)"),
])
def test_missing_or_malformed_kubeconfig_gives_one_clear_error(tmp_path, content, message):
    path = tmp_path / "kc"
    if content is not None:
        path.write_text(content)
    out = _cluster_info(str(path))
    assert message.format(p=path) in out
    assert out.count("FAILED!") == 1 and "Traceback" not in out


def test_module_defaults_through_the_kube_action_group(tmp_path):
    """meta/runtime.yml's group liqo.fabric.kube: one module_defaults entry reaches every kube module."""
    missing = tmp_path / "from-module-defaults"
    (tmp_path / "play.yml").write_text(yaml.safe_dump([{
        "hosts": "localhost", "gather_facts": False,
        "module_defaults": {"group/liqo.fabric.kube": {"kubeconfig": str(missing)}},
        "tasks": [{"name": "no kubeconfig option", "liqo.fabric.cluster_info": {}, "ignore_errors": True},
                  {"name": "nor here", "liqo.fabric.k8s_apply": {"definitions": []}, "ignore_errors": True}]}]))
    proc = subprocess.run([os.path.join(VENV_BIN, "ansible-playbook"), "-i", "localhost,", "-c", "local",
                           str(tmp_path / "play.yml")], capture_output=True, text=True, check=False, timeout=120,
                          env=ansible_env({"ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default"}))
    tasks = proc.stdout.split("TASK [")[1:]
    assert len(tasks) == 2 and all(f"kubeconfig '{missing}': no such file" in t for t in tasks), proc.stdout
