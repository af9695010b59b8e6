"""The fabric inside the cluster, installed with `kubectl apply -k deploy/` on real-node lab clusters
(kubelets, containerd, the project's image loaded in every node). Two clusters a and b, both pod CIDR
10.243.0.0/16, 3 nodes each: the lab test_real_lab takes over after this module (tests/e2e/real_nodes.py); the last
test removes the install with `kubectl delete -k deploy/ --ignore-not-found` and checks that nothing of it is left.

What runs here is the image built by `make image` from this work tree: the controller Deployment (2 replicas,
one holding the Lease), the node-agent DaemonSet, the bootstrap init container, all with their own
ServiceAccounts under RBAC enforced by the apiserver. The lab, its helpers and the scenarios that measure as
they go are in tests/e2e/in_cluster_lab.py: tests/benchmarks/bench_in_cluster.py runs them on a lab of its own
and prints the times; the tests here assert.
"""
from __future__ import annotations

import concurrent.futures
import glob
import json
import os
import re

import pytest
import yaml

from tests.e2e.fabric import wait_for
from tests.e2e.real_nodes import kubectl
from tests.lab import netns
from tests.lab.images import fabric_image

# the scenarios' asserts are this module's: pytest's messages for them too
pytest.register_assert_rewrite("tests.e2e.in_cluster_lab")
from tests.e2e.in_cluster_lab import (  # noqa: E402  pylint: disable=wrong-import-position
    DEPLOY, acting_controller, active_gateway, cluster_id, condition, connect, drift_faults_one_by_one,
    failover_to_the_standby, get_json, idle, install, iperf_paths, iperf_run, load_balancer_switch, mtu_mismatch_and_back,
    node_added_and_removed, node_agent_replaced_under_ping, path_mtu_auto, pod_memory, pod_port_routes, pods,
    probe_every_pod_pair, ready_pods,
    tunnel_dropped_and_back, verify_rows, verify_services, wrong_public_key_held)

SA_CONTROLLER = "system:serviceaccount:liqo:liqo-fabric-controller"
SA_AGENT = "system:serviceaccount:liqo:liqo-fabric-node-agent"
SA_GATEWAY = "system:serviceaccount:default:liqo-fabric-gateway"


def can_i(cluster, who: str, *args) -> bool:
    """The apiserver's answer (SubjectAccessReview) for the ServiceAccount `who`."""
    out = kubectl(cluster, "auth", "can-i", "--as", who, *args, check=False)
    assert out.stdout.strip() in ("yes", "no"), (out.stdout, out.stderr)
    return out.stdout.strip() == "yes"


def http_from_pod(cluster, pod: str, port: int, path: str) -> str:
    code = f"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:{port}{path}', timeout=5).read().decode())"
    return kubectl(cluster, "exec", "-n", "liqo", pod, "--", "python3", "-c", code).stdout


def fabric_leases(cluster, namespace: str = "", name: str = "") -> list[str]:
    """`namespace/name` of the fabric's Leases (the controller's, each gateway's), or of the one named."""
    leases = get_json(cluster, "leases", *(["-n", namespace] if namespace else ["-A"]))["items"]
    return [f"{m['namespace']}/{m['name']}" for m in (x["metadata"] for x in leases)
            if m["name"] == name or not name and m["name"].startswith("liqo-fabric-")]


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


@pytest.fixture(scope="module")
def lab(real_node_lab, request):
    yield real_node_lab.get()
    real_node_lab.release(request)


@pytest.fixture(scope="module")
def installed(lab):
    """`kubectl apply -k deploy/` on both clusters (and the workload), then everything of it running."""
    install(lab)
    return lab


@pytest.fixture(scope="module")
def connected(installed):
    """The seeds' "manual on single cluster" flow with kubectl alone: b is the server, a the client."""
    return connect(installed)


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
        assert set(r["startup"]) == {"interpreter", "imports", "setup", "start"} and r["startup"]["interpreter"] > 0, r
        assert r["entries"] == ["Configuration", "GatewayServer", "GatewayClient"]


def test_ipam_in_cluster_remaps_the_seeds_configuration(connected, installed):
    a = installed["a"]
    conf = get_json(a, "configurations", "dry-paper")
    assert condition(conf, "Ready").get("status") == "True" and condition(conf, "Degraded").get("status") == "False"
    remapped = conf["status"]["remote"]["cidr"]["pod"][0]
    assert remapped != "10.243.0.0/16" and remapped.endswith("/16"), conf["status"]
    out = kubectl(a, "get", "configurations.networking.liqo.io", "-A").stdout
    assert "10.243.0.0/16" in out and remapped in out, out


def test_both_connections_connected_with_the_service_endpoint(connected, installed):
    a, b = installed["a"], installed["b"]
    svc = get_json(b, "service", "gw-server")
    node_port = svc["spec"]["ports"][0]["nodePort"]
    server_pod = active_gateway(b, "server")
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
        pod = active_gateway(c, name)
        assert pod.spec.containers[0].image == fabric_image() and not pod.spec.host_network
        assert pod.status.qos_class == "Burstable", pod.status.qos_class   # a CPU request: not BestEffort
        show = kubectl(c, "exec", pod.metadata.name, "--", "wg", "show").stdout
        iface = show.split("interface: ")[1].split()[0]
        assert "latest handshake" in show, show
        procs = kubectl(c, "exec", pod.metadata.name, "--", "sh", "-c",
                        "cat /proc/[0-9]*/comm 2>/dev/null").stdout.split()
        assert "wireguard-go" in procs, procs
        # the pod's own address is in the remote's original pod CIDR: the tunnel's rules come before `lookup local`
        # and the tunnel accepts packets with that source (module_utils/route/local_rule.py)
        rules = kubectl(c, "exec", pod.metadata.name, "--", "ip", "-4", "rule").stdout
        assert [line.split(":")[0] for line in rules.splitlines() if "lookup local" in line] == ["1810"], rules
        assert kubectl(c, "exec", pod.metadata.name, "--", "cat",
                       f"/proc/sys/net/ipv4/conf/{iface}/accept_local").stdout.strip() == "1"
        # the NAT table and the policy rules live in the pod, not on its node
        assert "table ip lfgw_" in kubectl(c, "exec", pod.metadata.name, "--", "nft", "list", "tables").stdout
        node = c.node(pod.spec.node_name)
        assert iface not in netns.run(["ip", "netns", "exec", node.netns, "ip", "-br", "link"]).stdout
        # owned by the gateway: the controller's Deployment, Service and key Secret
        for kind in ("deployment", "secret") + (("service",) if name == "server" else ()):
            obj = get_json(c, kind, f"gw-{name}" if kind != "secret" else f"wg-{name}-{name}")
            assert [r["kind"] for r in obj["metadata"]["ownerReferences"]] == ["Gateway" + name.capitalize()], obj["metadata"]


def test_a_wrong_public_key_is_refused_and_the_live_peer_kept(connected, installed):
    """As in the agentless path: the PublicKey of b's peer (b runs the server) replaced by a wrong key is tried
    and refused by b's gateway pod (PeerKeyRejected naming the key) under pings between pods: none lost, b's
    Connection Connected throughout; the right key back, both Connected."""
    wrong_public_key_held(installed)


def test_an_mtu_mismatch_ends_in_error_with_the_reason(connected, installed):
    """As in the agentless path: the peer's PublicKey declaring another MTU (networking.liqo.io/mtu, as the fabric
    writes it with a key) than the GatewayClient's spec.mtu: a's Connection turns Error, MTUMismatch, naming both
    values, and stays so although the tunnel's probes still answer (the probe does not clear the plan's error);
    the annotation gone, Connected again."""
    mtu_mismatch_and_back(installed)


def test_spec_mtu_auto_finds_the_path_and_follows_it(connected, installed):
    """spec.mtu auto on both gateways, the WAN's router at 1380 bytes (with ICMP, then a black hole): the active
    gateway pods' path watch sets the tunnels, every node's overlay links follow (status.mtu), 10 MB cross both
    ways in 1,400-byte writes; lowered to 1300 during a transfer, the tunnels and the links follow and the transfer
    completes; back at 1500, they grow back, one change each way. spec.mtu 1340 again at the end."""
    path_mtu_auto(installed)


def test_live_peer_health_in_the_active_gateway_pods(connected, installed):
    """Live peer health in the cluster: the active gateway pod's probe thread. The server pod drops every packet of the
    tunnel (a firewall on the path) -> a's Connection Error and its pod's liqo_peer_is_connected 0 within 10 s;
    the drop gone -> Connected within 10 s; the pod's WireGuard byte counters are exported with Liqo's labels."""
    tunnel_dropped_and_back(installed)


def test_pod_to_pod_across_clusters_at_the_remapped_address(connected, installed):
    """Node mode: every node agent built the overlay of its node to the active gateway pod; every workload pod of
    a reaches every workload pod of b at its remapped address and back (ICMP, 1,400-byte ICMP, TCP with a
    1,400-byte body), and the server sees the client's remapped address with the host bits kept."""
    a, b = installed["a"], installed["b"]
    assert probe_every_pod_pair(installed) == 2 * len(a.nodes) * len(b.nodes)


def test_tcp_crosses_the_pod_path_and_the_tunnel(connected, installed):
    """TCP from a's workload pod to b's at its remapped address, both on nodes without the active gateway pod,
    and through the tunnel alone between the two active gateway pods (transit addresses): data crosses both.
    (bench_in_cluster measures both paths' throughput.)"""
    for path, args in iperf_paths(installed).items():
        got = iperf_run(*args, seconds=1)
        assert got["bytes"] > 0, (path, got)


def test_verify_reaches_remote_pods_through_clusterip_and_nodeport_services(connected, installed):
    """liqo.fabric.verify -e services=true on real-node clusters: from a pod of each cluster, TCP through a
    ClusterIP and a NodePort Service of its own cluster whose only endpoint is a remote pod at its remapped address
    (as Liqo's reflection makes them): kube-proxy's DNAT (and masquerade, for the NodePort) in front of the fabric.
    The Services and Endpoints are gone after the run."""
    proc = verify_services(installed)
    rows, _summary = verify_rows(proc)
    service_rows = [x for x in rows if "Service liqo/liqo-fabric-verify" in x]
    # both directions, each through the ClusterIP and the NodePort
    assert len(service_rows) == 4, proc.stdout[-4000:]
    for cluster, peer in (("local", "remote"), ("remote", "local")):
        mine = [x for x in service_rows if x.split()[1:4] == [cluster, "->", peer]]
        assert sorted("ClusterIP" in x for x in mine) == [False, True], service_rows
    failed = [x for x in service_rows if not x.startswith("PASS")]
    assert not failed, "\n".join(failed)
    for c in (installed["a"], installed["b"]):
        assert kubectl(c, "get", "service,endpoints", "-n", "liqo", "-l", "liqo.io/fabric-verify=true", "-o", "name",
                       check=False).stdout.strip() == "", c.name


def test_node_agents_hold_the_overlay_of_their_own_node(connected, installed):
    """Every node agent applied node_overlay to its own node: a link to the gateway pod's IP, table 18952 and the
    rules; the gateway pod holds a link to every node."""
    for c, name in ((installed["a"], "client"), (installed["b"], "server")):
        gw = active_gateway(c, name)
        for node in c.nodes:
            links = netns.run(["ip", "netns", "exec", node.netns, "ip", "-d", "-o", "link", "show"]).stdout
            mine = [l.split(":")[1].strip().split("@")[0] for l in links.splitlines() if ": lovg" in l]
            assert len(mine) == 1, (node.name, mine)
            # a VXLAN link's remote is its FDB's flooding entry (geneve: the link's own remote)
            fdb = netns.run(["ip", "netns", "exec", node.netns, "bridge", "fdb", "show", "dev", mine[0]]).stdout
            assert f"dst {gw.status.pod_ip} " in fdb, (node.name, fdb)
            routes = netns.run(["ip", "netns", "exec", node.netns, "ip", "route", "show", "table", "18952"]).stdout
            assert "10.80.0.1 dev lovg" in routes and "via 10.80.0.1" in routes, (node.name, routes)
            rules = netns.run(["ip", "netns", "exec", node.netns, "ip", "rule"]).stdout
            assert "lookup 18952" in rules, (node.name, rules)
        links = kubectl(c, "exec", gw.metadata.name, "--", "ip", "-br", "link").stdout
        assert len([l for l in links.splitlines() if l.startswith("lovn")]) == len(c.nodes), links
        # the gateway pod's own node reaches it over its bridge port, not through the bridge (overlay/pod_port.py);
        # the other nodes' links keep their packets whole up to the pod (bench_in_cluster measures it)
        routed = pod_port_routes(c)
        assert routed == {gw.spec.node_name: gw.status.pod_ip}, routed


def test_drift_is_repaired_as_it_happens_by_the_node_agents_and_the_gateway_pods(connected, installed):
    """Five faults, one at a time, no run by hand (the gateway pod's NAT table flushed, its wireguard-go killed, a
    node's table 18952 flushed, its policy rules and its overlay link deleted): each repaired by the pod that owns
    it, found by the kernel's notification of the change (the drift check's trigger), not by the periodic check;
    pods talk again after each."""
    rows = drift_faults_one_by_one(installed)
    for r in rows:
        assert r["found by"] not in (None, "period", "resync"), rows


def test_a_node_agent_pod_deleted_comes_back_and_traffic_goes_on(connected, installed):
    """The overlay is the kernel's, not the agent's: deleting a node agent's pod interrupts nothing, and the
    DaemonSet's new pod takes the node over (its first run finds the overlay as it is)."""
    node_agent_replaced_under_ping(installed)


def test_a_node_added_joins_the_fabric_and_a_removed_one_leaves_nothing(connected, installed):
    """A node added at run time (a kubelet joining the lab cluster) gets its node agent (the DaemonSet) and the
    active gateway pod a link to it (the gateway pods watch the Nodes): a pod on it is reached from its own cluster
    and from the other one at its remapped address. The node removed: the gateway pod's link and route to it go,
    and the lab leaves nothing of the node (its Node object, netns and cgroups)."""
    plan = node_added_and_removed(installed)
    assert plan.name not in [n.metadata.name for n in installed["a"].kube.core.list_node().items]
    assert plan.netns not in netns.list_netns()
    assert not [g for g in glob.glob("/sys/fs/cgroup/*/*") if os.path.basename(g) == plan.netns]


@pytest.mark.parametrize("cluster,name", [("a", "client"), ("b", "server")])
def test_gateway_failover_to_the_standby(connected, installed, cluster, name):
    """Active/standby: a gateway's two replicas, one labelled active (the Lease holder), the other a warm standby
    (its tunnel and its end of the overlay built, unreachable: a client's peer has no endpoint, a server's Service
    selects the active pod only); the active pod deleted under a 50 ms ping from a node of a to a pod of b: the
    standby takes the label, its peer gets the endpoint, the Service and the node agents' overlay follow, and
    traffic resumes. (bench_in_cluster measures the outage against its 3 s target.)"""
    failover_to_the_standby(installed, cluster, name)


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
    assert can_i(c, SA_GATEWAY, "list", "nodes")        # its end of the overlay: a link to every node
    assert not can_i(c, SA_GATEWAY, "patch", "nodes")
    assert not can_i(c, SA_GATEWAY, "create", "deployments", "-n", "default")
    assert can_i(c, SA_GATEWAY, "update", "connections.networking.liqo.io", "--subresource=status", "-n", "default")
    assert not can_i(c, SA_GATEWAY, "get", "wggatewayservertemplates.networking.liqo.io", "-n", "liqo")
    # and the running controllers never hit a permission they lack
    # (a 403 as a word: hashes and names in the logs carry "403" now and then)
    forbidden = [r for r in controller_logs(c) if re.search(r"(?<![\w.-])403(?![\w.-])", json.dumps(r))
                 or "forbidden" in json.dumps(r).lower()]
    assert not forbidden, forbidden[:3]


def test_the_warm_runners_zygotes_exit_when_idle(connected, installed):
    """A gateway pod's and a node agent's warm runner keeps its zygote 60 s after their last run only
    (--warm-idle-exit): after the earlier tests' runs, both zygotes exit. Every fabric pod's memory is readable
    from inside it (bench_in_cluster prints the figures)."""
    c = installed["a"]
    assert pod_memory(c, acting_controller(c), "liqo")[0] > 0
    gateway = active_gateway(c, "client").metadata.name
    wait_for(lambda: idle(c, gateway), timeout=90, interval=1, what="a's client pod idle")
    agents = [p.metadata.name for p in ready_pods(c, "liqo-fabric-node-agent")]
    wait_for(lambda: pod_memory(c, gateway, "default")[2] == 0, timeout=150, interval=5,
             what="the gateway pod's warm runner's zygote exited idle")
    wait_for(lambda: any(pod_memory(c, pod, "liqo")[2] == 0 for pod in agents), timeout=150, interval=5,
             what="a node agent whose warm runner's zygote exited idle")
    for pod, namespace in [(gateway, "default")] + [(pod, "liqo") for pod in agents]:
        assert pod_memory(c, pod, namespace)[0] > 0, pod


def test_a_load_balancer_gateway_server(connected, installed):
    """The GatewayServer switched to `serviceType: LoadBalancer` behind the lab's load balancer (tests/lab/
    loadbalancer.py: a WAN address given to the Service and announced by one of b's WAN nodes): its status endpoint
    becomes the load balancer's address and the Service port; the client, given that endpoint as a user would,
    reaches the server through it (its WireGuard endpoint is that address), both Connections are Connected again
    and a workload pod of a reaches one of b. Back to NodePort at the end, the address taken back."""
    load_balancer_switch(installed)


def test_deleting_the_gateways_removes_their_deployments_services_and_secrets(connected, installed):
    a, b = installed["a"], installed["b"]
    kubectl(a, "delete", "gatewayclient", "client", "--wait=true", timeout=120)
    kubectl(b, "delete", "gatewayserver", "server", "--wait=true", timeout=120)
    for c, name in ((a, "client"), (b, "server")):
        wait_for(lambda c=c, name=name: not c.kube.core.list_namespaced_pod(
            "default", label_selector=f"networking.liqo.io/gateway-name={name}").items, timeout=90,
            what=f"{c.name}: the gateway pod gone")
        # the node agents take the overlay of their nodes away with the gateway pod
        wait_for(lambda c=c: not [n for n in c.nodes if "lovg" in netns.run(
            ["ip", "netns", "exec", n.netns, "ip", "-br", "link"]).stdout], timeout=90,
            what=f"{c.name}: no overlay link left on the nodes")
        left = kubectl(c, "get", "deployments,services,secrets,connections", "-n", "default", "-o", "name").stdout.split()
        assert not [x for x in left if x.endswith(f"gw-{name}") or x.endswith(f"wg-{name}-{name}")
                    or x.startswith("connection")], left
        # the gateway's Lease is owned by the gateway: the garbage collector deletes it too
        wait_for(lambda c=c, name=name: not fabric_leases(c, "default", f"liqo-fabric-gateway-{name}"), timeout=60,
                 what=f"{c.name}: the Lease of gateway {name} gone")


def test_delete_k_removes_it_all(installed):
    # both clusters at once: each delete waits on its own pods' termination.
    # As docs/in-cluster.md says: the Namespace goes first and its controller may remove the objects in it (the
    # ConfigMap) before kubectl's own delete reaches them, a NotFound that is not an error here.
    with concurrent.futures.ThreadPoolExecutor(len(installed.clusters)) as pool:
        for done in [pool.submit(kubectl, c, "delete", "-k", DEPLOY, "--wait=true", "--ignore-not-found", timeout=180)
                     for c in installed.clusters.values()]:
            done.result()
    for c in installed.clusters.values():
        wait_for(lambda c=c: kubectl(c, "get", "namespace", "liqo", check=False).returncode != 0, timeout=120,
                 what=f"{c.name}: namespace liqo gone")
        assert not [x for x in get_json(c, "crd")["items"] if x["spec"]["group"] == "networking.liqo.io"]
        left = kubectl(c, "get", "clusterroles,clusterrolebindings,rolebindings,serviceaccounts", "-A",
                       "-l", "app.kubernetes.io/part-of=liqo-fabric", "-o", "name").stdout
        assert left.strip() == "", left
        assert fabric_leases(c) == []      # the controller's (in liqo) and every gateway's
        wait_for(lambda c=c: not [p for p in c.kube.core.list_pod_for_all_namespaces().items
                                  if p.spec.containers[0].image == fabric_image()], timeout=60,
                 what=f"{c.name}: no pod of the fabric's image left")
