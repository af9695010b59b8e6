"""Connect two lab clusters that both use 10.243.0.0/16 through WireGuard gateways with
1:1 NAT; Connections report it; bad keys and MTU mismatches report Error; disconnect and reset leave no
residue; no private key ever shows. The tests run in order on one lab (each builds on the previous)."""
import base64
import json
import os
import subprocess
import shutil
import stat

import pytest

from tests.e2e import fabric
from tests.e2e.fabric import PeerServer, get, kubectl, playbook, seen_source, translate
from tests.lab import netns

pytestmark = pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl is not installed")
OUTPUTS = []  # every playbook output, grepped for private keys at the end


@pytest.fixture(scope="module")
def lab():
    # the record starts with this module's lab: tests/e2e/plain reruns these tests in the same worker process
    OUTPUTS.clear()
    with fabric.lab_pair(nodes=2, pods_per_node=2) as lab_:
        yield lab_


def connect(lab, **extra):
    proc = playbook("connect", lab.inventory_path, kubeconfig=lab["a"].kubeconfig,
                    remote_kubeconfig=lab["b"].kubeconfig, gateway_group="cluster_a_gateway",
                    remote_gateway_group="cluster_b_gateway", **extra)
    OUTPUTS.append(proc.stdout + proc.stderr)
    return proc


def connection(cluster):
    conns = get(cluster, "connections")
    assert len(conns) == 1, conns
    return conns[0]


def remapped(cluster):
    """This cluster's remapped CIDR for the other cluster's pods."""
    return get(cluster, "configurations")[0]["status"]["remote"]["cidr"]["pod"][0]


def test_connect_wait_reports_connected_with_real_values(lab):
    out = connect(lab, wait=True, wait_timeout=20).stdout
    # the seeds' progress lines, in their order; the steps run on both clusters at once print local first
    steps = [line for line in out.splitlines() if line.startswith("INFO")]
    assert steps == [
        "INFO   (local) Cluster identity correctly retrieved", "INFO   (local) Network configuration correctly retrieved",
        "INFO   (remote) Cluster identity correctly retrieved", "INFO   (remote) Network configuration correctly retrieved",
        "INFO   (local) Network configuration correctly set up", "INFO   (remote) Network configuration correctly set up",
        "INFO   (local) Configuration applied successfully", "INFO   (remote) Configuration applied successfully",
        "INFO   (remote) Gateway server correctly set up", "INFO   (remote) Gateway server Secret created successfully",
        "INFO   (local) Gateway client correctly set up", "INFO   (local) Gateway client Secret created successfully",
        "INFO   (local) Public key correctly created", "INFO   (remote) Public key correctly created",
        "INFO   (remote) Gateway server is up", "INFO   (local) Connection created successfully",
        "INFO   (remote) Connection created successfully",
        "INFO   (local) Connection is established", "INFO   (remote) Connection is established"], steps
    a, b = lab["a"], lab["b"]
    assert connection(a)["status"]["value"] == "Connected" and connection(a)["spec"]["type"] == "Client"
    assert connection(b)["status"]["value"] == "Connected" and connection(b)["spec"]["type"] == "Server"
    assert connection(a)["status"]["latency"]["value"].endswith("ms")
    wan_b = b.gateway_nodes[0].wan_ip.split("/")[0]
    servers = kubectl(b, "get", "gatewayservers.networking.liqo.io", "-A")
    assert servers.split("\n")[0].split() == ["NAMESPACE", "NAME", "TEMPLATE", "NAME", "IP", "PORT", "AGE"]
    assert wan_b in servers and "wireguard-server" in servers and "51820" in servers
    clients = kubectl(a, "get", "gatewayclients.networking.liqo.io", "-A")
    assert wan_b in clients and "wireguard-client" in clients
    for cluster, kind in ((a, "Client"), (b, "Server")):
        conns = kubectl(cluster, "get", "connections.networking.liqo.io", "-A")
        assert conns.split("\n")[0].split() == ["NAMESPACE", "NAME", "TYPE", "STATUS", "AGE"]
        assert kind in conns and "Connected" in conns
    confs = kubectl(a, "get", "configurations.networking.liqo.io", "-A")
    assert "10.243.0.0/16" in confs and remapped(a) in confs and remapped(a) != "10.243.0.0/16"


def test_pods_on_gateway_nodes_talk_through_the_remap_both_ways(lab):
    a, b = lab["a"], lab["b"]
    pod_a, pod_b = a.gateway_nodes[0].pods[1], b.gateway_nodes[0].pods[0]
    with PeerServer(pod_b.netns):
        # A reaches B's pod at A's remapped address of it; B sees A's pod at B's remapped address of A
        seen = seen_source(pod_a.netns, translate(pod_b.ip, b.pod_cidr, remapped(a)))
        assert seen == translate(pod_a.ip, a.pod_cidr, remapped(b))
    with PeerServer(pod_a.netns):
        seen = seen_source(pod_b.netns, translate(pod_a.ip, a.pod_cidr, remapped(b)))
        assert seen == translate(pod_b.ip, b.pod_cidr, remapped(a))
    # the same (overlapping) address without the remap is the local pod, never the remote one
    assert a.ping(pod_a.netns, pod_b.ip)
    full_mtu = ["ping", "-c", "1", "-W", "1", "-s", "1312", "-M", "do", translate(pod_b.ip, b.pod_cidr, remapped(a))]
    assert netns.exec_in(pod_a.netns, full_mtu, check=False).returncode == 0


def test_second_connect_changes_nothing(lab):
    proc = playbook("connect", lab.inventory_path, json_output=True, kubeconfig=lab["a"].kubeconfig,
                    remote_kubeconfig=lab["b"].kubeconfig, gateway_group="cluster_a_gateway",
                    remote_gateway_group="cluster_b_gateway", wait=True, wait_timeout=20)
    OUTPUTS.append(proc.stdout + proc.stderr)
    assert fabric.changed_tasks(proc) == []
    assert connection(lab["a"])["status"]["value"] == "Connected"


def _reconcile(lab, cluster, wait=3):
    proc = playbook("reconcile_gateway", lab.inventory_path, gateway_group=f"cluster_{cluster}_gateway",
                    gateway_probe_wait=wait)
    OUTPUTS.append(proc.stdout + proc.stderr)


def _condition(conn):
    return next(c for c in conn["status"]["conditions"] if c["type"] == "Established")


def test_a_wrong_public_key_on_the_server_is_refused_and_the_live_peer_kept(lab):
    """b runs the server: the client's PublicKey replaced by a wrong key is tried (a handshake to where the client's
    packets come from), completes none and is refused, naming the key; the live peer runs on, Connected. The right
    key back: the run succeeds."""
    b = lab["b"]
    pk = get(b, "publickeies")[0]
    good = pk["spec"]["publicKey"]
    wrong = base64.b64encode(b"\x01" * 32).decode()
    kubectl(b, "patch", "publickeies.networking.liqo.io", pk["metadata"]["name"], "-n", pk["metadata"]["namespace"],
            "--type", "merge", "-p", json.dumps({"spec": {"publicKey": wrong}}))
    try:
        proc = playbook("reconcile_gateway", lab.inventory_path, check=False, gateway_group="cluster_b_gateway",
                        gateway_probe_wait=4)
        OUTPUTS.append(proc.stdout + proc.stderr)
        assert proc.returncode != 0, proc.stdout[-3000:]
        out = proc.stdout + proc.stderr
        assert f"the peer's new public key {wrong} completed no handshake with the live peer's endpoint" in out, \
            out[-3000:]
        conn = connection(b)
        assert conn["status"]["value"] == "Connected", conn["status"]
    finally:
        kubectl(b, "patch", "publickeies.networking.liqo.io", pk["metadata"]["name"], "-n",
                pk["metadata"]["namespace"], "--type", "merge", "-p", json.dumps({"spec": {"publicKey": good}}))
        _reconcile(lab, "b", wait=10)
    assert connection(b)["status"]["value"] == "Connected"


def test_mtu_mismatch_reports_error_with_reason(lab):
    a = lab["a"]
    gc = get(a, "gatewayclients")[0]
    ref = ["gatewayclients.networking.liqo.io", gc["metadata"]["name"], "-n", gc["metadata"]["namespace"]]
    kubectl(a, "patch", *ref, "--type", "merge", "-p", json.dumps({"spec": {"mtu": 1300}}))
    try:
        _reconcile(lab, "a", wait=2)
        conn = connection(a)
        assert conn["status"]["value"] == "Error"
        assert _condition(conn)["reason"] == "MTUMismatch" and "1300" in _condition(conn)["message"]
    finally:
        kubectl(a, "patch", *ref, "--type", "merge", "-p", json.dumps({"spec": {"mtu": 1340}}))
        _reconcile(lab, "a", wait=10)
    assert connection(a)["status"]["value"] == "Connected"


def _dataplane(node_netns):
    links = [l for l in netns.exec_in(node_netns, ["ip", "-br", "link"]).stdout.split("\n") if l.startswith("lwg")]
    tables = [t for t in netns.exec_in(node_netns, ["nft", "list", "tables"]).stdout.split("\n") if "lfgw_" in t]
    rules = [r for r in netns.exec_in(node_netns, ["ip", "rule"]).stdout.split("\n")
             if r and not any(w in r for w in ("lookup local", "lookup main", "lookup default"))]
    routes = netns.exec_in(node_netns, ["ip", "route", "show", "table", "all"]).stdout
    custom = [r for r in routes.split("\n") if "table 2" in r]  # per-gateway tables are 20000-29999
    return links + tables + rules + custom


def _wireguard_processes():
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
                    stat = f.read()
            except OSError:
                continue
            # a zombie (exited, not yet reaped by PID 1) holds no socket, link or memory
            comm, state = stat[stat.find("(") + 1:stat.rfind(")")], stat[stat.rfind(")") + 2]
            if comm == "wireguard-go" and state not in "ZX":
                out.append(int(pid))
    return out


def test_no_private_key_anywhere_readable(lab):
    keys = []
    for cluster in lab.clusters.values():
        for s in json.loads(kubectl(cluster, "get", "secrets", "-A", "-l", "networking.liqo.io/gateway-keys=true",
                                    "-o", "json"))["items"]:
            keys.append(base64.b64decode(s["data"]["privateKey"]).decode())
    assert len(keys) == 2
    for text in OUTPUTS:
        for key in keys:
            assert key not in text
    for directory in ("/var/run/wireguard", "/run", lab.workdir):
        for entry in os.listdir(directory):
            path = os.path.join(directory, entry)
            if not os.path.isfile(path):
                continue
            if directory == "/var/run/wireguard" and entry.startswith("lwg"):  # wireguard-go pid and log files
                assert not os.stat(path).st_mode & (stat.S_IRWXG | stat.S_IRWXO), f"{path} is readable by others"
            with open(path, "rb") as f:
                data = f.read()
            assert not any(k.encode() in data for k in keys), f"a private key is in {path}"


def test_disconnect_leaves_zero_residue_and_reset_removes_configurations(lab):
    a, b = lab["a"], lab["b"]
    nodes = [a.gateway_nodes[0].netns, b.gateway_nodes[0].netns]
    assert all(_dataplane(n) for n in nodes)
    # this lab's only: other runs on the machine have their own wireguard-go processes
    in_lab = {p for n in nodes for p in netns.pids_in_netns(n)}
    wg_before = [p for p in _wireguard_processes() if p in in_lab]
    assert len(wg_before) >= 2
    ifnames = [line.split()[0].split("@")[0] for n in nodes
               for line in netns.exec_in(n, ["ip", "-br", "link"]).stdout.splitlines() if line.startswith("lwg")]
    assert len(ifnames) == 2
    out = playbook("disconnect", lab.inventory_path, kubeconfig=a.kubeconfig, remote_kubeconfig=b.kubeconfig,
                   gateway_group="cluster_a_gateway", remote_gateway_group="cluster_b_gateway", confirm="yes").stdout
    OUTPUTS.append(out)
    assert "INFO   (local) Gateway client correctly deleted" in out
    for n in nodes:
        assert _dataplane(n) == [], n
    left = set(wg_before) & set(_wireguard_processes())
    assert not left, [(pid, open(f"/proc/{pid}/cmdline", encoding="utf-8").read(),
                       subprocess.run(["ip", "netns", "identify", str(pid)], capture_output=True, text=True, check=False).stdout)
                      for pid in left]
    assert not [e for e in os.listdir("/var/run/wireguard") if e.split(".")[0] in ifnames]
    for cluster in (a, b):
        for kind in ("gatewayservers", "gatewayclients", "connections", "publickeies"):
            assert get(cluster, kind) == []
        assert get(cluster, "configurations")  # disconnect keeps them
    out = playbook("reset", lab.inventory_path, kubeconfig=a.kubeconfig, remote_kubeconfig=b.kubeconfig,
                   gateway_group="cluster_a_gateway", remote_gateway_group="cluster_b_gateway", confirm="yes").stdout
    assert "INFO   (local) Network configuration correctly deleted" in out
    assert get(a, "configurations") == [] and get(b, "configurations") == []


def test_disconnect_asks_for_confirmation(lab):
    proc = playbook("disconnect", lab.inventory_path, check=False, kubeconfig=lab["a"].kubeconfig,
                    remote_kubeconfig=lab["b"].kubeconfig, confirm="no")
    assert proc.returncode != 0 and "disconnect aborted: not confirmed" in proc.stdout + proc.stderr


def test_single_cluster_manual_flow_reaches_the_same_end_state(lab, tmp_path):
    """The seeds' 'Manual on single cluster': each side only uses its own kubeconfig; YAML travels."""
    a, b = lab["a"], lab["b"]   # b is the server, a the client
    for src, dst in ((a, b), (b, a)):
        out = tmp_path / f"conf-{src.name}.yaml"
        playbook("generate_configuration", kubeconfig=src.kubeconfig, output=str(out))
        kubectl(dst, "apply", "-f", str(out))
    for cluster in (a, b):
        playbook("reconcile_ipam", kubeconfig=cluster.kubeconfig)
    out = tmp_path / "server.yaml"
    playbook("create_gatewayserver", kubeconfig=b.kubeconfig, gateway_name="server", remote_cluster_id=a.cluster_id,
             service_type="NodePort")
    _reconcile(lab, "b", wait=0)
    server = get(b, "gatewayservers")[0]["status"]["endpoint"]
    assert server["addresses"] == [b.gateway_nodes[0].wan_ip.split("/")[0]] and 30000 <= server["port"] <= 32767
    playbook("create_gatewayclient", kubeconfig=a.kubeconfig, gateway_name="client", remote_cluster_id=b.cluster_id,
             addresses=server["addresses"], gateway_port=server["port"])
    for src, dst, kind, name in ((a, b, "client", "client"), (b, a, "server", "server")):
        out = tmp_path / f"pk-{src.name}.yaml"
        playbook("generate_publickey", kubeconfig=src.kubeconfig, gateway_type=kind, gateway_name=name, output=str(out))
        kubectl(dst, "apply", "-f", str(out))
    _reconcile(lab, "b", wait=0)
    _reconcile(lab, "a", wait=15)
    _reconcile(lab, "b", wait=15)
    assert connection(a)["status"]["value"] == "Connected" and connection(b)["status"]["value"] == "Connected"
    pod_a, pod_b = a.gateway_nodes[0].pods[0], b.gateway_nodes[0].pods[1]
    with PeerServer(pod_b.netns):
        seen = seen_source(pod_a.netns, translate(pod_b.ip, b.pod_cidr, remapped(a)))
    assert seen == translate(pod_a.ip, a.pod_cidr, remapped(b))
