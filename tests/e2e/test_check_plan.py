"""A plan of the whole fabric before it changes: `--check --diff` of connect, disconnect, reset and the
reconcile playbooks runs to the end on two lab clusters, shows per cluster and per host the API objects and the
kernel state it would create, change or delete (never a key), and changes nothing. What carries one step's
planned objects to the next is plugin_utils/check_plan.py. The tests run in order on one lab."""
import json
import os
import re
import shutil
import subprocess

import pytest

from tests.ansible_run import ansible_env
from tests.e2e import fabric
from tests.e2e.fabric import get, kubectl, playbook
from tests.lab import netns

pytestmark = pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl is not installed")
CHECK = ("--check", "--diff")
PLACEHOLDER = "CHECK+MODE+key+generated+by+the+real+run+xA="


@pytest.fixture(scope="module")
def lab():
    with fabric.lab_pair(nodes=2) as lab_:
        yield lab_


def run(lab, book, cli_flags=CHECK, **extra):
    args = {"kubeconfig": lab["a"].kubeconfig, "remote_kubeconfig": lab["b"].kubeconfig,
            "gateway_group": "cluster_a_gateway", "remote_gateway_group": "cluster_b_gateway",
            "nodes_group": "cluster_a_nodes", "remote_nodes_group": "cluster_b_nodes", "confirm": "yes"}
    args.update(extra)
    return playbook(book, lab.inventory_path, cli_flags=cli_flags, **args)


def diff_headers(out: str) -> list:
    return re.findall(r"^--- before(?:: (.*))?$", out, re.M)


def changed_lines(out: str) -> list:
    """The +/- lines of every diff (not the ---/+++ headers)."""
    return [line for line in out.splitlines() if re.match(r"^[-+](?![-+]{2} )", line) and line.strip() not in "+-"]


def kernel_state(lab) -> dict:
    """Per node: its links other than the lab's own, its nft tables, its policy rules."""
    out = {}
    for cluster in lab.clusters.values():
        for node in cluster.nodes:
            links = [ln.split()[0] for ln in netns.run(["ip", "-n", node.netns, "-br", "link"]).stdout.splitlines()]
            tables = netns.run(["ip", "netns", "exec", node.netns, "nft", "list", "tables"]).stdout.split()
            rules = netns.run(["ip", "-n", node.netns, "rule"]).stdout
            out[node.netns] = (sorted(links), tables, rules)
    return out


def api_state(lab) -> dict:
    out = {}
    for name, cluster in lab.clusters.items():
        namespaces = json.loads(kubectl(cluster, "get", "namespaces", "-o", "json"))["items"]
        out[name] = {"namespaces": sorted(n["metadata"]["name"] for n in namespaces)}
        for kind in ("configurations", "gatewayservers", "gatewayclients", "publickeies", "connections"):
            out[name][kind] = sorted((o["metadata"]["namespace"], o["metadata"]["name"], json.dumps(o.get("spec")))
                                     for o in get(cluster, kind))
    return out


def test_connect_check_on_fresh_clusters_plans_everything_and_writes_nothing(lab):
    api0, kernel0 = api_state(lab), kernel_state(lab)
    proc = run(lab, "connect")
    out = proc.stdout
    headers = diff_headers(out)
    # the API objects of both sides, each step seeing what the earlier ones planned
    for kind in ("Namespace", "Configuration", "GatewayServer", "GatewayClient", "PublicKey"):
        assert [h for h in headers if h and h.startswith(kind + " ")], (kind, headers)
    # the planned Configuration in v1beta1's shape (Liqo's list of one CIDR)
    assert re.search(r'"pod": \[[\s+]*"10\.243\.0\.0/16"[\s+]*\]', out), out[-3000:]   # diff lines: '+' first
    # the IPAM ran on the planned Configurations: the remapped pod CIDR is in the gateways' NAT plan
    assert re.search(r"dnat ip prefix to 10\.243\.0\.0/16", out), out[-3000:]
    # the kernel state per gateway host and node: WireGuard with its peer, NAT table, tunnel table, overlay routes
    assert len([h for h in headers if h and h.startswith("wireguard ")]) == 2, headers
    assert len([h for h in headers if h and h.startswith("nft table ip lfgw_")]) == 2, headers
    assert re.search(r"^\+.*via 10\.80\.0\.\d+ dev lov", out, re.M), "no overlay route planned"
    # a key the real run would generate is shown as such; no private key anywhere
    assert PLACEHOLDER in out
    assert "privateKey" not in out and "private_key" not in out
    # and nothing was written
    assert api_state(lab) == api0
    assert kernel_state(lab) == kernel0


def test_connected_pair_plans_nothing_then_only_the_changed_input(lab):
    run(lab, "connect", cli_flags=(), wait=True, wait_timeout=60)
    api1, kernel1 = api_state(lab), kernel_state(lab)
    same = run(lab, "connect")
    assert diff_headers(same.stdout) == [], diff_headers(same.stdout)
    changed = run(lab, "connect", mtu=1300)
    lines = changed_lines(changed.stdout)
    assert lines, changed.stdout[-3000:]
    assert all(re.search(r"mtu\W+\"?13[04]0", line) for line in lines), "\n".join(lines)
    headers = diff_headers(changed.stdout)
    assert {h.split()[0] for h in headers} == {"GatewayServer", "GatewayClient", "PublicKey", "wireguard"}, headers
    assert api_state(lab) == api1
    assert kernel_state(lab) == kernel1


def test_disconnect_and_reset_check_show_the_deletions_and_delete_nothing(lab):
    api1, kernel1 = api_state(lab), kernel_state(lab)
    for book in ("disconnect", "reset"):
        out = run(lab, book).stdout
        headers = [h for h in diff_headers(out) if h]
        for kind in ("GatewayServer", "GatewayClient", "PublicKey", "Connection", "wireguard", "nft table"):
            assert [h for h in headers if h.startswith(kind + " ")], (book, kind, headers)
        # the overlay follows the planned deletions: the routes through the gateway go
        assert re.search(r"^-.*via 10\.80\.0\.\d+ dev lov", out, re.M), (book, out[-3000:])
        if book == "reset":
            assert [h for h in headers if h.startswith("Configuration ")], headers
        assert api_state(lab) == api1
        assert kernel_state(lab) == kernel1
    for book in ("reconcile_ipam", "reconcile_gateway", "reconcile_overlay"):
        proc = playbook(book, lab.inventory_path, cli_flags=CHECK, kubeconfig=lab["a"].kubeconfig,
                        gateway_group="cluster_a_gateway", nodes_group="cluster_a_nodes")
        assert diff_headers(proc.stdout) == [], (book, diff_headers(proc.stdout))
    run(lab, "disconnect", cli_flags=())


def test_assume_is_refused_outside_check_mode(lab):
    """`assume` makes a module read planned objects: a real run must never act on them."""
    args = json.dumps({"kubeconfig": lab["a"].kubeconfig, "assume": [{"kind": "Namespace", "metadata": {"name": "x"}}]})
    ansible = os.path.join(os.path.dirname(fabric.ANSIBLE_PLAYBOOK), "ansible")
    proc = subprocess.run([ansible, "localhost", "-m", "liqo.fabric.cluster_info", "-a", args], capture_output=True,
                          text=True, env=ansible_env({}), check=False, timeout=120)
    assert proc.returncode != 0
    assert "assume: only in check mode" in proc.stdout, proc.stdout
    ok = subprocess.run([ansible, "localhost", "-m", "liqo.fabric.cluster_info", "-a", args, "--check"],
                        capture_output=True, text=True, env=ansible_env({}), check=False, timeout=120)
    assert ok.returncode == 0, ok.stdout
