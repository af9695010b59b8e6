"""Real-node lab clusters (kubelet, containerd, CNI, kube-proxy, scheduler, controller
manager) run real pods. Two clusters a and b, both pod CIDR 10.243.0.0/16, 3 nodes each: the lab test_in_cluster
used before this module (tests/e2e/real_nodes.py); test_zero_residue_after_down takes it down and checks that
nothing is left; then a SIGKILLed lab is removed the way `make lab-clean` removes it."""
from __future__ import annotations

import json
import os
import subprocess

import pytest
import yaml

from tests.e2e.fabric import wait_for
from tests.e2e.real_nodes import assert_no_residue, kubectl, residue
from tests.lab import cleanup, netns
from tests.lab.images import fabric_image, tiny_image


def workloads() -> list[dict]:
    tiny = tiny_image()
    web_cmd = "echo hello from $(hostname) > /www/index.html; echo serving on 8080; exec httpd -f -p 8080 -h /www"
    return [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
         "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                  "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                      "terminationGracePeriodSeconds": 1,
                      # one replica per node, so that some node has none ("from another node")
                      "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                          {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}},
                      "containers": [{"name": "web", "image": tiny, "imagePullPolicy": "Never",
                                      "command": ["sh", "-c", web_cmd]}]}}}},
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "probe"},
         "spec": {"selector": {"matchLabels": {"app": "probe"}},
                  "template": {"metadata": {"labels": {"app": "probe"}}, "spec": {
                      "terminationGracePeriodSeconds": 1,
                      "containers": [{"name": "probe", "image": tiny, "imagePullPolicy": "Never"}]}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
         "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web-np"},
         "spec": {"type": "NodePort", "selector": {"app": "web"},
                  "ports": [{"port": 80, "targetPort": 8080, "nodePort": 30080}]}},
    ]


def running_pods(cluster, app: str) -> list:
    pods = cluster.kube.core.list_namespaced_pod("default", label_selector=f"app={app}").items
    return [p for p in pods if p.status.phase == "Running" and p.metadata.deletion_timestamp is None
            and all(cs.ready for cs in (p.status.container_statuses or [{}]))]


def http_get_from(cluster, pod, address: str, port: int) -> str:
    """An HTTP GET with busybox nc from inside a pod (busybox-static's wget cannot resolve even an IP)."""
    return kubectl(cluster, "exec", pod.metadata.name, "--", "sh", "-c",
                   f'printf "GET / HTTP/1.0\\r\\n\\r\\n" | nc -w 3 {address} {port}', check=False).stdout


@pytest.fixture(scope="module")
def real_lab(real_node_lab, request):
    """The shared real-node lab (after test_in_cluster, whose last test removed the fabric) with this module's
    workloads."""
    lab = real_node_lab.get()
    manifest = yaml.safe_dump_all(workloads())
    for c in lab.clusters.values():
        kubectl(c, "apply", "-f", "-", input=manifest)
    for c in lab.clusters.values():
        wait_for(lambda c=c: len(running_pods(c, "web")) == 2 and len(running_pods(c, "probe")) == len(c.nodes),
                 timeout=90, what=f"{c.name}: 2 web pods and a probe pod per node Running")
        wait_for(lambda c=c: c.kube.core.read_namespaced_endpoints(
            "web", "default").subsets, timeout=30, what=f"{c.name}: web endpoints")
    yield lab
    real_node_lab.release(request)


def test_nodes_registered_by_their_kubelets_and_ready(real_lab):
    for c in real_lab.clusters.values():
        nodes = {n.metadata.name: n for n in c.kube.core.list_node().items}
        assert sorted(nodes) == sorted(p.name for p in c.nodes)
        for plan in c.nodes:
            node = nodes[plan.name]
            assert node.status.node_info.kubelet_version == "v1.20.2"
            assert node.status.node_info.container_runtime_version.startswith("containerd://1.6.")
            assert [a.address for a in node.status.addresses if a.type == "InternalIP"] == [plan.underlay_ip]
            assert [x.status for x in node.status.conditions if x.type == "Ready"] == ["True"]
            assert node.spec.pod_cidr == plan.pod_cidr
        out = kubectl(c, "get", "nodes", "-o", "wide").stdout
        assert out.count(" Ready ") == 3 and out.count("containerd://1.6.") == 3, out
    # the gateway node carries the gateway label from its kubelet
    a = real_lab["a"]
    labelled = a.kube.core.list_node(label_selector="liqo.io/gateway-host=true").items
    assert [n.metadata.name for n in labelled] == [n.name for n in a.gateway_nodes]


def test_deployment_and_daemonset_run_on_both_clusters_with_the_same_pod_cidr(real_lab):
    for c in real_lab.clusters.values():
        web = running_pods(c, "web")
        assert len(web) == 2 and len({p.spec.node_name for p in web}) == 2
        probes = running_pods(c, "probe")
        assert sorted(p.spec.node_name for p in probes) == sorted(n.name for n in c.nodes)
        for pod in web + probes:  # addressed from the node's slice of 10.243.0.0/16 by host-local
            plan = c.node(pod.spec.node_name)
            prefix = plan.pod_cidr.rsplit(".", 2)[0] + "."
            assert pod.status.pod_ip.startswith(prefix), (pod.status.pod_ip, plan.pod_cidr)
            assert pod.status.host_ip == plan.underlay_ip


def test_pods_on_different_nodes_reach_each_other(real_lab):
    c = real_lab["a"]
    web = running_pods(c, "web")
    for target in web:
        client = next(p for p in running_pods(c, "probe") if p.spec.node_name != target.spec.node_name)
        assert f"hello from {target.metadata.name}" in http_get_from(c, client, target.status.pod_ip, 8080)
        assert kubectl(c, "exec", client.metadata.name, "--", "ping", "-c", "1", "-W", "2",
                       target.status.pod_ip, check=False).returncode == 0


def test_clusterip_and_nodeport_services_answer_from_another_node(real_lab):
    c = real_lab["b"]
    web = running_pods(c, "web")
    web_nodes = {p.spec.node_name for p in web}
    names = {p.metadata.name for p in web}
    client = next(p for p in running_pods(c, "probe") if p.spec.node_name not in web_nodes)
    cluster_ip = c.kube.core.read_namespaced_service("web", "default").spec.cluster_ip

    def answered(out: str) -> bool:
        return any(f"hello from {n}" in out for n in names)
    # (retried: under load kube-proxy's iptables-restore may lag the Endpoints by seconds)
    wait_for(lambda: answered(http_get_from(c, client, cluster_ip, 80)), timeout=30, what="ClusterIP from a pod")
    # NodePort on a node that runs no web pod (kube-proxy forwards to another node), from a pod and from a node
    bare = c.node(client.spec.node_name)
    wait_for(lambda: answered(http_get_from(c, client, bare.underlay_ip, 30080)), timeout=30, what="NodePort from a pod")
    other = next(n for n in c.nodes if n.name != bare.name)
    wait_for(lambda: answered(netns.run(
        ["nsenter", f"--net=/run/netns/{other.netns}", "curl", "-s", "-m", "5", f"http://{bare.underlay_ip}:30080/"],
        check=False).stdout), timeout=30, what="NodePort from another node")


IN_CLUSTER = """
import json, os, ssl, urllib.request, urllib.error
d = "/var/run/secrets/kubernetes.io/serviceaccount"
url = "https://%s:%s" % (os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"])
ctx = ssl.create_default_context(cafile=d + "/ca.crt")
token = open(d + "/token").read()
def get(path):
    req = urllib.request.Request(url + path, headers={"Authorization": "Bearer " + token})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
            return r.status, sorted(i["metadata"]["name"] for i in json.load(r)["items"])
    except urllib.error.HTTPError as e:
        return e.code, None
import controller.engine, ansible_collections.liqo.fabric.plugins.module_utils.kube.rest  # the image's collection
print(json.dumps({"nodes": get("/api/v1/nodes"), "secrets": get("/api/v1/namespaces/default/secrets"),
                  "collection": controller.engine.__file__}))
"""


def test_in_cluster_config_with_a_role_bound_service_account(real_lab):
    c = real_lab["a"]
    objs = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "node-reader"}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "node-reader"},
         "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "node-reader"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "node-reader"},
         "subjects": [{"kind": "ServiceAccount", "name": "node-reader", "namespace": "default"}]},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "in-cluster"},
         "spec": {"serviceAccountName": "node-reader", "restartPolicy": "Never",
                  "containers": [{"name": "c", "image": fabric_image(), "imagePullPolicy": "Never",
                                  "command": ["python3", "-c", IN_CLUSTER]}]}},
    ]
    # the token controller writes the ServiceAccount's token Secret asynchronously: retry the pod until admitted
    kubectl(c, "apply", "-f", "-", input=yaml.safe_dump_all(objs[:3]))
    wait_for(lambda: kubectl(
        c, "apply", "-f", "-", input=yaml.safe_dump(objs[3]), check=False).returncode == 0, timeout=30,
        what="the pod admitted with its token")
    wait_for(lambda: c.kube.core.read_namespaced_pod(
        "in-cluster", "default").status.phase in ("Succeeded", "Failed"), timeout=90, what="in-cluster pod Succeeded")
    out = kubectl(c, "logs", "in-cluster").stdout
    result = json.loads(out.strip().splitlines()[-1])
    assert result["nodes"] == [200, sorted(n.name for n in c.nodes)]
    assert result["secrets"] == [403, None]
    assert result["collection"] == "/opt/liqo-fabric/ansible_collections/liqo/fabric/controller/engine/__init__.py"


def test_kubectl_logs_and_exec(real_lab):
    c = real_lab["b"]
    pod = running_pods(c, "web")[0]
    assert "serving on 8080" in kubectl(c, "logs", pod.metadata.name).stdout
    out = kubectl(c, "exec", pod.metadata.name, "--", "cat", "/www/index.html").stdout
    assert out.strip() == f"hello from {pod.metadata.name}"
    assert kubectl(c, "exec", pod.metadata.name, "--", "sh", "-c", "exit 3", check=False).returncode == 3


def test_zero_residue_after_down(real_lab, real_node_lab):
    """Takes the shared lab down and compares with what was there before it came up."""
    before = real_node_lab.before
    assert residue(real_lab)["processes"]  # sanity: the snapshot sees the lab while it runs
    real_node_lab.down()
    assert_no_residue(residue(real_lab), before)


VICTIM = """
import sys, time
from tests.lab import Lab
from tests.lab.images import tiny_image
lab = Lab([{"name": "k"}], nodes=1, real_nodes=True).up()
c = lab["k"]
c.kube.core.create_namespaced_pod("default", {"metadata": {"name": "sleeper"}, "spec": {
    "terminationGracePeriodSeconds": 1,
    "containers": [{"name": "s", "image": tiny_image(), "imagePullPolicy": "Never"}]}})
while c.kube.core.read_namespaced_pod("sleeper", "default").status.phase != "Running":
    time.sleep(0.3)
print("ready", lab.lab_id, lab.workdir, flush=True)
time.sleep(3600)
"""


def test_a_sigkilled_real_lab_is_removed_by_lab_clean(real_lab, real_node_lab):
    """After the module's lab: a lab whose owner was SIGKILLed with a pod running counts as dead for
    `make lab-clean` (cleanup.plan_clean), and removing it by its prefix (what lab-clean does for each dead
    lab) leaves nothing: containers, shims, mounts, cgroups, netns, state and image dirs."""
    import signal  # pylint: disable=import-outside-toplevel
    import sys  # pylint: disable=import-outside-toplevel
    import types  # pylint: disable=import-outside-toplevel
    del real_lab  # only for the order: the shared lab is down by now (a real-node lab at a time per host)
    real_node_lab.down()
    before = real_node_lab.before
    proc = subprocess.Popen([sys.executable, "-c", VICTIM], stdout=subprocess.PIPE, text=True,  # pylint: disable=consider-using-with
                            env={**os.environ, "PYTHONPATH": os.getcwd()})
    line = proc.stdout.readline().split()
    if line[:1] != ["ready"]:
        proc.kill()
        proc.wait()
        raise AssertionError(f"the victim lab did not come up: {line}")
    victim = types.SimpleNamespace(lab_id=line[1], workdir=line[2], prefix=f"lfab{line[1]}")
    try:
        assert residue(victim)["processes"] and residue(victim)["cgroups"]
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert victim.workdir in cleanup.plan_clean()["dead"]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        cleanup.clean_prefix(victim.prefix, victim.workdir)
        proc.stdout.close()
    after = residue(victim)
    for key in ("processes", "mounts", "netns", "cgroups", "dirs"):
        assert after[key] == [], (key, after[key])
    assert set(after["shim_sockets"]) <= set(before["shim_sockets"])
