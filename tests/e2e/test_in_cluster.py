"""Issue 16: the fabric inside the cluster, installed with `kubectl apply -k deploy/` on real-node lab clusters
(kubelets, containerd, the project's image loaded in every node). Two clusters a and b, both pod CIDR
10.243.0.0/16, 3 nodes each, one lab for the whole module (~1 min to come up); the last test removes the
install with `kubectl delete -k deploy/` and checks that nothing of it is left.

What runs here is the image built by `make image` from this work tree: the controller Deployment (2 replicas,
one holding the Lease), the node-agent DaemonSet, the bootstrap init container, all with their own
ServiceAccounts under RBAC enforced by the apiserver.
"""
from __future__ import annotations

import base64
import json
import os
import time

import pytest
import yaml

from tests.conftest import ROOT, require_root
from tests.e2e.fabric import wait_for
from tests.e2e.test_real_lab import kubectl
from tests.lab import Lab, netns
from tests.lab.images import fabric_image, images
from tests.lab.imagestore import seed_root

DEPLOY = os.path.join(ROOT, "deploy")
SA_CONTROLLER = "system:serviceaccount:liqo:liqo-fabric-controller"
SA_AGENT = "system:serviceaccount:liqo:liqo-fabric-node-agent"
SA_GATEWAY = "system:serviceaccount:default:liqo-fabric-gateway"

# the seeds' "manual on single cluster" objects (v1alpha1, as the seeds write them); applied with kubectl only
CONFIGURATION = """
apiVersion: networking.liqo.io/v1alpha1
kind: Configuration
metadata:
  labels:
    liqo.io/remote-cluster-id: {remote_id}
  name: {name}
spec:
  remote:
    cidr:
      external: 10.70.0.0/16
      pod: 10.243.0.0/16
"""
GATEWAY_SERVER = """
apiVersion: networking.liqo.io/v1alpha1
kind: GatewayServer
metadata:
  labels:
    liqo.io/remote-cluster-id: {remote_id}
  name: server
spec:
  endpoint:
    port: 51820
    serviceType: NodePort
  mtu: 1340
  serverTemplateRef:
    apiVersion: networking.liqo.io/v1alpha1
    kind: WgGatewayServerTemplate
    name: wireguard-server
    namespace: liqo
"""
GATEWAY_CLIENT = """
apiVersion: networking.liqo.io/v1alpha1
kind: GatewayClient
metadata:
  labels:
    liqo.io/remote-cluster-id: {remote_id}
  name: client
  namespace: default
spec:
  clientTemplateRef:
    apiVersion: networking.liqo.io/v1alpha1
    kind: WgGatewayClientTemplate
    name: wireguard-client
    namespace: liqo
  endpoint:
    addresses:
    - {address}
    port: {port}
    protocol: UDP
  mtu: 1340
"""
PUBLIC_KEY = """
apiVersion: networking.liqo.io/v1alpha1
kind: PublicKey
metadata:
  labels:
    liqo.io/remote-cluster-id: {remote_id}
    networking.liqo.io/gateway-resource: "true"
  name: {name}
spec:
  publicKey: {key}
"""


def get_json(cluster, *args) -> dict:
    return json.loads(kubectl(cluster, "get", *args, "-o", "json").stdout)


def pods(cluster, name: str) -> list:
    return cluster.kube.core.list_namespaced_pod("liqo", label_selector=f"app.kubernetes.io/name={name}").items


def ready_pods(cluster, name: str) -> list:
    return [p for p in pods(cluster, name) if p.status.phase == "Running" and p.metadata.deletion_timestamp is None
            and all(cs.ready for cs in (p.status.container_statuses or []))]


def condition(obj: dict, ctype: str) -> dict:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == ctype), {})


def can_i(cluster, who: str, *args) -> bool:
    """The apiserver's answer (SubjectAccessReview) for the ServiceAccount `who`."""
    out = kubectl(cluster, "auth", "can-i", "--as", who, *args, check=False)
    assert out.stdout.strip() in ("yes", "no"), (out.stdout, out.stderr)
    return out.stdout.strip() == "yes"


def http_from_pod(cluster, pod: str, port: int, path: str) -> str:
    code = f"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:{port}{path}', timeout=5).read().decode())"
    return kubectl(cluster, "exec", "-n", "liqo", pod, "--", "python3", "-c", code).stdout


def controller_logs(cluster) -> list[dict]:
    out = []
    for p in pods(cluster, "liqo-fabric-controller"):
        text = kubectl(cluster, "logs", "-n", "liqo", p.metadata.name, "-c", "controller", check=False).stdout
        for line in text.splitlines():
            try:
                out.append(dict(json.loads(line), pod=p.metadata.name))
            except ValueError:
                pass
    return out


def cluster_id(cluster) -> str:
    return get_json(cluster, "configmap", "-n", "liqo", "liqo-clusterid-configmap")["data"]["CLUSTER_ID"]


def gateway_hosts_on_the_wan(cluster) -> None:
    """What a cloud gives a gateway host and the lab does not: its public (WAN) address where a remote reaches it
    (the node annotation the fabric reads, as it would read an ExternalIP) and the NAT of pod traffic leaving
    through that WAN (a CNI's ipMasq): the lab's nodes reach the WAN only from gateway hosts."""
    for node in cluster.gateway_nodes:
        kubectl(cluster, "annotate", "node", node.name, f"liqo.io/gateway-address={node.wan_ip.split('/')[0]}", "--overwrite")
        netns.run(["ip", "netns", "exec", node.netns, "iptables-nft", "-t", "nat", "-A", "POSTROUTING", "-s",
                   cluster.pod_cidr, "-o", "wan0", "-j", "MASQUERADE"])


@pytest.fixture(scope="module")
def lab():
    require_root()
    seed_root(images())  # the images of this work tree, in the containerd root every node starts from
    lab = Lab([{"name": "a"}, {"name": "b"}], pod_cidr="10.243.0.0/16", nodes=3, real_nodes=True)
    lab.up()
    try:
        for c in lab.clusters.values():
            gateway_hosts_on_the_wan(c)
        yield lab
    finally:
        lab.down()


@pytest.fixture(scope="module")
def installed(lab):
    """`kubectl apply -k deploy/` on both clusters, then everything of it running."""
    for c in lab.clusters.values():
        kubectl(c, "apply", "-k", DEPLOY, timeout=120)
    for c in lab.clusters.values():
        wait_for(lambda c=c: len(ready_pods(c, "liqo-fabric-controller")) == 2, timeout=180,
                 what=f"{c.name}: 2 controller pods ready")
        wait_for(lambda c=c: len(ready_pods(c, "liqo-fabric-node-agent")) == len(c.nodes), timeout=120,
                 what=f"{c.name}: a node agent ready on every node")
    return lab


FIGURES: dict = {}


@pytest.fixture(scope="module")
def connected(installed):
    """The seeds' "manual on single cluster" flow with kubectl alone: b is the server, a the client."""
    a, b = installed["a"], installed["b"]
    ids = {"a": cluster_id(a), "b": cluster_id(b)}
    t0 = time.monotonic()
    # each cluster gets the Configuration of the other (what `liqoctl generate configuration` prints there)
    kubectl(a, "apply", "-f", "-", input=CONFIGURATION.format(remote_id=ids["b"], name="dry-paper"))
    kubectl(b, "apply", "-f", "-", input=CONFIGURATION.format(remote_id=ids["a"], name="crimson-field"))
    for c, name in ((a, "dry-paper"), (b, "crimson-field")):
        wait_for(lambda c=c, name=name: ((get_json(c, "configurations", name).get("status") or {}).get("remote") or {})
                 .get("cidr", {}).get("pod"), timeout=60, what=f"{c.name}: status.remote.cidr.pod")
    kubectl(b, "apply", "-f", "-", input=GATEWAY_SERVER.format(remote_id=ids["a"]))
    endpoint = wait_for(lambda: ((get_json(b, "gatewayserver", "server").get("status") or {}).get("endpoint") or {})
                        if ((get_json(b, "gatewayserver", "server").get("status") or {}).get("endpoint") or {})
                        .get("addresses") else None, timeout=120, what="the GatewayServer's status.endpoint")
    kubectl(a, "apply", "-f", "-", input=GATEWAY_CLIENT.format(remote_id=ids["b"], address=endpoint["addresses"][0],
                                                               port=endpoint["port"]))
    # the public keys: read on one side (the gateway's key Secret), applied as a PublicKey on the other
    for c, other, secret in ((b, a, "wg-server-server"), (a, b, "wg-client-client")):
        key = wait_for(lambda c=c, secret=secret: kubectl(c, "get", "secret", secret, "-o", "jsonpath={.data.publicKey}",
                                                          check=False).stdout, timeout=60, what=f"{c.name}: {secret}")
        kubectl(other, "apply", "-f", "-", input=PUBLIC_KEY.format(remote_id=ids[c.name], name=f"from-{c.name}",
                                                                   key=base64.b64decode(key).decode()))
    applied = time.monotonic()
    for c in (a, b):
        wait_for(lambda c=c: [x for x in get_json(c, "connections")["items"]
                              if (x.get("status") or {}).get("value") == "Connected"], timeout=120,
                 what=f"{c.name}: Connection Connected")
    FIGURES["last kubectl apply -> both Connections Connected (s)"] = round(time.monotonic() - applied, 1)
    FIGURES["first kubectl apply -> both Connected (s)"] = round(time.monotonic() - t0, 1)
    return {"ids": ids, "endpoint": endpoint}


def test_manifests_name_the_built_image_never_pulled():
    objs = [o for f in ("controller/deployment.yaml", "controller/daemonset.yaml", "templates/wireguard-server.yaml",
                        "templates/wireguard-client.yaml")
            for o in yaml.safe_load_all(open(os.path.join(DEPLOY, f), encoding="utf-8"))]
    containers = []
    for o in objs:
        spec = o["spec"]
        if o["kind"].startswith("WgGateway"):
            spec = spec["template"]["spec"]["deployment"]["spec"]
        pod = spec["template"]["spec"]
        containers += pod.get("initContainers", []) + pod["containers"]
    assert len(containers) == 5
    for c in containers:
        assert c["image"] == fabric_image(), c
        assert c["imagePullPolicy"] in ("IfNotPresent", "Never"), c


def test_apply_k_installs_crds_templates_rbac_controller_and_node_agent(installed):
    for c in installed.clusters.values():
        crds = get_json(c, "crd")["items"]
        assert sorted(x["metadata"]["name"] for x in crds if x["spec"]["group"] == "networking.liqo.io") == [
            "configurations.networking.liqo.io", "connections.networking.liqo.io", "gatewayclients.networking.liqo.io",
            "gatewayservers.networking.liqo.io", "publickeies.networking.liqo.io",
            "wggatewayclienttemplates.networking.liqo.io", "wggatewayservertemplates.networking.liqo.io"]
        # written by the bootstrap init container with the controller's ServiceAccount
        assert get_json(c, "wggatewayservertemplates", "-n", "liqo")["items"][0]["metadata"]["name"] == "wireguard-server"
        assert get_json(c, "wggatewayclienttemplates", "-n", "liqo")["items"][0]["metadata"]["name"] == "wireguard-client"
        assert len(cluster_id(c)) == 36
        agents = ready_pods(c, "liqo-fabric-node-agent")
        assert sorted(p.spec.node_name for p in agents) == sorted(n.name for n in c.nodes)
        assert all(p.spec.host_network for p in agents)
        for p in ready_pods(c, "liqo-fabric-controller") + agents:
            assert p.spec.containers[0].image == fabric_image()
    assert cluster_id(installed["a"]) != cluster_id(installed["b"])


def test_controller_in_cluster_config_and_one_active_replica_behind_the_lease(installed):
    c = installed["a"]
    names = sorted(p.metadata.name for p in ready_pods(c, "liqo-fabric-controller"))
    lease = wait_for(lambda: (get_json(c, "lease", "-n", "liqo", "liqo-fabric-controller")["spec"]
                              .get("holderIdentity")), timeout=60, what="a Lease holder")
    holder = next(n for n in names if lease.startswith(n + "-"))   # identity: <hostname = pod name>-<pid>
    leaders = {n: json.loads(http_from_pod(c, n, 8080, "/healthz"))["leader"]["local"] for n in names}
    assert leaders == {n: n == holder for n in names}, (leaders, lease)
    started = [r for r in controller_logs(c) if r.get("msg") == "controller started"]
    assert sorted(r["pod"] for r in started) == names
    for r in started:
        assert r["mode"] == "controller" and r["clusters"] == ["local"]
        assert r["entries"] == ["Configuration", "GatewayServer", "GatewayClient"]


def test_ipam_in_cluster_remaps_the_seeds_configuration(connected, installed):
    a = installed["a"]
    conf = get_json(a, "configurations", "dry-paper")
    assert condition(conf, "Ready").get("status") == "True" and condition(conf, "Degraded").get("status") == "False"
    remapped = conf["status"]["remote"]["cidr"]["pod"]
    assert remapped != "10.243.0.0/16" and remapped.endswith("/16"), conf["status"]
    out = kubectl(a, "get", "configurations.networking.liqo.io", "-A").stdout
    assert "10.243.0.0/16" in out and remapped in out, out


def test_both_connections_connected_with_the_service_endpoint(connected, installed):
    a, b = installed["a"], installed["b"]
    svc = get_json(b, "service", "gw-server")
    node_port = svc["spec"]["ports"][0]["nodePort"]
    server_pod = wait_for(lambda: [p for p in b.kube.core.list_namespaced_pod(
        "default", label_selector="networking.liqo.io/gateway-name=server").items if p.status.phase == "Running"],
        timeout=30, what="the server's gateway pod")[0]
    wan = {n.name: n.wan_ip.split("/")[0] for n in b.gateway_nodes}
    # the endpoint is the Service's: the WAN address of the gateway pod's node and the allocated nodePort
    assert connected["endpoint"] == {"addresses": [wan[server_pod.spec.node_name]], "port": node_port, "protocol": "UDP"}
    out = kubectl(b, "get", "gatewayservers.networking.liqo.io", "-A").stdout
    assert f"server   wireguard-server   {wan[server_pod.spec.node_name]}   {node_port}" in out, out
    out = kubectl(a, "get", "gatewayclients.networking.liqo.io", "-A").stdout
    assert f"client   wireguard-client   {wan[server_pod.spec.node_name]}   {node_port}" in out, out
    for c, kind in ((a, "Client"), (b, "Server")):
        out = kubectl(c, "get", "connections.networking.liqo.io", "-A").stdout
        assert kind in out and "Connected" in out, out
        gw = get_json(c, "gatewayservers" if kind == "Server" else "gatewayclients", kind.lower())
        assert condition(gw, "Ready").get("status") == "True", gw.get("status")


def test_wireguard_go_runs_inside_the_gateway_pods_own_netns(connected, installed):
    for c, name in ((installed["a"], "client"), (installed["b"], "server")):
        pod = c.kube.core.list_namespaced_pod("default", label_selector=f"networking.liqo.io/gateway-name={name}").items[0]
        assert pod.spec.containers[0].image == fabric_image() and not pod.spec.host_network
        show = kubectl(c, "exec", pod.metadata.name, "--", "wg", "show").stdout
        iface = show.split("interface: ")[1].split()[0]
        assert "latest handshake" in show, show
        procs = kubectl(c, "exec", pod.metadata.name, "--", "sh", "-c",
                        "cat /proc/[0-9]*/comm 2>/dev/null").stdout.split()
        assert "wireguard-go" in procs, procs
        # the NAT table and the policy rules live in the pod, not on its node
        assert "table ip lfgw_" in kubectl(c, "exec", pod.metadata.name, "--", "nft", "list", "tables").stdout
        node = c.node(pod.spec.node_name)
        assert iface not in netns.run(["ip", "netns", "exec", node.netns, "ip", "-br", "link"]).stdout
        # owned by the gateway: the controller's Deployment, Service and key Secret
        for kind in ("deployment", "secret") + (("service",) if name == "server" else ()):
            obj = get_json(c, kind, f"gw-{name}" if kind != "secret" else f"wg-{name}-{name}")
            assert [r["kind"] for r in obj["metadata"]["ownerReferences"]] == ["Gateway" + name.capitalize()], obj["metadata"]


def test_least_privilege_rbac_per_mode(installed):
    c = installed["a"]
    # the controller: Secrets in the namespaces it serves only, never cluster-wide
    assert can_i(c, SA_CONTROLLER, "get", "secrets", "-n", "liqo")
    assert can_i(c, SA_CONTROLLER, "create", "secrets", "-n", "default")
    assert not can_i(c, SA_CONTROLLER, "get", "secrets", "-n", "kube-system")
    assert not can_i(c, SA_CONTROLLER, "list", "secrets", "--all-namespaces")
    assert not can_i(c, SA_CONTROLLER, "create", "deployments", "-n", "kube-system")
    assert can_i(c, SA_CONTROLLER, "update", "configurations.networking.liqo.io", "--subresource=status", "-n", "default")
    assert not can_i(c, SA_CONTROLLER, "delete", "configurations.networking.liqo.io", "-n", "default")
    assert not can_i(c, SA_CONTROLLER, "create", "customresourcedefinitions")
    # the node agent reads; it writes nothing in the API and reads no Secret
    assert can_i(c, SA_AGENT, "list", "pods", "--all-namespaces")
    assert not can_i(c, SA_AGENT, "get", "secrets", "-n", "liqo")
    assert not can_i(c, SA_AGENT, "patch", "nodes")
    # a gateway pod: its namespace's Secrets and gateways, its node; nothing else
    assert can_i(c, SA_GATEWAY, "get", "secrets", "-n", "default")
    assert not can_i(c, SA_GATEWAY, "get", "secrets", "-n", "liqo")
    assert not can_i(c, SA_GATEWAY, "list", "nodes")
    assert not can_i(c, SA_GATEWAY, "create", "deployments", "-n", "default")
    assert can_i(c, SA_GATEWAY, "update", "connections.networking.liqo.io", "--subresource=status", "-n", "default")
    assert not can_i(c, SA_GATEWAY, "get", "wggatewayservertemplates.networking.liqo.io", "-n", "liqo")
    # and the running controllers never hit a permission they lack
    forbidden = [r for r in controller_logs(c) if "403" in json.dumps(r) or "forbidden" in json.dumps(r).lower()]
    assert not forbidden, forbidden[:3]


def test_memory_of_the_pods(connected, installed):
    """Printed, not asserted (make bench holds the targets): RSS of every process in each pod's container."""
    c = installed["a"]
    code = ("import glob\nt=0\nfor f in glob.glob('/proc/[0-9]*/status'):\n"
            "    try:\n        t+=int([l for l in open(f) if l.startswith('VmRSS')][0].split()[1])\n"
            "    except Exception:\n        pass\nprint(t)")
    for label, pod, ns in (("controller (acting)", None, "liqo"), ("node agent", None, "liqo"), ("gateway", None, "default")):
        if label.startswith("controller"):
            lease = get_json(c, "lease", "-n", "liqo", "liqo-fabric-controller")["spec"]["holderIdentity"]
            pod = next(p.metadata.name for p in ready_pods(c, "liqo-fabric-controller") if lease.startswith(p.metadata.name))
        elif label == "node agent":
            pod = ready_pods(c, "liqo-fabric-node-agent")[0].metadata.name
        else:
            pod = c.kube.core.list_namespaced_pod("default", label_selector="networking.liqo.io/component=gateway").items[0].metadata.name
        kib = int(kubectl(c, "exec", "-n", ns, pod, "--", "python3", "-c", code).stdout.strip())
        FIGURES[f"RSS of the {label} pod (MiB)"] = round(kib / 1024, 1)
    print("\nin-cluster figures:", json.dumps(FIGURES, indent=1))
    assert all(v > 0 for v in FIGURES.values())


def test_deleting_the_gateways_removes_their_deployments_services_and_secrets(connected, installed):
    a, b = installed["a"], installed["b"]
    kubectl(a, "delete", "gatewayclient", "client", "--wait=true", timeout=120)
    kubectl(b, "delete", "gatewayserver", "server", "--wait=true", timeout=120)
    for c, name in ((a, "client"), (b, "server")):
        wait_for(lambda c=c, name=name: not c.kube.core.list_namespaced_pod(
            "default", label_selector=f"networking.liqo.io/gateway-name={name}").items, timeout=90,
            what=f"{c.name}: the gateway pod gone")
        left = kubectl(c, "get", "deployments,services,secrets,connections", "-n", "default", "-o", "name").stdout.split()
        assert not [x for x in left if x.endswith(f"gw-{name}") or x.endswith(f"wg-{name}-{name}")
                    or x.startswith("connection")], left


def test_delete_k_removes_it_all(installed):
    for c in installed.clusters.values():
        kubectl(c, "delete", "-k", DEPLOY, "--wait=true", timeout=180)
    for c in installed.clusters.values():
        wait_for(lambda c=c: kubectl(c, "get", "namespace", "liqo", check=False).returncode != 0, timeout=120,
                 what=f"{c.name}: namespace liqo gone")
        assert not [x for x in get_json(c, "crd")["items"] if x["spec"]["group"] == "networking.liqo.io"]
        left = kubectl(c, "get", "clusterroles,clusterrolebindings,rolebindings,serviceaccounts", "-A",
                       "-l", "app.kubernetes.io/part-of=liqo-fabric", "-o", "name").stdout
        assert left.strip() == "", left
        wait_for(lambda c=c: not [p for p in c.kube.core.list_pod_for_all_namespaces().items
                                  if p.spec.containers[0].image == fabric_image()], timeout=60,
                 what=f"{c.name}: no pod of the fabric's image left")
