"""A node agent re-points its overlay link in process when the active gateway pod changes (the gateway pods' failover).

The real engine in node mode (`python -m controller --mode node`, the in-cluster watch map) runs in a light lab
node's netns, reaching the lab's apiserver as a real node does (api_forward); the gateway's pods are API objects
with a running status (no kubelet here: test_in_cluster.py runs the same with real pods). The node's link must
follow the active pod within the in-process apply, ahead of the playbook run the same event starts, and the
run after it must find nothing to change. (tests/benchmarks/bench_node_repoint.py times both on a lab of its own.)
"""
from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT
from tests.e2e.api_forward import ApiIntoNetns
from tests.e2e.fabric import apply_yaml, kubectl, wait_for
from tests.lab import netns

pytestmark = pytest.mark.root

ACTIVE = "networking.liqo.io/active"
REMOTE_ID = "0c4e2d7a-5f1b-4e0b-9a53-2f7c1d9e8b61"
REMOTE_CIDR = "10.71.0.0/16"
OBJECTS = f"""
apiVersion: networking.liqo.io/v1beta1
kind: GatewayServer
metadata:
  name: repoint
  namespace: default
  labels: {{liqo.io/remote-cluster-id: {REMOTE_ID}}}
spec:
  endpoint: {{port: 51820, serviceType: NodePort}}
  mtu: 1340
  serverTemplateRef: {{apiVersion: networking.liqo.io/v1beta1, kind: WgGatewayServerTemplate, name: wireguard-server,
                      namespace: liqo}}
---
apiVersion: networking.liqo.io/v1beta1
kind: Configuration
metadata:
  name: repoint-peer
  namespace: default
  labels: {{liqo.io/remote-cluster-id: {REMOTE_ID}}}
spec:
  remote:
    cidr: {{pod: [10.243.0.0/16]}}
"""
POD = """
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
  labels: {{networking.liqo.io/component: gateway, networking.liqo.io/gateway-name: repoint}}
spec:
  nodeName: {node}
  containers: [{{name: gateway, image: docker.io/liqo-fabric/fabric:0.1.0}}]
"""


def put_status(cluster, kind: str, name: str, status: dict) -> None:
    """Writes `status` (what a kubelet or the IPAM would) through the status subresource."""
    plural = {"Pod": "pods", "Configuration": "configurations.networking.liqo.io"}[kind]
    obj = json.loads(kubectl(cluster, "get", plural, name, "-n", "default", "-o", "json"))
    obj["status"] = status
    path = {"Pod": f"/api/v1/namespaces/default/pods/{name}/status",
            "Configuration": f"/apis/networking.liqo.io/v1beta1/namespaces/default/configurations/{name}/status"}[kind]
    kubectl(cluster, "replace", "--raw", path, "-f", "-", input=json.dumps(obj))


def link_remote(ns: str) -> str | None:
    """The remote of the node's overlay link (lovg*), None without one."""
    for link in json.loads(netns.run(["ip", "-n", ns, "-j", "-d", "link", "show"]).stdout or "[]"):
        if link["ifname"].startswith("lovg"):
            data = (link.get("linkinfo") or {}).get("info_data") or {}
            return data.get("remote") or "(fdb)"
    return None


def fdb_remote(ns: str) -> str | None:
    """The VXLAN default destination: the remote in the link or, for a link without one, its all-zeros fdb entry."""
    remote = link_remote(ns)
    if remote != "(fdb)":
        return remote
    out = netns.run(["bridge", "-n", ns, "fdb", "show"]).stdout
    m = re.search(r"00:00:00:00:00:00 dev lovg\S* dst (\S+)", out)
    return m.group(1) if m else None


def log_records(path: str) -> list:
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


@contextlib.contextmanager
def node_agent(cluster, node, tmp_path, log_path: str):
    """The engine in node mode (the DaemonSet's process) for `node`, in its netns, reaching the lab's apiserver
    there; JSON log lines to log_path. Yields the process; stops it by its process group."""
    env = dict(os.environ, PYTHONPATH=ROOT, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
               HOME=str(tmp_path), KUBECONFIG=cluster.kubeconfig)   # in a pod: its ServiceAccount
    argv = [sys.executable, "-m", "controller", "--mode", "node", "--node-name", node.name,
            "--watches", "controller/watches-in-cluster.yaml", "--cluster", f"{cluster.name}={cluster.kubeconfig}",
            "--metrics-address", "127.0.0.1", "--metrics-port", "0", "--runtime-dir", str(tmp_path / "rt"),
            "--workers", "1", "--debounce", "0.1"]
    with ApiIntoNetns(node.netns, cluster.kubeconfig), open(log_path, "ab") as log:
        agent = netns.popen_in(node.netns, argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            yield agent
        finally:
            os.killpg(agent.pid, signal.SIGTERM)
            agent.wait(30)


def gateway_pods_on(cluster, node) -> dict:
    """The gateway `repoint` (its peer's Configuration remapped) and its two pods on `node`, Running: gw-old, the
    oldest, so the active one, and gw-new. Their pod IPs by name."""
    apply_yaml(cluster, OBJECTS)
    put_status(cluster, "Configuration", "repoint-peer", {"remote": {"cidr": {"pod": [REMOTE_CIDR]}}})
    ips = {}
    for i, name in enumerate(("gw-old", "gw-new")):
        apply_yaml(cluster, POD.format(name=name, node=node.name))
        ips[name] = f"10.99.0.{10 + i}"
        put_status(cluster, "Pod", name, {"phase": "Running", "podIP": ips[name], "podIPs": [{"ip": ips[name]}]})
        time.sleep(1.1)   # creationTimestamp has 1 s resolution: gw-old is the oldest, so the active one
    return ips


def agent_settled(node, ips: dict, log_path: str) -> None:
    """The node agent's link on the active gw-old, its first playbook run done, its queue idle."""
    wait_for(lambda: fdb_remote(node.netns) == ips["gw-old"], timeout=90, interval=0.2,
             what="the node's overlay link to the oldest gateway pod")
    wait_for(lambda: any(r.get("msg") == "playbook done" for r in log_records(log_path)), timeout=60,
             what="the node agent's first playbook run")
    time.sleep(1)   # the queue is idle


def move_the_active_label(cluster, node, ips: dict, log_path: str) -> dict:
    """gw-new labelled active: until the node's link is on it and the label's event's playbook run is done.
    Returns when each came after the label (s) and the agent's log records of both."""
    moved = time.time()
    kubectl(cluster, "label", "pod", "gw-new", f"{ACTIVE}=true")
    wait_for(lambda: fdb_remote(node.netns) == ips["gw-new"], timeout=60, interval=0.02,
             what="the link re-pointed to the pod labelled active")
    repointed = time.time() - moved
    done = wait_for(lambda: [r for r in log_records(log_path) if r.get("msg") == "playbook done"
                             and r.get("ts", "") >= time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(moved))],
                    timeout=60, what="the playbook run of the label's event")
    inproc = [r for r in log_records(log_path) if r.get("msg") == "overlay re-pointed in process"]
    return {"repointed": repointed, "ran": datetime.datetime.fromisoformat(done[-1]["ts"]).timestamp() - moved,
            "inproc": inproc, "done": done[-1]}


def remove_gateway_pods(cluster, node) -> None:
    """The pods and objects of gateway_pods_on() deleted, the node's overlay taken away."""
    kubectl(cluster, "delete", "pod", "gw-old", "gw-new", "--grace-period=0", "--force", check=False)
    kubectl(cluster, "delete", "-f", "-", input=OBJECTS)
    netns.exec_in(node.netns, [sys.executable, "-c",
                               "import sys; sys.path.insert(0, sys.argv[1]);"
                               "from ansible_collections.liqo.fabric.plugins.module_utils.overlay import dataplane as o;"
                               "o.sync_overlay_dataplane(None, state='absent')",
                               os.path.join(ROOT, "build", "collections")])


def test_node_agent_repoints_in_process(lab1, tmp_path):
    cluster = lab1["a"]
    node = cluster.nodes[0]
    ips = gateway_pods_on(cluster, node)
    log_path = str(tmp_path / "agent.log")
    with node_agent(cluster, node, tmp_path, log_path):
        agent_settled(node, ips, log_path)
        moved = move_the_active_label(cluster, node, ips, log_path)
        inproc = moved["inproc"]
        assert inproc and inproc[-1]["gateway_pod"] == "gw-new" and inproc[-1]["pod_ip"] == ips["gw-new"], inproc
        assert moved["done"]["result"] == "ok" and moved["done"]["changed"] == 0, moved["done"]

        # the active pod being deleted (no kubelet confirms it: it stays with its deletionTimestamp)
        kubectl(cluster, "delete", "pod", "gw-new", "--wait=false")
        # (here a playbook run the label started may be the one that moves it: it plans after the delete too)
        wait_for(lambda: fdb_remote(node.netns) == ips["gw-old"], timeout=60, interval=0.05,
                 what="the link back on the remaining pod")
    errors = [r for r in log_records(log_path) if r.get("level") in ("warning", "error")]
    assert not errors, errors
    remove_gateway_pods(cluster, node)
    assert link_remote(node.netns) is None
