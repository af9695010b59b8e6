"""The in-cluster lab: the fabric installed with `kubectl apply -k deploy/` on two real-node lab clusters a and b
(kubelets, containerd, the project's image loaded in every node), both pod CIDR 10.243.0.0/16, 3 nodes each, and
connected by the seeds' "manual on single cluster" flow with kubectl alone (b the server, a the client).

tests/e2e/test_in_cluster.py asserts on it (on the lab it shares with test_real_lab: tests/e2e/real_nodes.py),
tests/benchmarks/bench_in_cluster.py measures it (on a real_node_lab() of its own): both install() and connect(), and
run the scenarios below. A scenario asserts what it needs to go on
(the faults repaired, traffic back) and writes the times it took into `figures` when given one: the benchmark
prints them, the tests pass none.
"""
from __future__ import annotations

import base64
import contextlib
import datetime
import ipaddress
import json
import os
import re
import subprocess
import sys
import threading
import time

import yaml

from tests.conftest import ROOT
from tests.e2e.fabric import ChangeRecorder, PingFlow, longest_gap, wait_for
from tests.e2e import real_nodes
from tests.e2e.real_nodes import kubectl, kubectl_binary
from tests.lab import netns
from tests.lab.images import tiny_image
from tests.lab.loadbalancer import LabLoadBalancer

DEPLOY = os.path.join(ROOT, "deploy")

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
      pod: {remote_pod}
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


def cluster_id(cluster) -> str:
    return get_json(cluster, "configmap", "-n", "liqo", "liqo-clusterid-configmap")["data"]["CLUSTER_ID"]


@contextlib.contextmanager
def real_node_lab():
    """A lab of its own (tests/e2e/real_nodes.py), for a run outside the suite's shared one."""
    lab = real_nodes.bring_up(real_nodes.new_lab())
    try:
        yield lab
    finally:
        lab.down()


# A workload with one pod on every node (required anti-affinity); busybox httpd serves /big (1,400 bytes) and
# /cgi-bin/peer, which answers the source address the server sees.
WORKLOAD_CMD = ("mkdir -p /w/cgi-bin && head -c 1400 /dev/zero | tr '\\0' x > /w/big && "
                "printf '#!/bin/sh\\necho Content-Type: text/plain\\necho\\necho peer=$REMOTE_ADDR\\n' > /w/cgi-bin/peer && "
                "chmod +x /w/cgi-bin/peer && exec httpd -f -p 8080 -h /w")


def workload(replicas: int) -> str:
    return yaml.safe_dump({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "workload", "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "workload"}}, "template": {
            "metadata": {"labels": {"app": "workload"}},
            "spec": {"terminationGracePeriodSeconds": 1,
                     "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                         {"labelSelector": {"matchLabels": {"app": "workload"}}, "topologyKey": "kubernetes.io/hostname"}]}},
                     "containers": [{"name": "web", "image": tiny_image(), "imagePullPolicy": "IfNotPresent",
                                     "command": ["sh", "-c", WORKLOAD_CMD]}]}}}})


def workload_pods(cluster) -> list:
    return [p for p in cluster.kube.core.list_namespaced_pod("default", label_selector="app=workload").items
            if p.status.phase == "Running" and p.status.pod_ip and p.metadata.deletion_timestamp is None]


def shipped_pod_cidr() -> str:
    """The pod CIDR deploy/ ships in its network ConfigMap."""
    with open(os.path.join(DEPLOY, "controller", "network.yaml"), encoding="utf-8") as f:
        return yaml.safe_load(f)["data"]["podCIDR"]


def install(lab, deploy: str = DEPLOY) -> None:
    """`kubectl apply -k` of `deploy` (this tree's deploy/, or a kustomization of another release) on every cluster
    (and the workload), then everything of it running. A cluster whose pod CIDR is not the shipped one gets its own
    in the network ConfigMap (the edit docs/in-cluster.md asks for)."""
    for c in lab.clusters.values():
        kubectl(c, "apply", "-k", deploy, timeout=120)
        if c.pod_cidr != shipped_pod_cidr():
            kubectl(c, "patch", "configmap", "-n", "liqo", "liqo-fabric-network", "--type", "merge", "-p",
                    json.dumps({"data": {"podCIDR": c.pod_cidr}}))
        kubectl(c, "apply", "-f", "-", input=workload(len(c.nodes)))
    for c in lab.clusters.values():
        wait_for(lambda c=c: len(ready_pods(c, "liqo-fabric-controller")) == 2, timeout=180,
                 what=f"{c.name}: 2 controller pods ready")
        wait_for(lambda c=c: len(ready_pods(c, "liqo-fabric-node-agent")) == len(c.nodes), timeout=120,
                 what=f"{c.name}: a node agent ready on every node")


def connected_connections(cluster) -> list:
    return [x for x in get_json(cluster, "connections")["items"] if (x.get("status") or {}).get("value") == "Connected"]


def connect(lab, figures: dict | None = None) -> dict:
    """The seeds' "manual on single cluster" flow with kubectl alone: b is the server, a the client. Until both
    Connections are Connected."""
    return connect_pair(lab, "a", "b", "dry-paper", "crimson-field", figures)


def connection_to(cluster, remote_id: str) -> dict:
    """The cluster's Connection of the peering with `remote_id` ({} if none)."""
    return next((x for x in get_json(cluster, "connections")["items"]
                 if (x["metadata"].get("labels") or {}).get("liqo.io/remote-cluster-id") == remote_id), {})


def connect_pair(lab, client: str, server: str, client_conf: str, server_conf: str, figures: dict | None = None) -> dict:
    """One peering by the seeds' "manual on single cluster" flow with kubectl alone: cluster `server` runs the
    GatewayServer `server`, cluster `client` the GatewayClient `client`; each has the Configuration of the other
    (`client_conf` in the client, `server_conf` in the server) and its PublicKey `from-<other cluster>`. Until the
    Connections of this peering are Connected on both sides (a cluster peered elsewhere too has others)."""
    figures = {} if figures is None else figures
    a, b = lab[client], lab[server]
    ids = {client: cluster_id(a), server: cluster_id(b)}
    t0 = time.monotonic()
    # each cluster gets the Configuration of the other (what `liqoctl generate configuration` prints there)
    kubectl(a, "apply", "-f", "-", input=CONFIGURATION.format(remote_id=ids[server], name=client_conf,
                                                              remote_pod=b.pod_cidr))
    kubectl(b, "apply", "-f", "-", input=CONFIGURATION.format(remote_id=ids[client], name=server_conf,
                                                              remote_pod=a.pod_cidr))
    for c, name in ((a, client_conf), (b, server_conf)):
        wait_for(lambda c=c, name=name: ((get_json(c, "configurations", name).get("status") or {}).get("remote") or {})
                 .get("cidr", {}).get("pod"), timeout=60, what=f"{c.name}: status.remote.cidr.pod")
    kubectl(b, "apply", "-f", "-", input=GATEWAY_SERVER.format(remote_id=ids[client]))
    endpoint = wait_for(lambda: ((get_json(b, "gatewayserver", "server").get("status") or {}).get("endpoint") or {})
                        if ((get_json(b, "gatewayserver", "server").get("status") or {}).get("endpoint") or {})
                        .get("addresses") else None, timeout=120, what="the GatewayServer's status.endpoint")
    kubectl(a, "apply", "-f", "-", input=GATEWAY_CLIENT.format(remote_id=ids[server], address=endpoint["addresses"][0],
                                                               port=endpoint["port"]))
    # the public keys: read on one side (the gateway's key Secret), applied as a PublicKey on the other
    for c, other, secret in ((b, a, "wg-server-server"), (a, b, "wg-client-client")):
        key = wait_for(lambda c=c, secret=secret: kubectl(c, "get", "secret", secret, "-o", "jsonpath={.data.publicKey}",
                                                          check=False).stdout, timeout=60, what=f"{c.name}: {secret}")
        kubectl(other, "apply", "-f", "-", input=PUBLIC_KEY.format(remote_id=ids[c.name], name=f"from-{c.name}",
                                                                   key=base64.b64decode(key).decode()))
    applied = time.monotonic()
    for c, other in ((a, server), (b, client)):
        wait_for(lambda c=c, other=other: (connection_to(c, ids[other]).get("status") or {}).get("value") == "Connected",
                 timeout=120, what=f"{c.name}: Connection Connected")
    figures["last kubectl apply -> both Connections Connected (s)"] = round(time.monotonic() - applied, 1)
    figures["first kubectl apply -> both Connected (s)"] = round(time.monotonic() - t0, 1)
    return {"ids": ids, "endpoint": endpoint}


def disconnect_pair(lab, client: str, server: str, client_conf: str, server_conf: str) -> None:
    """A peering made by connect_pair removed with kubectl alone: its gateway, PublicKey and Configuration deleted
    on both sides (the controllers' finalizers take the gateways' Deployments and Services with them)."""
    for c, kind, gw, other, conf in ((lab[client], "gatewayclient", "client", server, client_conf),
                                     (lab[server], "gatewayserver", "server", client, server_conf)):
        kubectl(c, "delete", kind, gw, "--wait=false")
        kubectl(c, "delete", "publickeies.networking.liqo.io", f"from-{other}", "--wait=false")
        kubectl(c, "delete", "configuration", conf, "--wait=false")


def active_gateway(cluster, name: str, timeout: float = 60):
    """The active pod of gateway `name` (the Lease holder labels itself networking.liqo.io/active=true): exactly
    one, Running."""
    def one():
        pods = [p for p in cluster.kube.core.list_namespaced_pod(
            "default", label_selector=f"networking.liqo.io/gateway-name={name},networking.liqo.io/active=true").items
            if p.status.phase == "Running" and p.metadata.deletion_timestamp is None]
        return pods if len(pods) == 1 else None
    return wait_for(one, timeout=timeout, what=f"{cluster.name}: one active pod of gateway {name}")[0]


def metrics_text(cluster, pod: str, namespace: str = "default") -> str:
    """The /metrics page of a fabric pod's engine, read inside the pod."""
    code = "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:8080/metrics', timeout=5).read().decode())"
    return kubectl(cluster, "exec", "-n", namespace, pod, "--", "python3", "-c", code, check=False).stdout


def peer_metric(cluster, pod: str, name: str, remote_id: str):
    """A liqo_peer_* value from the gateway pod's own /metrics (its live probe), None when absent."""
    for line in metrics_text(cluster, pod).splitlines():
        if line.startswith(name + "{") and f'cluster_id="{remote_id}"' in line and 'driver="wireguard"' in line:
            return float(line.rsplit(" ", 1)[1])
    return None


def pod_metrics(cluster, pod: str, namespace: str = "default") -> dict:
    """The engine's own /metrics of a fabric pod, unlabelled samples only (name -> value)."""
    return {ln.split()[0]: float(ln.split()[1]) for ln in metrics_text(cluster, pod, namespace).splitlines()
            if ln and not ln.startswith("#") and "{" not in ln and len(ln.split()) == 2}


def idle(cluster, pod: str) -> bool:
    """No run of the pod's engine running or queued (a repair in progress would undo a test's fault)."""
    m = pod_metrics(cluster, pod)
    return m.get("liqo_fabric_queue_running") == 0 and m.get("liqo_fabric_queue_depth") == 0


def connection_status(cluster) -> tuple:
    """(status.value, its condition) of the cluster's one Connection."""
    conn = next(iter(get_json(cluster, "connections")["items"]), {})
    st = conn.get("status") or {}
    return st.get("value"), next((c for c in st.get("conditions") or []), {})


def wrong_public_key_held(lab, figures: dict | None = None) -> None:
    """The PublicKey of b's peer replaced by a wrong key under 5 pings/s from a pod of a to a pod of b: b's gateway pod
    (it runs the GatewayServer) tries the key, a handshake to where a's packets come from, gets none and refuses it
    (its run fails with PeerKeyRejected naming the key) while the live peer carries on: no ping lost, b's Connection
    Connected throughout. The right key back: the pod's next run succeeds and both Connections are Connected."""
    figures = {} if figures is None else figures
    a, b = lab["a"], lab["b"]
    ref = ["publickeies.networking.liqo.io", "from-a", "-n", "default"]
    good = get_json(b, *ref[:2])["spec"]["publicKey"]
    wrong = base64.b64encode(b"\x01" * 32).decode()
    server = active_gateway(b, "server").metadata.name
    src = workload_pods(a)[0].metadata.name
    view = get_json(a, "configurations", "dry-paper")["status"]["remote"]["cidr"]["pod"][0]
    ping = pod_ping_flow(a, src, remapped(workload_pods(b)[0].status.pod_ip, view))
    seen = len(controller_logs_of(b, server, namespace="default"))
    states = []
    t0 = time.monotonic()
    try:
        kubectl(b, "patch", *ref, "--type", "merge", "-p", json.dumps({"spec": {"publicKey": wrong}}))
        try:
            def refused():
                states.append(connection_status(b)[0])
                return [r for r in controller_logs_of(b, server, namespace="default")[seen:]
                        if r.get("msg") == "playbook done" and r.get("result") == "failed"
                        and wrong in (r.get("message") or "") and "completed no handshake" in r["message"]]

            wait_for(refused, timeout=120, interval=1, what="b's gateway pod refusing the wrong key (no handshake)")
            figures["wrong public key applied -> refused by the gateway pod (s)"] = round(time.monotonic() - t0, 1)
            time.sleep(3)
            states.append(connection_status(b)[0])
        finally:
            kubectl(b, "patch", *ref, "--type", "merge", "-p", json.dumps({"spec": {"publicKey": good}}))
        t1 = time.monotonic()
        for c in (a, b):
            wait_for(lambda c=c: connected_connections(c), timeout=120, interval=1,
                     what=f"{c.name}: Connection Connected with the right key back")
        figures["right public key back -> both Connected (s)"] = round(time.monotonic() - t1, 1)
    finally:
        sent, lost = ping.stop()[:2]
    figures["pings lost while a wrong public key was refused"] = f"{len(lost)} of {sent}"
    assert set(states) == {"Connected"}, states
    assert sent >= 10 and not lost, (sent, lost)


def mtu_mismatch_and_back(lab, figures: dict | None = None) -> None:
    """The peer's PublicKey on a declaring MTU 1300 (networking.liqo.io/mtu) against the GatewayClient's 1340:
    a's Connection Error, MTUMismatch, naming both, and still so 12 s later; the annotation gone, Connected."""
    figures = {} if figures is None else figures
    a = lab["a"]
    ref = ["publickeies.networking.liqo.io", "from-b", "-n", "default"]

    t0 = time.monotonic()
    kubectl(a, "annotate", *ref, "networking.liqo.io/mtu=1300")
    try:
        def mismatch_reported():
            value, cond = connection_status(a)
            message = cond.get("message") or ""
            return value == "Error" and cond.get("reason") == "MTUMismatch" and "1300" in message and "1340" in message

        wait_for(mismatch_reported, timeout=120, interval=1, what="a: Connection Error MTUMismatch naming 1340 and 1300")
        figures["MTU mismatch declared -> Connection Error MTUMismatch (s)"] = round(time.monotonic() - t0, 1)
        time.sleep(12)   # longer than the live probe's 10 s status period: the probe leaves the error alone
        assert connection_status(a)[1].get("reason") == "MTUMismatch", connection_status(a)
    finally:
        kubectl(a, "annotate", *ref, "networking.liqo.io/mtu-")
    t1 = time.monotonic()
    wait_for(lambda: connection_status(a)[0] == "Connected", timeout=120, interval=1,
             what="a: Connection Connected with the MTUs equal again")
    figures["MTU equal again -> Connected (s)"] = round(time.monotonic() - t1, 1)


FAULT_TABLE = "lf_test_fault"   # an nft table of the test's own: no reconcile of the fabric owns or repairs it


def tunnel_dropped_and_back(lab, figures: dict | None = None) -> None:
    """The active gateway pods' probe: a's pod exports its peer's liqo_peer_* (connected, latency, byte counters);
    b's server pod drops every packet of the tunnel (nft, a fault the fabric does not repair) -> a's Connection
    Error, PeerUnreachable, and is_connected 0 within 10 s; the drop gone -> Connected within 10 s and pods of a
    reach b's again."""
    figures = {} if figures is None else figures
    a, b = lab["a"], lab["b"]
    client, server = active_gateway(a, "client").metadata.name, active_gateway(b, "server").metadata.name
    id_b = cluster_id(b)

    def conn_a():
        return (get_json(a, "connections")["items"][0].get("status") or {})
    wait_for(lambda: peer_metric(a, client, "liqo_peer_is_connected", id_b) == 1, timeout=30,
             what="a's gateway pod: liqo_peer_is_connected 1")
    assert peer_metric(a, client, "liqo_peer_latency_us", id_b) > 0
    assert peer_metric(a, client, "liqo_peer_receive_bytes_total", id_b) > 0
    assert peer_metric(a, client, "liqo_peer_transmit_bytes_total", id_b) > 0
    iface = kubectl(b, "exec", server, "--", "wg", "show").stdout.split("interface: ")[1].split()[0]
    port = kubectl(b, "exec", server, "--", "wg", "show", iface, "listen-port").stdout.strip()
    assert port.isdigit(), port
    # a fault the fabric does not repair: the server's interface taken down would race with the server pod's
    # own repair (a drift check or resync may bring it up before the client misses 3 probes)
    drop = (f"add table inet {FAULT_TABLE}\n"
            f"add chain inet {FAULT_TABLE} in {{ type filter hook input priority -300; }}\n"
            f"add rule inet {FAULT_TABLE} in udp dport {port} drop\n")
    t0 = time.monotonic()
    kubectl(b, "exec", "-i", server, "--", "nft", "-f", "-", input=drop)
    seen = []   # (s after the fault, a's Connection value), printed if the wait fails

    def error_seen():
        st = conn_a()
        if not seen or seen[-1][1] != st.get("value"):
            seen.append((round(time.monotonic() - t0, 1), st.get("value")))
        return st.get("value") == "Error" and peer_metric(a, client, "liqo_peer_is_connected", id_b) == 0

    try:
        try:
            wait_for(error_seen, timeout=10, interval=0.2, what="a's Connection Error and is_connected 0")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; values seen {seen}\n{health_state(a, client, b, server)}") from None
        figures["in-cluster: remote gateway drops the tunnel -> Connection Error, is_connected 0 (s)"] = round(
            time.monotonic() - t0, 2)
        assert conn_a()["conditions"][0]["reason"] == "PeerUnreachable", conn_a()
    finally:
        t1 = time.monotonic()
        kubectl(b, "exec", server, "--", "nft", "delete", "table", "inet", FAULT_TABLE, check=False)
    assert FAULT_TABLE not in kubectl(b, "exec", server, "--", "nft", "list", "tables").stdout
    wait_for(lambda: conn_a().get("value") == "Connected"
             and peer_metric(a, client, "liqo_peer_is_connected", id_b) == 1, timeout=10, interval=0.2,
             what="a's Connection Connected again")
    figures["in-cluster: the drop gone -> Connection Connected (s)"] = round(time.monotonic() - t1, 2)
    src = workload_pods(a)[0]
    view = get_json(a, "configurations", "dry-paper")["status"]["remote"]["cidr"]["pod"][0]
    targets = [remapped(p.status.pod_ip, view) for p in workload_pods(b)]
    wait_for(lambda: all(r.get("icmp") == "ok" for r in probe_from(a, src.metadata.name, targets).values()),
             timeout=60, interval=2, what="pods reach each other again after the drop was removed")


def health_state(a, client: str, b, server: str) -> str:
    """What a failed health wait prints: a's Connection now, both gateways' pods, tunnels and probe metrics, and
    the active pods' last log lines."""
    out = [f"a's Connection status now: {(get_json(a, 'connections')['items'][0].get('status') or {})}"]
    for cluster, pod in ((a, client), (b, server)):
        listing = kubectl(cluster, "get", "pods", "-l", "networking.liqo.io/component=gateway", "-o", "wide",
                          "--show-labels", check=False).stdout
        metrics = "\n".join(ln for ln in metrics_text(cluster, pod).splitlines() if ln.startswith("liqo_peer"))
        out += [f"{cluster.name} gateway pods:\n{listing}", f"{cluster.name} {pod} liqo_peer_*:\n{metrics}",
                f"{cluster.name} {pod} $ wg show\n" + kubectl(cluster, "exec", pod, "--", "wg", "show", check=False).stdout,
                f"{cluster.name} {pod} $ ip -br link\n"
                + kubectl(cluster, "exec", pod, "--", "ip", "-br", "link", check=False).stdout,
                f"{cluster.name} {pod} log (last 40 lines):\n" + "\n".join(
                    ln[:400] for ln in kubectl(cluster, "logs", pod, "--tail", "40", check=False).stdout.splitlines())]
    return "\n".join(out)


def remapped(ip: str, remapped_cidr: str, pod_cidr: str = "10.243.0.0/16") -> str:
    """The address a pod of the other cluster has here: the remapped CIDR with the host bits kept."""
    offset = int(ipaddress.ip_address(ip)) - int(ipaddress.ip_network(pod_cidr).network_address)
    return str(ipaddress.ip_network(remapped_cidr).network_address + offset)


def probe_from(cluster, pod: str, targets: list) -> dict:
    """From one workload pod to each target: ICMP, ICMP with 1,400 bytes, TCP (the source the server saw, and a
    1,400-byte body). One kubectl exec per source pod."""
    # every target in parallel (one shell job each); busybox nc ends when its stdin does, so the request is
    # followed by 3 s of open stdin for the answer
    get = "{ printf 'GET %s HTTP/1.0\\r\\n\\r\\n'; sleep 3; } | nc -w 5 $t 8080"
    script = "".join(
        f"{{ t={t}; ping -c1 -W3 $t >/dev/null 2>&1 && echo $t icmp ok || echo $t icmp fail; "
        # the first 1,400-byte ping may meet the tunnel's MTU (frag-needed: the sender learns the path MTU)
        "echo $t icmp1400 $(ping -c3 -i 0.2 -W3 -s 1400 $t 2>/dev/null | sed -n 's/.* \\([0-9]*\\) packets received.*/\\1/p'); } & "
        f"{{ t={t}; echo $t peer $({get % '/cgi-bin/peer'} | sed -n 's/^peer=//p' | tr -d '[]' | sed 's/^::ffff://'); }} & "
        f"{{ t={t}; echo $t big $({get % '/big'} | tr -cd x | wc -c); }} & "
        for t in targets) + "wait"
    out = kubectl(cluster, "exec", pod, "--", "sh", "-c", script, timeout=120).stdout
    res: dict = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            res.setdefault(parts[0], {})[parts[1]] = parts[2] if len(parts) > 2 else ""
    return res


def pod_port_routes(cluster) -> dict:
    """{node: pod IP} of the routes in table 18952 that reach a pod over its bridge port (overlay/pod_port.py), each
    with its rule and the pod's permanent neighbour on that port."""
    out = {}
    for n in cluster.nodes:
        routes = netns.run(["ip", "netns", "exec", n.netns, "ip", "route", "show", "table", "18952"], check=False).stdout
        for line in routes.splitlines():
            m = re.match(r"^(\d+\.\d+\.\d+\.\d+) dev (veth\S+) ", line)
            if not m:
                continue
            rules = netns.run(["ip", "netns", "exec", n.netns, "ip", "rule"]).stdout
            neigh = netns.run(["ip", "netns", "exec", n.netns, "ip", "neigh", "show", "dev", m.group(2), "nud", "permanent"]).stdout
            assert f"1640:\tfrom all to {m.group(1)} lookup 18952" in rules and neigh.startswith(m.group(1) + " "), \
                (n.name, line, rules, neigh)
            out[n.name] = m.group(1)
    return out


def overlay_state(cluster) -> str:
    """What a failed wait prints: the overlay on each node and in the gateway pods, the agents' last runs."""
    out = []
    for n in cluster.nodes:
        for cmd in (["ip", "-br", "link"], ["ip", "route", "show", "table", "18952"], ["ip", "rule"]):
            out.append(f"{n.name} $ {' '.join(cmd)}\n" + netns.run(["ip", "netns", "exec", n.netns, *cmd], check=False).stdout)
    for p in cluster.kube.core.list_namespaced_pod("default", label_selector="networking.liqo.io/component=gateway").items:
        for cmd in (["ip", "-br", "addr"], ["ip", "route", "show", "table", "18952"], ["ip", "rule"]):
            out.append(f"pod {p.metadata.name} ({p.status.pod_ip}) $ {' '.join(cmd)}\n"
                       + kubectl(cluster, "exec", p.metadata.name, "--", *cmd, check=False).stdout)
    for p in pods(cluster, "liqo-fabric-node-agent"):
        text = kubectl(cluster, "logs", "-n", "liqo", p.metadata.name, check=False).stdout
        out.append(f"agent {p.metadata.name} on {p.spec.node_name}:\n" + "\n".join(
            line[:400] for line in text.splitlines() if "run" in line or "error" in line.lower())[-3000:])
    return "\n".join(out)


def path_state(cluster, pod_ip: str) -> str:
    """The gateway pods' NAT, neighbours and counters, and the target's node, for a pair that stays broken."""
    out = []
    for p in cluster.kube.core.list_namespaced_pod("default", label_selector="networking.liqo.io/component=gateway").items:
        for cmd in (["nft", "list", "ruleset"], ["ip", "neigh"], ["ip", "-s", "-br", "link"], ["ping", "-c1", "-W2", pod_ip]):
            out.append(f"pod {p.metadata.name} $ {' '.join(cmd)}\n"
                       + kubectl(cluster, "exec", p.metadata.name, "--", *cmd, check=False).stdout)
    for n in cluster.nodes:
        for cmd in (["ip", "neigh"], ["ip", "-s", "-br", "link"], ["nft", "list", "ruleset"]):
            out.append(f"{n.name} $ {' '.join(cmd)}\n" + netns.run(["ip", "netns", "exec", n.netns, *cmd], check=False).stdout[-6000:])
    return "\n".join(out)


def tunnel_state(cluster, ping: str = "") -> str:
    """The short part of a failed wait's dump, printed first: each gateway pod's tunnel (handshake, transfer),
    its links' counters and, given an address, one ping from the pod itself (the tunnel without the overlay)."""
    out = []
    for p in cluster.kube.core.list_namespaced_pod("default", label_selector="networking.liqo.io/component=gateway").items:
        cmds = [["wg", "show"], ["ip", "-s", "-br", "link"]] + ([["ping", "-c1", "-W2", ping]] if ping else [])
        for cmd in cmds:
            res = kubectl(cluster, "exec", p.metadata.name, "--", *cmd, check=False)
            out.append(f"{cluster.name} pod {p.metadata.name} on {p.spec.node_name} $ {' '.join(cmd)}\n"
                       + "\n".join(line for line in (res.stdout + res.stderr).splitlines()
                                   if line.strip() and "public key" not in line))
    return "\n".join(out)


def wait_or_dump(clusters, *args, ping: str = "", **kw):
    try:
        return wait_for(*args, **kw)
    except AssertionError:
        print("\n".join(tunnel_state(c, ping if i == 0 else "") for i, c in enumerate(clusters)))
        print("\n".join(overlay_state(c) for c in clusters))
        raise


def probe_every_pod_pair(lab, figures: dict | None = None, pair: tuple = ("a", "b"),
                         confs: tuple = ("dry-paper", "crimson-field")) -> int:
    """Every workload pod of `pair[0]` to every workload pod of `pair[1]` at its remapped address and back: ICMP,
    1,400-byte ICMP, TCP with a 1,400-byte body, and the server seeing the client's remapped address (host bits
    kept). `confs`: each side's Configuration of the other. Asserted per pair; returns the number of pairs
    checked."""
    figures = {} if figures is None else figures
    a, b = lab[pair[0]], lab[pair[1]]
    for c in (a, b):
        wait_for(lambda c=c: len(workload_pods(c)) == len(c.nodes), timeout=120, what=f"{c.name}: a workload pod per node")
    # what each cluster calls the other's pods (its Configuration's status)
    view = {a.name: get_json(a, "configurations", confs[0])["status"]["remote"]["cidr"]["pod"][0],
            b.name: get_json(b, "configurations", confs[1])["status"]["remote"]["cidr"]["pod"][0]}
    pods_of = {c.name: {p.metadata.name: (p.status.pod_ip, p.spec.node_name) for p in workload_pods(c)} for c in (a, b)}
    assert sorted(where for _ip, where in pods_of[a.name].values()) == sorted(n.name for n in a.nodes)
    t0 = time.monotonic()
    first_src = next(iter(pods_of[a.name]))
    first_dst = remapped(next(iter(pods_of[b.name].values()))[0], view[a.name], b.pod_cidr)
    wait_or_dump((a, b), lambda: probe_from(a, first_src, [first_dst]).get(first_dst, {}).get("icmp") == "ok",
                 timeout=120, interval=2, what="the first pod-to-pod ping across the clusters", ping=first_dst)
    figures["Connected -> first cross-cluster pod ping ok (s)"] = round(time.monotonic() - t0, 1)

    def ok(got, seen_as):
        return (got.get("icmp") == "ok" and int(got.get("icmp1400") or 0) >= 2 and got.get("big") == "1400"
                and got.get("peer") == seen_as)

    checked, retried = 0, 0
    # both clusters use one pod CIDR: a pod may have the address of the other cluster's gateway pod (the case
    # gateway_dataplane's local_rule_priority exists for); counted, as the scheduler decides it
    gw_ips = {c.name: {p.status.pod_ip for p in c.kube.core.list_namespaced_pod(
        "default", label_selector="networking.liqo.io/component=gateway").items} for c in (a, b)}
    figures["pod pairs with an end at the other cluster's gateway pod address"] = sum(
        1 for src, dst in ((a, b), (b, a)) for s_ip, _w in pods_of[src.name].values()
        for d_ip, _w2 in pods_of[dst.name].values() if d_ip in gw_ips[src.name] or s_ip in gw_ips[dst.name])
    for src, dst in ((a, b), (b, a)):
        targets = {remapped(ip, view[src.name], dst.pod_cidr): (name, ip) for name, (ip, _where) in pods_of[dst.name].items()}
        for pod, (ip, node) in pods_of[src.name].items():
            seen_as = remapped(ip, view[dst.name], src.pod_cidr)   # the client as the server's cluster calls it
            res = probe_from(src, pod, sorted(targets))
            # a pair that fails is probed again for up to 30 s (counted): a loaded 2-vCPU machine loses a probe
            # now and then; a broken path stays broken and fails below with the state of both ends
            deadline = time.monotonic() + 30
            while [t for t in targets if not ok(res.get(t, {}), seen_as)] and time.monotonic() < deadline:
                retried += 1
                bad = [t for t in targets if not ok(res.get(t, {}), seen_as)]
                res.update(probe_from(src, pod, bad))
            for t, (name, dst_ip) in targets.items():
                got = res.get(t, {})
                if not ok(got, seen_as):
                    print(f"{src.name} {pod} ({ip}, {node}) -> {t} ({name}, {dst_ip}): {got}\n"
                          + "\n".join(kubectl(c, "get", "pods", "-A", "-o", "wide").stdout for c in (a, b)))
                    print(overlay_state(a), overlay_state(b), path_state(dst, dst_ip), flush=True)
                assert got.get("icmp") == "ok" and int(got.get("icmp1400") or 0) >= 2, (src.name, pod, node, name, t, got)
                assert got.get("peer") == seen_as, (src.name, pod, name, t, got, seen_as)
                assert got.get("big") == "1400", (src.name, pod, name, t, got)
                checked += 1
    figures["pod-pair probes repeated after a failure"] = retried
    figures["pod pairs checked both ways (ICMP, 1,400-byte ICMP and TCP)"] = checked
    return checked


IPERF_PORT = 5411
TRANSIT_SERVER, TRANSIT_CLIENT = "169.254.18.1", "169.254.18.2"   # the GatewayServer's / GatewayClient's tunnel end


def host_pid(cluster, pod: str) -> int:
    """A host PID in the pod's network namespace (the lab's nodes share the host's PID namespace): found by the
    namespace's inode, so the host's own iperf3 runs in the pod's netns through nsenter (no tool in the image).
    The oldest such process: the pod's sandbox lives as long as the pod, while a command the pod runs may be gone
    by the time the PID is used (once PIDs wrap, it can also be the lowest)."""
    inode = kubectl(cluster, "exec", pod, "--", "readlink", "/proc/1/ns/net").stdout.strip()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/ns/net") == inode:
                    with open(f"/proc/{entry}/stat", encoding="ascii") as f:
                        started = int(f.read().rpartition(")")[2].split()[19])  # field 22, starttime
                    found.append((started, int(entry)))
            except (OSError, ValueError):
                continue
    if not found:
        raise AssertionError(f"no host process in {cluster.name}/{pod}'s network namespace {inode}")
    return min(found)[1]


def iperf_paths(lab) -> dict:
    """The two TCP paths (client PID, server PID, address, bind) iperf_run takes: "pod", from a's workload pod to
    b's at its remapped address, both on nodes without the active gateway pod (pod veth, the node agent's overlay
    link, the gateway pods' NAT and WireGuard); "tunnel", the tunnel alone between the two active gateway pods
    (transit addresses)."""
    a, b = lab["a"], lab["b"]
    gw_a, gw_b = active_gateway(a, "client"), active_gateway(b, "server")
    src = next(p for p in workload_pods(a) if p.spec.node_name != gw_a.spec.node_name)
    dst = next(p for p in workload_pods(b) if p.spec.node_name != gw_b.spec.node_name)
    view = get_json(a, "configurations", "dry-paper")["status"]["remote"]["cidr"]["pod"][0]
    return {"pod": (host_pid(a, src.metadata.name), host_pid(b, dst.metadata.name), remapped(dst.status.pod_ip, view), ""),
            "tunnel": (host_pid(a, gw_a.metadata.name), host_pid(b, gw_b.metadata.name), TRANSIT_SERVER, TRANSIT_CLIENT)}


def iperf_run(client_pid: int, server_pid: int, address: str, bind: str = "", seconds: float = 5) -> dict:
    """The receiver's sum (bytes, bits_per_second, ...) of one TCP run from the client's netns to `address` (an
    iperf3 server started in the server's netns for the run, stopped by its PID)."""
    enter = ["nsenter", f"--net=/proc/{server_pid}/ns/net"]
    server = subprocess.Popen(enter + ["iperf3", "-s", "-1", "-p", str(IPERF_PORT)] + (["-B", address] if bind else []),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def listening():
            ss = subprocess.run(enter + ["ss", "-Hltn"], capture_output=True, text=True, check=False)
            return f":{IPERF_PORT} " in ss.stdout
        wait_for(listening, timeout=10, interval=0.1, what="iperf3 server listening")
        argv = ["nsenter", f"--net=/proc/{client_pid}/ns/net", "iperf3", "-c", address, "-p", str(IPERF_PORT),
                "-t", str(seconds), "-J"] + (["-B", bind] if bind else [])
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 30, check=False)
        data = json.loads(proc.stdout or "{}")
        assert proc.returncode == 0 and "error" not in data, (argv, data.get("error"), proc.stderr[-500:])
        return data["end"]["sum_received"]
    finally:
        if server.poll() is None:
            server.terminate()
        server.wait(timeout=10)


def verify_services(lab) -> subprocess.CompletedProcess:
    """liqo.fabric.verify -e services=true from a (local) to b (remote) and back."""
    from tests.e2e.fabric import playbook  # pylint: disable=import-outside-toplevel
    a, b = lab["a"], lab["b"]
    for c in (a, b):
        wait_for(lambda c=c: len(workload_pods(c)) == len(c.nodes), timeout=120, what=f"{c.name}: a workload pod per node")
    return playbook("verify", lab.inventory_path, check=False, kubeconfig=a.kubeconfig, remote_kubeconfig=b.kubeconfig,
                    nodes_group="cluster_a_nodes", remote_nodes_group="cluster_b_nodes", services=True)


def verify_rows(proc) -> tuple:
    """verify's report: its PASS/FAIL rows and its summary lines."""
    lines = [x.strip().strip('",') for x in proc.stdout.splitlines()]
    return [x for x in lines if re.match(r"^(PASS|FAIL)  ", x)], [x for x in lines if re.match(r"^\d+ probes, ", x)]


PROC_PIDS = ("import os,sys\nfor p in os.listdir('/proc'):\n    try:\n"
             "        c=open('/proc/'+p+'/comm').read().strip()\n    except OSError:\n        continue\n"
             "    if p.isdigit() and c==sys.argv[1]: print(p)")


def pod_ping_flow(cluster, pod: str, target: str):
    """5 pings a second from a pod (through its host PID: no kubectl per packet) while something happens."""
    return PingFlow(None, target, enter=["nsenter", "-t", str(host_pid(cluster, pod)), "-n"])


def drift_faults_one_by_one(lab, figures: dict | None = None) -> list[dict]:
    """The five faults, one at a time, under 5 pings/s from a pod of a on a node that is not the gateway's to a pod of
    b, no run by hand: a's gateway pod's NAT table flushed, wireguard-go killed in a's gateway pod (both repaired by
    the gateway pod), the routes of table 18952 flushed, its policy rules deleted and the overlay link deleted on the
    pod's node (repaired by its node agent). Each must be repaired, found by a kernel notification (the drift
    check's trigger in the repairing pod's log), not by the 30 s period; returns a row per fault (found by,
    repaired after, the pods' outage and lost pings)."""
    figures = {} if figures is None else figures
    a, b = lab["a"], lab["b"]
    client = active_gateway(a, "client")
    src = next(p for p in workload_pods(a) if p.spec.node_name != client.spec.node_name)
    node = a.node(src.spec.node_name)
    agent = next(p for p in ready_pods(a, "liqo-fabric-node-agent") if p.spec.node_name == node.name).metadata.name
    view = get_json(a, "configurations", "dry-paper")["status"]["remote"]["cidr"]["pod"][0]
    target = remapped(workload_pods(b)[0].status.pod_ip, view)
    nat = next(t.split()[-1] for t in kubectl(a, "exec", client.metadata.name, "--", "nft", "list", "tables").stdout.splitlines()
               if "lfgw_" in t)

    def on_node(*argv, check=True):
        return netns.run(["ip", "netns", "exec", node.netns, *argv], check=check).stdout

    def in_gateway(*argv):
        return kubectl(a, "exec", client.metadata.name, "--", *argv, check=False).stdout

    def nat_rules():
        out = in_gateway("nft", "list", "table", "ip", nat)
        return out.count(" dnat ") + out.count(" snat ")

    def wg_pids():
        return in_gateway("python3", "-c", PROC_PIDS, "wireguard-go").split()

    def overlay_links():
        return [ln.split()[0].split("@")[0] for ln in on_node("ip", "-br", "link").splitlines() if ln.startswith("lovg")]

    def rules():
        return [ln.split(":")[0] for ln in on_node("ip", "rule").splitlines() if "lookup 18952" in ln]

    routes_before, rules_before, links_before = on_node("ip", "route", "show", "table", "18952"), rules(), overlay_links()
    assert "via" in routes_before and rules_before and links_before and nat_rules() > 0 and wg_pids()
    pids_before = wg_pids()
    faults = [
        ("flush the gateway pod's nft table", client.metadata.name,
         lambda: kubectl(a, "exec", client.metadata.name, "--", "nft", "flush", "table", "ip", nat),
         lambda: nat_rules() > 0),
        ("kill wireguard-go in the gateway pod", client.metadata.name,
         lambda: kubectl(a, "exec", client.metadata.name, "--", "sh", "-c", "kill -9 " + " ".join(pids_before)),
         lambda: bool(wg_pids()) and wg_pids() != pids_before),
        ("flush a node's table 18952", agent, lambda: on_node("ip", "route", "flush", "table", "18952"),
         lambda: on_node("ip", "route", "show", "table", "18952") == routes_before),
        ("delete a node's policy rules", agent,
         lambda: [on_node("ip", "rule", "del", "priority", prio) for prio in rules_before],
         lambda: sorted(rules()) == sorted(rules_before)),
        ("delete a node's overlay link", agent, lambda: on_node("ip", "link", "del", links_before[0]),
         lambda: overlay_links() == links_before),
    ]
    rows = []
    for what, repairer, inject, repaired in faults:
        wait_for(lambda: all(r.get("icmp") == "ok" for r in probe_from(a, src.metadata.name, [target]).values()),
                 timeout=60, interval=1, what=f"pods talk before '{what}'")
        seen = len([r for r in controller_logs_of(a, repairer, namespace="liqo" if repairer == agent else "default")
                    if r.get("msg") == "drift detected"])
        ping = pod_ping_flow(a, src.metadata.name, target)
        try:
            t0 = time.monotonic()
            inject()
            wait_for(repaired, timeout=60, interval=0.2, what=f"'{what}' repaired")
            t_rep = time.monotonic() - t0
            wait_for(lambda: all(r.get("icmp") == "ok" for r in probe_from(a, src.metadata.name, [target]).values()),
                     timeout=60, interval=0.5, what=f"pods talk after '{what}'")
            time.sleep(1.0)
        finally:
            sent, lost = ping.stop()[:2]
        found = [r for r in controller_logs_of(a, repairer, namespace="liqo" if repairer == agent else "default")
                 if r.get("msg") == "drift detected"][seen:]
        rows.append({"fault": what, "found by": found[0].get("trigger") if found else None, "repaired": round(t_rep, 2),
                     "outage": longest_gap(lost), "lost": f"{len(lost)} of {sent}"})
    for c in (a, b):
        wait_for(lambda c=c: connected_connections(c), timeout=90, what=f"{c.name}: Connection Connected again")
    for r in rows:
        figures[f"drift: {r['fault']}: repaired after (s)"] = r["repaired"]
        figures[f"drift: {r['fault']}: pod outage (s)"] = r["outage"]
    return rows


def node_agent_replaced_under_ping(lab, figures: dict | None = None) -> None:
    """The node agent of a node whose pods use the overlay deleted under 15 s of pings from one of them: at most
    one ping lost, the DaemonSet's new pod ready, its first run done and the node's table 18952 as it was."""
    figures = {} if figures is None else figures
    a, b = lab["a"], lab["b"]
    gw_node = active_gateway(a, "client").spec.node_name
    src = next(p for p in workload_pods(a) if p.spec.node_name != gw_node)   # a node whose pods use the overlay
    agent = next(p for p in ready_pods(a, "liqo-fabric-node-agent") if p.spec.node_name == src.spec.node_name)
    view = get_json(a, "configurations", "dry-paper")["status"]["remote"]["cidr"]["pod"][0]
    target = remapped(workload_pods(b)[0].status.pod_ip, view)
    before = netns.run(["ip", "netns", "exec", a.node(src.spec.node_name).netns, "ip", "route", "show", "table", "18952"]).stdout
    # 15 s of pings at 5/s from a pod on that node while its agent is deleted and replaced
    ping = subprocess.Popen([kubectl_binary(), "--kubeconfig", a.kubeconfig, "exec", src.metadata.name, "--",
                             "ping", "-c", "75", "-i", "0.2", "-W", "2", target], stdout=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    kubectl(a, "delete", "pod", "-n", "liqo", agent.metadata.name, "--wait=true", timeout=180)
    new = wait_for(lambda: [p for p in ready_pods(a, "liqo-fabric-node-agent") if p.spec.node_name == src.spec.node_name
                            and p.metadata.name != agent.metadata.name], timeout=90, what="the node agent back")[0]
    figures["node agent pod deleted -> its replacement ready (s)"] = round(time.monotonic() - t0, 1)
    out = ping.communicate(timeout=60)[0]
    sent, got = (int(x) for x in re.search(r"(\d+) packets transmitted, (\d+) packets received", out).groups())
    figures["pings lost while the node agent was replaced"] = f"{sent - got} of {sent}"
    assert sent == 75 and got >= sent - 1, out[-300:]   # (one lost to a loaded machine is not the agent)
    wait_for(lambda: [r for r in controller_logs_of(a, new.metadata.name) if r.get("msg") == "playbook run"],
             timeout=60, what="the new agent's first run")
    after = netns.run(["ip", "netns", "exec", a.node(src.spec.node_name).netns, "ip", "route", "show", "table", "18952"]).stdout
    assert after == before, (before, after)


def late_pod(node: str) -> str:
    """A workload-like pod on `node` (not of the workload Deployment: its anti-affinity keeps it at 3)."""
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "late", "namespace": "default", "labels": {"app": "late"}},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "web", "image": tiny_image(), "imagePullPolicy": "IfNotPresent",
                                 "command": ["sh", "-c", WORKLOAD_CMD]}]}})


def node_added_and_removed(lab, figures: dict | None = None):
    """A node added to a: Ready with its pod CIDR, its node agent ready, a pod on it reached from a pod of a on
    another node (the lab's host-gw routes) and from b at its remapped address, the active gateway pod holding a
    route to its pod CIDR and a link to every node; the node removed: that route gone and a link to every node
    left. Returns the node's plan (tests/lab/cluster.py)."""
    figures = {} if figures is None else figures
    a, b = lab["a"], lab["b"]
    view_b = get_json(b, "configurations", "crimson-field")["status"]["remote"]["cidr"]["pod"][0]
    src = workload_pods(b)[0].metadata.name
    t0 = time.monotonic()
    plan = a.add_node()
    try:
        wait_for(lambda: [p for p in ready_pods(a, "liqo-fabric-node-agent") if p.spec.node_name == plan.name],
                 timeout=120, what=f"a node agent on the new node {plan.name}")
        figures["node added -> its node agent ready (s)"] = round(time.monotonic() - t0, 1)
        node = a.kube.core.read_node(plan.name)
        assert [x.status for x in node.status.conditions if x.type == "Ready"] == ["True"], node.status.conditions
        assert node.spec.pod_cidr == plan.pod_cidr, (node.spec.pod_cidr, plan.pod_cidr)
        kubectl(a, "apply", "-f", "-", input=late_pod(plan.name))
        pod = wait_for(lambda: [p for p in a.kube.core.list_namespaced_pod("default", label_selector="app=late").items
                                if p.status.phase == "Running" and p.status.pod_ip], timeout=120,
                       what="a pod running on the new node")[0]
        assert ipaddress.ip_address(pod.status.pod_ip) in ipaddress.ip_network(plan.pod_cidr)
        neighbour = workload_pods(a)[0].metadata.name
        assert kubectl(a, "exec", neighbour, "--", "ping", "-c", "1", "-W", "2", pod.status.pod_ip,
                       check=False).returncode == 0, f"{neighbour} of a -> the new node's pod {pod.status.pod_ip}"
        target = remapped(pod.status.pod_ip, view_b)
        wait_or_dump((a, b), lambda: probe_from(b, src, [target]).get(target, {}).get("icmp") == "ok",
                     timeout=120, interval=2, what=f"{src} of b -> the new node's pod at {target}", ping=target)
        figures["node added -> a pod on it reached from the other cluster (s)"] = round(time.monotonic() - t0, 1)
        gw = active_gateway(a, "client").metadata.name
        links = kubectl(a, "exec", gw, "--", "ip", "-br", "link").stdout
        routes = kubectl(a, "exec", gw, "--", "ip", "route", "show", "table", "18952").stdout
        assert plan.pod_cidr in routes, routes
        assert len([ln for ln in links.splitlines() if ln.startswith("lovn")]) == len(a.nodes), links
    finally:
        kubectl(a, "delete", "pod", "late", "--grace-period=0", "--wait=false", check=False)
        a.remove_node(plan.name)
    t1 = time.monotonic()
    wait_for(lambda: plan.pod_cidr not in kubectl(a, "exec", gw, "--", "ip", "route", "show", "table", "18952").stdout,
             timeout=90, what=f"the gateway pod's route to the removed node's {plan.pod_cidr} gone")
    figures["node removed -> the gateway pod's route to it gone (s)"] = round(time.monotonic() - t1, 1)
    links = kubectl(a, "exec", gw, "--", "ip", "-br", "link").stdout
    assert len([ln for ln in links.splitlines() if ln.startswith("lovn")]) == len(a.nodes), links
    return plan


def controller_logs_of(cluster, pod: str, namespace: str = "liqo") -> list[dict]:
    out = []
    for line in kubectl(cluster, "logs", "-n", namespace, pod, check=False).stdout.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def gateway_pods(cluster, name: str) -> list:
    return [p for p in cluster.kube.core.list_namespaced_pod(
        "default", label_selector=f"networking.liqo.io/gateway-name={name}").items
        if p.status.phase == "Running" and p.metadata.deletion_timestamp is None]


def timeline(pods: list, since: float) -> str:
    """What `pods` ((cluster, namespace, name)) logged since `since` (epoch s), as '+seconds pod msg fields' lines:
    where a failover's time went."""
    rows = []
    for cluster, namespace, pod in pods:
        for r in controller_logs_of(cluster, pod, namespace):
            try:
                t = datetime.datetime.fromisoformat(r["ts"]).timestamp() - since
            except (KeyError, ValueError):
                continue
            if t >= -1 and r.get("logger") != "ansible" and (r.get("level") != "info" or r.get("msg") in (
                    "playbook run", "playbook done", "leadership acquired", "gateway pod active",
                    "WireGuard session restarted", "tunnel and overlay links dropped", "overlay re-pointed in process",
                    "standby tunnel activated", "taking the Lease of a holder that is going")):
                extra = {k: r[k] for k in ("key", "result", "seconds", "spawn", "slowest", "reasons", "message", "gateway_pod")
                         if r.get(k)}
                rows.append((t, f"{cluster.name}/{pod[-5:]}", r["msg"], json.dumps(extra)[:300]))
    return "\n".join(f"+{t:6.2f} {p} {m} {x}" for t, p, m, x in sorted(rows))


class Pinger:
    """iputils ping every `interval` s, run under an argv prefix that enters a network namespace (a node's:
    `ip netns exec NS`, whose traffic to a remote pod takes the node's overlay as its pods' does; a pod's:
    `nsenter --net=...`), replies timestamped (-D) as they come."""

    def __init__(self, enter: list, target: str, interval: float = 0.05, count: int = 3600):
        self.replies: list = []
        # a count, not a deadline: with -w, ping exits at the first error notification (a "Destination Host
        # Unreachable" while the node's overlay moves to the new pod), which looked like a flow that never recovered;
        # line-buffered: a pipe would hold the replies of seconds in ping's buffer
        self.proc = subprocess.Popen(enter + ["stdbuf", "-oL", "ping", "-D", "-n", "-i", str(interval), "-c", str(count),  # pylint: disable=consider-using-with
                                              target], stdout=subprocess.PIPE, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            m = re.match(r"^\[(\d+\.\d+)\] \d+ bytes from", line)
            if m:
                self.replies.append(float(m.group(1)))

    def replied_since(self, t: float) -> bool:
        return any(r > t for r in self.replies)

    def stop(self) -> float:
        """The longest time without a reply (s)."""
        self.proc.terminate()
        self.proc.wait(10)
        gaps = [b - a for a, b in zip(self.replies, self.replies[1:])]
        return round(max(gaps), 2) if gaps else float("inf")


def failover_to_the_standby(lab, cluster: str, name: str, figures: dict | None = None) -> None:
    """The active pod of gateway `name` of `cluster` deleted under a 50 ms ping from a node of a to a pod of b.
    Before: the warm standby holds wireguard-go and the tunnel's peer, never reached (no handshake; a client's
    peer has no endpoint). After: the standby labelled active, a handshake in it, pings answered again, every node
    agent's link re-pointed in process, a new standby, the Service on the active pod, both Connected."""
    figures = {} if figures is None else figures
    a, b, c = lab["a"], lab["b"], lab[cluster]

    def warm_standby(cl, gw):   # the warm standby: wireguard-go and the tunnel's peer are there
        wait_for(lambda: len(gateway_pods(cl, gw)) == 2, timeout=120, what=f"{cl.name}: two pods of gateway {gw}")
        pod = next(p for p in gateway_pods(cl, gw) if p.metadata.name != active_gateway(cl, gw).metadata.name)

        def tunnel():
            out = kubectl(cl, "exec", pod.metadata.name, "--", "wg", "show", check=False).stdout
            return out if "peer:" in out else None

        return pod, wait_for(tunnel, timeout=90, what=f"{cl.name}: the warm standby's tunnel")

    # both sides settled (the other side's standby too, as the previous failover left it): the failover is
    # measured on its own
    warm_standby(b if c is a else a, "server" if name == "client" else "client")
    standby, shown = warm_standby(c, name)
    old = active_gateway(c, name)
    # ... but it never reached the peer
    assert "latest handshake" not in shown and "transfer" not in shown, shown
    if name == "client":
        assert "endpoint:" not in shown, shown
    # (a process may end between the shell's glob and its read: the exit code is not the point)
    assert "wireguard-go" in kubectl(c, "exec", standby.metadata.name, "--", "sh", "-c",
                                     "cat /proc/[0-9]*/comm 2>/dev/null", check=False).stdout.split()
    view = get_json(a, "configurations", "dry-paper")["status"]["remote"]["cidr"]["pod"][0]
    target = remapped(workload_pods(b)[0].status.pod_ip, view)
    pinger = Pinger(["ip", "netns", "exec", a.nodes[-1].netns], target)
    try:
        wait_for(lambda: len(pinger.replies) >= 20, timeout=60, what=f"pings from {a.nodes[-1].name} to {target}")
        killed = time.time()
        kubectl(c, "delete", "pod", old.metadata.name, "--wait=false")
        new = active_gateway(c, name, timeout=90)   # the deleted pod is not counted (deletionTimestamp)
        figures[f"{name} pod deleted -> standby labelled active (s)"] = round(time.time() - killed, 1)
        assert new.metadata.name == standby.metadata.name, (new.metadata.name, standby.metadata.name)
        # the tunnel moved: the old pod dropped its own when it stopped; wireguard-go in the new active pod
        wait_for(lambda: "latest handshake" in kubectl(c, "exec", new.metadata.name, "--", "wg", "show", check=False).stdout,
                 timeout=90, what=f"{c.name}: a WireGuard handshake in the new active pod of {name}")
        figures[f"{name} pod deleted -> handshake in the new active pod (s)"] = round(time.time() - killed, 1)
        tunnel_up = time.time()
        try:
            wait_for(lambda: pinger.replied_since(tunnel_up), timeout=30, interval=0.2,
                     what=f"pings answered again after the {name} failover")
        except AssertionError:
            fresh = Pinger(["ip", "netns", "exec", a.nodes[-1].netns], target)   # a new ICMP id: a new flow in every conntrack
            time.sleep(5)
            print(f"a fresh ping after the failover got {len(fresh.replies)} replies in 5 s", fresh.stop())
            print(overlay_state(a), path_state(a, target), flush=True)
            for n in a.nodes:
                print(n.name, netns.run(["ip", "netns", "exec", n.netns, "conntrack", "-L"], check=False).stdout[-3000:])
            raise
        time.sleep(2)
    finally:
        outage = pinger.stop()
    figures[f"{name} failover: longest time without a reply (s)"] = outage
    agents = [(c, "liqo", p.metadata.name) for p in ready_pods(c, "liqo-fabric-node-agent")]
    other = b if c is a else a
    peer = active_gateway(other, "server" if name == "client" else "client").metadata.name
    shown = timeline([(c, "default", new.metadata.name), (other, "default", peer)] + agents, killed)
    figures[f"{name} failover timeline (s after the delete)"] = shown
    # every node agent moved its link in process, ahead of its playbook run (controller/node_repoint.py)
    repointed = {re.match(r"^\+\s*[-\d.]+ (\S+) ", line).group(1) for line in shown.splitlines()
                 if "overlay re-pointed in process" in line and new.metadata.name in line}
    assert repointed == {f"{c.name}/{pod[-5:]}" for _c, _ns, pod in agents}, shown
    assert outage < 90, outage
    # the Deployment's new pod is the standby
    wait_for(lambda: len(gateway_pods(c, name)) == 2, timeout=120, what=f"{c.name}: the replacement standby")
    assert active_gateway(c, name).metadata.name == new.metadata.name
    if name == "server":   # the Service sends the WireGuard port to the active pod only
        eps = get_json(c, "endpoints", "gw-server")
        assert [x["ip"] for s in eps["subsets"] for x in s.get("addresses", [])] == [new.status.pod_ip], eps
    for x in (a, b):
        wait_for(lambda x=x: connected_connections(x), timeout=90, what=f"{x.name}: Connection Connected after the failover")
    # the new active pod's node reaches it over its bridge port; no node keeps the old pod's route
    wait_for(lambda: pod_port_routes(c) == {new.spec.node_name: new.status.pod_ip}, timeout=30,
             what=f"{c.name}: the node of {new.metadata.name} routing {new.status.pod_ip} over its port")


# Run in a fabric pod: the RSS of every process in its container (pages shared between processes counted once per
# process), the container's working set as the kubelet counts it (its cgroup's usage less inactive file pages,
# cgroup v2 or v1: each page once, -1 when unreadable) and the number of warm-runner zygote processes.
POD_MEMORY = ("import glob\nt=0\nfor f in glob.glob('/proc/[0-9]*/status'):\n"
              "    try:\n        t+=int([l for l in open(f) if l.startswith('VmRSS')][0].split()[1])\n"
              "    except Exception:\n        pass\nw=-1\ntry:\n"
              "    cur=int(open('/sys/fs/cgroup/memory.current').read())\n"
              "    st=dict(l.split() for l in open('/sys/fs/cgroup/memory.stat'))\n"
              "    w=(cur-int(st.get('inactive_file',0)))//1024\nexcept Exception:\n    pass\n"
              # cgroup v1 (the lab's containerd): the same measure as cAdvisor's, usage less total_inactive_file
              "if w<0:\n    try:\n"
              "        cur=int(open('/sys/fs/cgroup/memory/memory.usage_in_bytes').read())\n"
              "        st=dict(l.split() for l in open('/sys/fs/cgroup/memory/memory.stat'))\n"
              "        w=(cur-int(st.get('total_inactive_file',0)))//1024\n    except Exception:\n        pass\n"
              # the warm runner's zygote (and runs forked from it: same command line)
              "import os\nz=0\nfor f in glob.glob('/proc/[0-9]*/cmdline'):\n    try:\n"   # not this process: its code names it
              "        z+=f!='/proc/%d/cmdline'%os.getpid() and b'speed/warm.py' in open(f,'rb').read()\n"
              "    except Exception:\n        pass\nprint(t, w, z)")


def pod_memory(cluster, pod: str, namespace: str) -> tuple:
    """(RSS of every process in KiB, working set in KiB or -1, warm-runner zygote processes) of a fabric pod."""
    rss, working, zygotes = (int(x) for x in kubectl(cluster, "exec", "-n", namespace, pod, "--", "python3", "-c",
                                                     POD_MEMORY).stdout.split())
    return rss, working, zygotes


def acting_controller(cluster) -> str:
    """The controller pod holding the Lease (its identity: <pod name>-<pid>)."""
    lease = get_json(cluster, "lease", "-n", "liqo", "liqo-fabric-controller")["spec"]["holderIdentity"]
    return next(p.metadata.name for p in ready_pods(cluster, "liqo-fabric-controller") if lease.startswith(p.metadata.name))


def load_balancer_switch(lab, figures: dict | None = None) -> None:
    """b's GatewayServer switched to `serviceType: LoadBalancer` behind the lab's load balancer: its status
    endpoint the load balancer's address and the Service port, the client given that endpoint reaching the server
    through it (its WireGuard endpoint), a pod of a reaching one of b, both Connected, no error of the load
    balancer. Back to NodePort at the end, the address taken back."""
    figures = {} if figures is None else figures
    a, b = lab["a"], lab["b"]
    hosts = list(ipaddress.ip_network(lab.wan.cidr).hosts())
    lb = LabLoadBalancer(b, [str(h) for h in hosts[-4:]])   # the WAN's top addresses: no lab node has them
    lb.start()
    switched = time.monotonic()
    try:
        kubectl(b, "patch", "gatewayserver", "server", "--type", "merge", "-p",
                json.dumps({"spec": {"endpoint": {"serviceType": "LoadBalancer"}}}))

        def lb_endpoint():
            ep = (get_json(b, "gatewayserver", "server").get("status") or {}).get("endpoint") or {}
            return ep if ep.get("addresses") == [lb.assigned.get("default/gw-server")] else None

        try:
            endpoint = wait_for(lb_endpoint, timeout=180, what="the GatewayServer's endpoint at the load balancer")
        except AssertionError:
            svc = get_json(b, "service", "gw-server")
            print("lab load balancer:", lb.assigned, lb.errors, "\nService:", json.dumps(svc.get("spec")),
                  json.dumps(svc.get("status")), "\nGatewayServer:", json.dumps(get_json(b, "gatewayserver", "server")),
                  flush=True)
            raise
        svc = get_json(b, "service", "gw-server")
        assert svc["spec"]["type"] == "LoadBalancer" and endpoint["port"] == svc["spec"]["ports"][0]["port"], (svc, endpoint)
        figures["serviceType LoadBalancer -> the server's endpoint at the load balancer (s)"] = round(
            time.monotonic() - switched, 1)
        out = kubectl(b, "get", "gatewayservers.networking.liqo.io", "-A").stdout
        assert f"{endpoint['addresses'][0]}   {endpoint['port']}" in out, out
        kubectl(a, "patch", "gatewayclient", "client", "--type", "merge", "-p", json.dumps(
            {"spec": {"endpoint": {"addresses": endpoint["addresses"], "port": endpoint["port"]}}}))
        wait_for(lambda: f"endpoint: {endpoint['addresses'][0]}:{endpoint['port']}" in kubectl(
            a, "exec", active_gateway(a, "client").metadata.name, "--", "wg", "show", check=False).stdout,
            timeout=90, what="the client's WireGuard endpoint at the load balancer")
        # a workload pod of a reaches one of b through the tunnel, whose outer packets go to that address only
        view = get_json(a, "configurations", "dry-paper")["status"]["remote"]["cidr"]["pod"][0]
        src = workload_pods(a)[0].metadata.name
        dst = remapped(workload_pods(b)[0].status.pod_ip, view)
        wait_for(lambda: probe_from(a, src, [dst]).get(dst, {}).get("icmp") == "ok", timeout=90, interval=2,
                 what="a pod of a reaching a pod of b through the load balancer")
        shown = kubectl(a, "exec", active_gateway(a, "client").metadata.name, "--", "wg", "show", check=False).stdout
        assert f"endpoint: {endpoint['addresses'][0]}:{endpoint['port']}" in shown, shown   # not roamed elsewhere
        for c in (a, b):
            wait_for(lambda c=c: connection_status(c)[0] == "Connected", timeout=60,
                     what=f"{c.name}: Connection Connected through the load balancer")
        figures["serviceType LoadBalancer -> pod traffic through it (s)"] = round(time.monotonic() - switched, 1)
        assert not lb.errors, lb.errors
    finally:
        kubectl(b, "patch", "gatewayserver", "server", "--type", "merge", "-p",
                json.dumps({"spec": {"endpoint": {"serviceType": "NodePort"}}}), check=False)
        wait_for(lambda: get_json(b, "service", "gw-server")["spec"]["type"] == "NodePort", timeout=60,
                 what="the Service back to NodePort")
        lb.stop()
    wan0 = netns.run(["ip", "-n", lb.speaker.netns, "-br", "addr", "show", "wan0"]).stdout
    assert not lb.assigned and "/32" not in wan0, wan0


# ------------------------------------------------------------------------------------------- spec.mtu auto in-cluster

MTU_PORT = 7100


def _in_netns(pid: int) -> list:
    return ["nsenter", f"--net=/proc/{pid}/ns/net"]


def pod_transfer(client_pid: int, server_pid: int, address: str, stall: float = 8) -> tuple:
    """(outcome, bytes sent, bytes received back) of ~10 MB from the client's netns to `address` in 1,400-byte writes
    and as many back (tests/e2e/test_path_mtu.py's sink and source, run by the host's Python in the pods' netns);
    outcome done, or stalled (no progress for `stall` seconds)."""
    from tests.e2e.test_path_mtu import SINK, SOURCE, TOTAL  # pylint: disable=import-outside-toplevel
    sink = subprocess.Popen(_in_netns(server_pid) + [sys.executable, "-c", SINK, str(MTU_PORT), str(stall)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert sink.stdout.readline().strip() == "ready", sink.stderr.read()
        proc = subprocess.run(_in_netns(client_pid) + [sys.executable, "-c", SOURCE, address, str(MTU_PORT), str(TOTAL),
                                                       str(stall)], capture_output=True, text=True, timeout=300, check=False)
    finally:
        sink.terminate()
        sink.wait(timeout=10)
    words = proc.stdout.split()
    assert words and words[0] in ("done", "stalled"), proc.stdout + proc.stderr
    return words[0], int(words[1]), int(words[2])


def _link_mtus(pid: int, prefix: str) -> list:
    """The MTUs of the links named `prefix`* in the netns of `pid`."""
    out = subprocess.run(_in_netns(pid) + ["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    return [int(line.split(" mtu ")[1].split()[0]) for line in out.splitlines()
            if line.split(":")[1].strip().split("@")[0].startswith(prefix)]


def overlay_mtus(cluster, gateway_pid: int) -> set:
    """The MTUs of the overlay: every node's link to the gateway pod and the pod's links to the nodes."""
    mtus = set(_link_mtus(gateway_pid, "lovn"))
    for n in cluster.nodes:
        out = netns.run(["ip", "netns", "exec", n.netns, "ip", "-o", "link", "show"]).stdout
        mtus |= {int(line.split(" mtu ")[1].split()[0]) for line in out.splitlines() if ": lovg" in line}
    return mtus


def _gateways(lab) -> list:
    return [(lab["a"], "gatewayclient", "client"), (lab["b"], "gatewayserver", "server")]


def _status_mtu(cluster, kind: str, name: str) -> dict:
    return (get_json(cluster, kind, name).get("status") or {}).get("mtu") or {}


def path_mtu_state(cluster) -> str:
    """What a failed wait of the path MTU scenario prints: each gateway pod's links with their MTU, the route to the
    peer's endpoint (a "fragmentation needed" recorded) and what its path watch logged."""
    out = []
    for p in cluster.kube.core.list_namespaced_pod("default", label_selector="networking.liqo.io/component=gateway").items:
        name = p.metadata.name
        for cmd in (["ip", "-o", "link"], ["sh", "-c", "ip route get $(wg show all endpoints | awk '{print $3}' | cut -d: -f1 | head -1)"]):
            res = kubectl(cluster, "exec", name, "--", *cmd, check=False)
            out.append(f"{cluster.name} pod {name} $ {' '.join(cmd)}\n{res.stdout}{res.stderr}")
        out += [f"{cluster.name} pod {name}: {json.dumps(r)}" for r in controller_logs_of(cluster, name, "default")
                if "MTU" in str(r.get("msg")) or "probe" in str(r.get("msg"))][-20:]
    return "\n".join(out)


def _wait_tunnels(lab, pids: dict, mtu: int, what: str, timeout: float = 60) -> None:
    """Both active gateway pods' tunnel at `mtu` (read outside a probe: twice, 0.3 s apart), status.mtu of both
    gateways and their Connections too, every overlay link of both clusters at `mtu`."""
    for c, kind, name in _gateways(lab):
        pid = pids[c.name]
        try:
            wait_for(lambda pid=pid: _link_mtus(pid, "lwg") == [mtu] and not time.sleep(0.3)
                     and _link_mtus(pid, "lwg") == [mtu], timeout=timeout, what=f"{c.name}: the tunnel at {mtu} ({what})")
        except AssertionError:
            print(path_mtu_state(lab["a"]), path_mtu_state(lab["b"]), sep="\n", flush=True)
            raise
        wait_for(lambda c=c, kind=kind, name=name: _status_mtu(c, kind, name).get("value") == mtu, timeout=30,
                 what=f"{c.name}: {kind} status.mtu {mtu}")
        assert _status_mtu(c, kind, name)["source"] == "probed", _status_mtu(c, kind, name)
        wait_for(lambda c=c: ((next(iter(get_json(c, "connections")["items"]), {}).get("status") or {}).get("mtu") or {})
                 == {"value": mtu, "source": "probed"}, timeout=30, what=f"{c.name}: the Connection's status.mtu {mtu}")
        wait_or_dump([c], lambda c=c, pid=pid: overlay_mtus(c, pid) == {mtu}, timeout=30,
                     what=f"{c.name}: every overlay link at {mtu} ({what})")


def path_mtu_auto(lab, figures: dict | None = None) -> None:
    """spec.mtu auto on both gateways, the lab's routed WAN at 1380 bytes: with the router's ICMP "fragmentation
    needed", then as a black hole, both Connected, the tunnels and every overlay link at 1312 (status.mtu probed),
    10 MB in 1,400-byte writes each way between pods on nodes without the active gateway pods. The path lowered to a
    1300-byte black hole during a transfer: the tunnels and the overlay links follow (1232), the transfer completes;
    the path back to 1500: both grow to 1440, one change each way (status.mtu read all along). spec.mtu 1340 and the
    plain path back at the end."""
    figures = {} if figures is None else figures
    a, b = lab["a"], lab["b"]
    gw = {"a": active_gateway(a, "client"), "b": active_gateway(b, "server")}
    pids = {c: host_pid(lab[c], gw[c].metadata.name) for c in ("a", "b")}
    paths = iperf_paths(lab)["pod"]
    a_pid, b_pid, b_addr = paths[0], paths[1], paths[2]
    view_b = get_json(b, "configurations", "crimson-field")["status"]["remote"]["cidr"]["pod"][0]
    src_a = next(p for p in workload_pods(a) if host_pid(a, p.metadata.name) == a_pid)
    a_addr = remapped(src_a.status.pod_ip, view_b)

    def both_ways(stall=8):
        return pod_transfer(a_pid, b_pid, b_addr, stall), pod_transfer(b_pid, a_pid, a_addr, stall)

    def flush_route_caches():   # a "fragmentation needed" the router sent lives 10 minutes in a route cache
        for pid in pids.values():
            subprocess.run(_in_netns(pid) + ["ip", "route", "flush", "cache"], check=True)
        for c in (a, b):
            for n in c.gateway_nodes:
                netns.run(["ip", "netns", "exec", n.netns, "ip", "route", "flush", "cache"])

    done = ("done", 1400 * 7490, 1400 * 7490)
    rec = None
    lab.wan.set_path(1380, icmp=True)
    try:
        t0 = time.monotonic()
        for c, kind, name in _gateways(lab):
            kubectl(c, "patch", kind, name, "--type", "merge", "-p", json.dumps({"spec": {"mtu": "auto"}}))
        _wait_tunnels(lab, pids, 1312, "spec.mtu auto, a 1380-byte path")
        figures["spec.mtu auto -> both tunnels and overlays at the probed MTU (s)"] = round(time.monotonic() - t0, 1)
        for c in (a, b):
            assert connection_status(c)[0] == "Connected", connection_status(c)
            remote = cluster_id(b if c is a else a)
            wait_for(lambda c=c, remote=remote: peer_metric(c, gw[c.name].metadata.name, "liqo_fabric_tunnel_mtu",
                                                            remote) == 1312, timeout=30,
                     what=f"{c.name}: liqo_fabric_tunnel_mtu 1312 on the gateway pod's /metrics")
        assert both_ways() == (done, done)

        lab.wan.set_path(1380, icmp=False)          # the same path as a black hole
        flush_route_caches()
        assert both_ways() == (done, done)

        # the tunnel MTUs both gateways publish (what the path watch, or a run's probe, set; the overlay follows it)
        rec = ChangeRecorder(("a", "b"), lambda n: _status_mtu(*next(g for g in _gateways(lab) if g[0].name == n)).get("value"),
                             period=0.5)
        result = {}
        worker = threading.Thread(target=lambda: result.update(out=pod_transfer(a_pid, b_pid, b_addr, stall=60)))
        worker.start()
        time.sleep(0.5)
        t1 = time.monotonic()
        lab.wan.set_path(1300, icmp=False)          # lowered while a transfer runs
        _wait_tunnels(lab, pids, 1232, "a 1300-byte black hole")
        figures["path lowered to 1300 (black hole) -> tunnels and overlays at 1232 (s)"] = round(time.monotonic() - t1, 1)
        worker.join(timeout=300)
        assert result.get("out") == done, result

        t2 = time.monotonic()
        lab.wan.set_path(1500, icmp=False)
        _wait_tunnels(lab, pids, 1440, "the path back at 1500", timeout=120)
        figures["path back to 1500 -> tunnels and overlays at 1440 (s)"] = round(time.monotonic() - t2, 1)
        time.sleep(12)                              # one more period of the watch: no flapping after the raise
        seen = rec.stop()
        assert seen == {"a": [1312, 1232, 1440], "b": [1312, 1232, 1440]}, seen   # one change each way
        assert both_ways() == (done, done)
    finally:
        if rec:
            rec.stop()
        lab.wan.set_path(1500, icmp=True)
        flush_route_caches()
        for c, kind, name in _gateways(lab):
            kubectl(c, "patch", kind, name, "--type", "merge", "-p", json.dumps({"spec": {"mtu": 1340}}), check=False)
    for c, kind, name in _gateways(lab):
        wait_for(lambda c=c, kind=kind, name=name: (_status_mtu(c, kind, name).get("value"),
                                                    _status_mtu(c, kind, name).get("source")) == (1340, "configured"),
                 timeout=120, what=f"{c.name}: status.mtu back at the configured 1340")
        wait_for(lambda c=c: _link_mtus(pids[c.name], "lwg") == [1340] and overlay_mtus(c, pids[c.name]) == {1340},
                 timeout=60, what=f"{c.name}: the tunnel and the overlay back at 1340")
        wait_for(lambda c=c: connection_status(c)[0] == "Connected", timeout=60, what=f"{c.name}: Connected at 1340")
