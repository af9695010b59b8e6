"""GitOps: the seeds' single-cluster YAML applied with kubectl to two lab clusters, the
controller running, no playbook run by hand: both Connections end Connected and pods talk across."""
import base64
import json
import shutil
import time

import pytest

from tests.e2e import fabric
from tests.e2e.fabric import apply_yaml, get, kubectl, translate, wait_for
from tests.e2e.test_controller import ControllerProc

pytestmark = pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl is not installed")


@pytest.fixture(scope="module")
def lab():
    with fabric.lab_pair(nodes=2) as lab_:
        yield lab_


def configuration(remote):
    return f"""
apiVersion: networking.liqo.io/v1alpha1
kind: Configuration
metadata:
  labels:
    liqo.io/remote-cluster-id: {remote.cluster_id}
  name: {remote.name}-peer
spec:
  remote:
    cidr:
      external: 10.70.0.0/16
      pod: {remote.pod_cidr}
"""


def public_key(cluster, secret, remote_id_of_this_side):
    data = json.loads(kubectl(cluster, "get", "secret", secret, "-n", "default", "-o", "json"))["data"]
    return f"""
apiVersion: networking.liqo.io/v1alpha1
kind: PublicKey
metadata:
  labels:
    liqo.io/remote-cluster-id: {remote_id_of_this_side}
    networking.liqo.io/gateway-resource: "true"
  name: {remote_id_of_this_side}
spec:
  publicKey: {base64.b64decode(data["publicKey"]).decode()}
"""


def test_gitops_yaml_and_the_controller_connect_two_clusters(lab, tmp_path):
    a, b = lab["a"], lab["b"]
    ctl = ControllerProc(str(tmp_path), {"a": a.kubeconfig, "b": b.kubeconfig}, inventory=lab.inventory_path)
    ctl.start()
    try:
        apply_yaml(a, configuration(b))
        apply_yaml(b, configuration(a))
        for cluster in (a, b):
            wait_for(lambda c=cluster: (get(c, "configurations")[0].get("status") or {}).get("remote"), 90,
                     what=f"IPAM remap in {cluster.name}")
        apply_yaml(b, f"""
apiVersion: networking.liqo.io/v1alpha1
kind: GatewayServer
metadata:
  labels:
    liqo.io/remote-cluster-id: {a.cluster_id}
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
""")
        endpoint = wait_for(lambda: (get(b, "gatewayservers")[0].get("status") or {}).get("endpoint"), 120,
                            what="GatewayServer status.endpoint")
        apply_yaml(a, f"""
apiVersion: networking.liqo.io/v1alpha1
kind: GatewayClient
metadata:
  labels:
    liqo.io/remote-cluster-id: {b.cluster_id}
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
    - {endpoint["addresses"][0]}
    port: {endpoint["port"]}
    protocol: UDP
  mtu: 1340
""")
        wait_for(lambda: kubectl(a, "get", "secret", "wg-client-client", "-n", "default", check=False), 120,
                 what="the client's key Secret")
        # b gets the client's key labelled the seeds' way (b's own id: the cluster it is applied to), a gets the
        # server's key labelled Liqo's way (the owner's id): both match, and the controller re-runs the gateway
        # of the namespace for either
        apply_yaml(b, public_key(a, "wg-client-client", b.cluster_id))
        apply_yaml(a, public_key(b, "wg-server-server", b.cluster_id))

        def connected():
            conns = [get(c, "connections") for c in (a, b)]
            return all(c and c[0].get("status", {}).get("value") == "Connected" for c in conns)
        wait_for(connected, 180, interval=1, what="both Connections Connected")
        remap = get(a, "configurations")[0]["status"]["remote"]["cidr"]["pod"][0]
        src, dst = a.nodes[1].pods[0], b.nodes[1].pods[0]   # pods on non-gateway nodes: the overlay too
        wait_for(lambda: a.ping(src.netns, translate(dst.ip, b.pod_cidr, remap)), 120, interval=1,
                 what="pod-to-pod traffic across the clusters")
        for cluster in (a, b):
            gws = get(cluster, "gatewayservers") + get(cluster, "gatewayclients")
            ready = [c for c in gws[0]["status"].get("conditions", []) if c["type"] == "Ready"]
            assert ready and ready[0]["status"] == "True", gws[0]["status"]
        pod_created_without_its_ip(ctl, a)
    finally:
        ctl.stop()
        ctl.reap_orphans()


def pod_created_without_its_ip(ctl, a):
    """A Pod created without its IP (the lab, like a kubelet, writes the IP in a second call) is not a member
    of the overlay key: its event starts no run (which would route nothing, and the IP's run would wait for it); the
    IP's event does, and the pod's /32 reaches a's active gateway host."""
    import ipaddress  # pylint: disable=import-outside-toplevel
    import types  # pylint: disable=import-outside-toplevel
    from tests.lab import netns  # pylint: disable=import-outside-toplevel
    from tests.lab.kube import POD_NAMESPACE, pod_object, pod_status  # pylint: disable=import-outside-toplevel
    node = a.nodes[1]
    pod = types.SimpleNamespace(name="late-ip", netns="none", ip=str(ipaddress.ip_network(node.pod_cidr)[200]))
    gw_ns = a.gateway_nodes[0].netns

    def routed():
        out = netns.exec_in(gw_ns, ["ip", "-4", "route", "show", "table", "18952"], check=False).stdout
        return any(line.split()[0] == pod.ip for line in out.splitlines() if line)
    wait_for(lambda: ctl.metric("liqo_fabric_queue_depth") + ctl.metric("liqo_fabric_queue_running") == 0, 120,
             interval=0.5, what="the controller idle")

    def overlay_runs():   # the overlay key's runs are labelled with the kind of its first member (Node or Pod)
        return sum(ctl.metric("liqo_fabric_playbook_runs_total", cluster="a", kind=k) for k in ("Node", "Pod"))

    def overlay_skips():  # events of the overlay key that changed nothing (labelled like its runs)
        return sum(ctl.metric("liqo_fabric_reconcile_skipped_total", cluster="a", kind=k) for k in ("Node", "Pod"))
    runs, skips = overlay_runs(), overlay_skips()
    a.kube.core.create_namespaced_pod(POD_NAMESPACE, pod_object(pod, node))
    try:
        # the event is considered and changes no hash (a Pod without its IP is no member): skipped, no run
        wait_for(lambda: overlay_skips() > skips, 30, interval=0.2, what="the Pod's event skipped (no member yet)")
        time.sleep(1.0)   # 10 debounce windows: a run the event had queued would have started
        assert overlay_runs() == runs, ctl.log_tail()
        assert not routed()
        a.kube.core.patch_namespaced_pod_status(pod.name, POD_NAMESPACE, pod_status(pod, node))
        wait_for(routed, 120, interval=0.2, what=f"{pod.ip}/32 on a's gateway host")
        assert overlay_runs() > runs
    finally:
        a.kube.delete_pod(pod.name)
