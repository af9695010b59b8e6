"""Issue 2 acceptance: the lab brings up real, isolated clusters and leaves nothing behind."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import yaml

from tests.ansible_run import ansible_env
from tests.conftest import ROOT, require_root
from tests.lab import Lab, netns
from tests.lab.cleanup import WG_SOCKET_DIR


def _eth0_addr(ns: str) -> str:
    out = netns.exec_in(ns, ["ip", "-j", "-4", "addr", "show", "dev", "eth0"]).stdout
    return json.loads(out)[0]["addr_info"][0]["local"]


def test_same_pod_cidr_and_real_addresses_in_the_api(lab2):
    for cluster in lab2.clusters.values():
        assert cluster.pod_cidr == "10.243.0.0/16"
        nodes = cluster.kube.core.list_node().items
        assert sorted(n.metadata.name for n in nodes) == sorted(n.name for n in cluster.nodes)
        for node in nodes:
            plan = cluster.node(node.metadata.name)
            internal = [a.address for a in node.status.addresses if a.type == "InternalIP"]
            assert internal == [_eth0_addr(plan.netns)]
        pods = cluster.kube.core.list_namespaced_pod("default").items
        assert len(pods) == 6
        for pod in pods:
            plan = next(p for p in cluster.pods if p.name == pod.metadata.name)
            assert pod.status.phase == "Running"
            assert pod.status.pod_ip == _eth0_addr(plan.netns)
        cm = cluster.kube.core.read_namespaced_config_map("liqo-clusterid-configmap", "liqo")
        assert cm.data["CLUSTER_ID"] == cluster.cluster_id
    assert lab2["a"].cluster_id != lab2["b"].cluster_id


@pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl is not installed")
def test_kubectl_shows_nodes_and_pods_with_addresses(lab2):
    a = lab2["a"]
    out = subprocess.run(["kubectl", "--kubeconfig", a.kubeconfig, "get", "nodes,pods", "-A", "-o", "wide"],
                         capture_output=True, text=True, check=True).stdout
    for node in a.nodes:
        assert node.name in out and node.underlay_ip in out
        for pod in node.pods:
            assert pod.name in out and pod.ip in out


def test_pod_reaches_pod_on_another_node(lab2):
    a = lab2["a"]
    src, dst = a.nodes[0].pods[0], a.nodes[2].pods[1]
    assert a.ping(src.netns, dst.ip)
    assert a.ping(a.nodes[1].pods[0].netns, a.nodes[0].pods[1].ip)


def test_nothing_crosses_between_clusters(lab2):
    a, b = lab2["a"], lab2["b"]
    # Same pod CIDR on both sides: B's pod addresses from A lead to A's own pods, never to B.
    # Underlays are separate: no A node or pod reaches any B node address.
    for target in b.nodes:
        assert not a.ping(a.nodes[1].netns, target.underlay_ip)
        assert not a.ping(a.nodes[0].pods[0].netns, target.underlay_ip)
    # Only the gateway hosts share the WAN.
    assert a.ping(a.gateway_nodes[0].netns, b.gateway_nodes[0].wan_ip.split("/")[0])
    assert not a.ping(a.nodes[1].netns, b.gateway_nodes[0].wan_ip.split("/")[0])


def test_playbook_with_netns_connection_sees_the_node_addresses(lab2, tmp_path):
    node = lab2["a"].nodes[1]
    playbook = tmp_path / "facts.yml"
    playbook.write_text(yaml.safe_dump([{
        "hosts": node.name, "gather_facts": True, "gather_subset": ["network"],
        "tasks": [{"ansible.builtin.copy": {
            "content": "{{ ansible_all_ipv4_addresses | to_json }}", "dest": str(tmp_path / "addrs.json")}}]}]))
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"),
                           "-i", lab2.inventory_path, str(playbook)],
                          capture_output=True, text=True, env=ansible_env(), timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    addrs = json.loads((tmp_path / "addrs.json").read_text())
    assert node.underlay_ip in addrs and node.bridge_ip in addrs
    assert lab2["a"].nodes[0].underlay_ip not in addrs  # another node's address is not this node's


def _snapshot():
    links = netns.run(["ip", "-o", "link", "show"]).stdout.splitlines()
    procs = {int(p) for p in os.listdir("/proc") if p.isdigit()}
    socks = sorted(os.listdir(WG_SOCKET_DIR)) if os.path.isdir(WG_SOCKET_DIR) else []
    return set(netns.list_netns()), {line.split(":")[1].strip() for line in links}, procs, socks


def _lab_processes(workdir: str) -> list[int]:
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/cmdline", "rb") as f:
                    if workdir.encode() in f.read():
                        out.append(int(p))
            except OSError:
                pass
    return out


def test_down_leaves_zero_residue():
    require_root()
    ns0, links0, procs0, socks0 = _snapshot()
    lab = Lab([{"name": "a"}, {"name": "b"}], nodes=2, pods_per_node=1).up()
    # a stray wireguard-go-like socket and a process inside a lab netns, as later features will leave
    os.makedirs(WG_SOCKET_DIR, exist_ok=True)
    stray_sock = os.path.join(WG_SOCKET_DIR, f"{lab.prefix}wg0.sock")
    open(stray_sock, "w").close()
    sleeper = netns.popen_in(lab["a"].nodes[0].netns, ["sleep", "300"])
    assert len(set(netns.list_netns()) - ns0) == 2 * (1 + 2 + 2) + 1  # switch+nodes+pods per cluster, WAN
    assert _lab_processes(lab.workdir)
    lab.down()
    sleeper.wait(timeout=5)
    ns1, links1, procs1, socks1 = _snapshot()
    assert ns1 == ns0
    assert links1 == links0
    assert socks1 == socks0
    assert not _lab_processes(lab.workdir)
    assert not os.path.exists(lab.workdir)
    leftover = [p for p in procs1 - procs0 if os.path.exists(f"/proc/{p}") and p != os.getpid()]
    names = []
    for p in leftover:
        try:
            with open(f"/proc/{p}/comm", encoding="utf-8") as f:
                names.append(f.read().strip())
        except OSError:
            pass
    assert not [n for n in names if n in ("etcd", "kube-apiserver", "sleep", "wireguard-go")], names


def test_lab_clean_removes_a_crashed_lab_and_nothing_else():
    require_root()
    bystander = "lfx-bystander"  # not the lab prefix: must survive lab-clean
    netns.create_netns([bystander])
    try:
        code = ("import os\nfrom tests.lab import Lab\n"
                "lab = Lab([{'name': 'a'}, {'name': 'b'}], nodes=1, pods_per_node=1).up()\n"
                "print(lab.prefix, lab.workdir, flush=True)\nos.kill(os.getpid(), 9)\n")
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                              check=False)
        assert proc.returncode == -signal.SIGKILL
        prefix, workdir = proc.stdout.split()
        assert [n for n in netns.list_netns() if n.startswith(prefix)]
        assert _lab_processes(workdir)  # the apiservers outlived the crash
        out = subprocess.run([sys.executable, "-m", "tests.lab", "clean"], capture_output=True, text=True,
                             cwd=ROOT, check=True, timeout=120).stdout
        assert "lab-clean: removed" in out
        time.sleep(0.2)
        assert not [n for n in netns.list_netns() if n.startswith(prefix)]
        assert not _lab_processes(workdir)
        assert not os.path.exists(workdir)
        assert bystander in netns.list_netns()
    finally:
        netns.delete_netns([bystander])


def test_cli_up_status_down():
    require_root()
    env = dict(os.environ, PYTHONPATH=ROOT)
    up = subprocess.run([sys.executable, "-m", "tests.lab", "up", "--clusters", "c", "--nodes", "1",
                         "--pods-per-node", "1"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120,
                        check=False)
    assert up.returncode == 0, up.stderr
    lab_id = up.stdout.split()[1]
    try:
        status = subprocess.run([sys.executable, "-m", "tests.lab", "status"], capture_output=True, text=True,
                                cwd=ROOT, env=env, check=True).stdout
        assert f"lab {lab_id}: 4 netns, 2/2 processes alive" in status
    finally:
        down = subprocess.run([sys.executable, "-m", "tests.lab", "down", lab_id], capture_output=True,
                              text=True, cwd=ROOT, env=env, check=True).stdout
    assert f"lab {lab_id}: removed 4 netns, 2 processes" in down
    assert not [n for n in netns.list_netns() if n.startswith(f"lfab{lab_id}")]
