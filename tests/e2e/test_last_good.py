"""A refused change never takes a live connection down: on a connected pair, with a ping flow between pods (5 a
second), each bad change is refused with a message naming it, the runs the controller would make on it change
nothing in any node's or gateway's kernel (links, routes, rules, nftables, WireGuard peers), no ping is lost, and
putting the change back brings the gateway back to Ready. The tests run in order on one lab."""
import json
import re
import shutil

import pytest

from tests.e2e import fabric
from tests.e2e.fabric import PingFlow, get, kubectl, playbook, translate
from tests.lab import netns

pytestmark = pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl is not installed")
GROUPS = dict(gateway_group="cluster_a_gateway", nodes_group="cluster_a_nodes")


@pytest.fixture(scope="module")
def lab():
    with fabric.connected_pair(nodes=2, pods_per_node=1, gateway_group="cluster_a_gateway",
                               remote_gateway_group="cluster_b_gateway", nodes_group="cluster_a_nodes",
                               remote_nodes_group="cluster_b_nodes") as lab_:
        yield lab_


def kernel_state(cluster) -> dict:
    """What the fabric owns in the kernel of every host of the cluster, without counters and handshake times."""
    state = {}
    for ns in sorted({n.netns for n in cluster.nodes + cluster.gateway_nodes}):
        def run(*argv):
            return netns.exec_in(ns, list(argv)).stdout
        links = run("ip", "-o", "link")
        # `wg show all` would list every wireguard-go of the machine (their sockets are shared): this host's only
        wg = [line.split("\t") for name in re.findall(r"^\d+: (lwg\w+):", links, re.M)
              for line in run("wg", "show", name, "dump").splitlines()]
        state[ns] = {
            "links": links,
            "routes": run("ip", "-4", "route", "show", "table", "all"),
            "rules": run("ip", "-4", "rule"),
            "nft": re.sub(r"counter packets \d+ bytes \d+", "counter", run("nft", "list", "ruleset")),
            # interface lines as they are (keys, port, fwmark); peer lines without handshake time and counters
            "wireguard": [f[:4] + f[7:] if len(f) == 8 else f for f in wg],
        }
    return state


def differences(before: dict, after: dict) -> str:
    return "\n".join(f"{ns} {what}:\n--- before\n{before[ns][what]}\n--- after\n{after.get(ns, {}).get(what)}"
                     for ns in before for what in before[ns] if before[ns][what] != after.get(ns, {}).get(what))


def the_gateway(cluster) -> tuple[str, dict]:
    """(kind, object) of the cluster's one gateway."""
    found = [(kind, obj) for kind in ("gatewayclients", "gatewayservers") for obj in get(cluster, kind)]
    assert len(found) == 1, found
    return found[0]


def connection(cluster) -> dict:
    (conn,) = get(cluster, "connections")
    return conn


def flow(lab) -> PingFlow:
    a, b = lab["a"], lab["b"]
    view = get(a, "configurations")[0]["status"]["remote"]["cidr"]["pod"][0]
    return PingFlow(a.nodes[-1].pods[0].netns, translate(b.nodes[0].pods[0].ip, b.pod_cidr, view))


def refused(lab, book: str, **extra) -> str:
    """Runs a playbook that must fail; returns its output (the json callback's: every message in full)."""
    proc = playbook(book, lab.inventory_path, check=False, json_output=True, **extra)
    assert proc.returncode != 0, f"{book} was not refused:\n{proc.stdout[-4000:]}"
    return proc.stdout + proc.stderr


def controller_runs(lab, expect_refusal: bool) -> str:
    """The runs the controller makes on a change of the gateway or its Configuration: the gateway with the overlay,
    then the overlay alone (its own key). Returns the gateway run's output."""
    if expect_refusal:
        out = refused(lab, "reconcile_gateway", **GROUPS)
    else:
        out = playbook("reconcile_gateway", lab.inventory_path, **GROUPS).stdout
    playbook("reconcile_overlay", lab.inventory_path, nodes_group="cluster_a_nodes")
    return out


def assert_untouched(lab, ping: PingFlow, before: dict) -> None:
    sent, lost, losses = ping.stop()
    assert sent >= 5 and not lost, losses
    assert kernel_state(lab["a"]) == before, differences(before, kernel_state(lab["a"]))
    assert connection(lab["a"])["status"]["value"] == "Connected"


def _patch(cluster, kind: str, obj: dict, patch: dict) -> None:
    kubectl(cluster, "-n", obj["metadata"]["namespace"], "patch", f"{kind}.networking.liqo.io", obj["metadata"]["name"],
            "--type", "merge", "-p", json.dumps(patch))


def test_a_pool_too_small_for_the_live_peer_is_refused_and_the_allocation_kept(lab):
    a = lab["a"]
    (conf,) = get(a, "configurations")
    served = conf["status"]["remote"]
    before = kernel_state(a)
    ping = flow(lab)
    try:
        out = refused(lab, "reconcile_ipam", kubeconfig=a.kubeconfig, ipam_pools=["192.168.77.0/24"])
        assert "pools 192.168.77.0/24 too small" in out, out[-3000:]
        (conf,) = get(a, "configurations")
        cond = next(c for c in conf["status"]["conditions"] if c["type"] == "NetworkCIDRsConfigured")
        assert conf["status"]["remote"] == served
        assert cond["status"] == "False" and cond["reason"] == "PoolTooSmall", cond
        assert "the allocation in use is kept" in cond["message"], cond
        out = controller_runs(lab, expect_refusal=True)
        assert "ConfigurationRefused" in out or "pools 192.168.77.0/24 too small" in out, out[-4000:]
        assert "runs on as last built" in out, out[-4000:]
    finally:
        assert_untouched(lab, ping, before)
    # the pools put back: served again, the gateway Ready
    playbook("reconcile_ipam", kubeconfig=a.kubeconfig)
    (conf,) = get(a, "configurations")
    assert conf["status"]["remote"] == served
    assert next(c for c in conf["status"]["conditions"] if c["type"] == "NetworkCIDRsConfigured")["status"] == "True"
    controller_runs(lab, expect_refusal=False)
    assert kernel_state(a) == before, differences(before, kernel_state(a))


def test_a_missing_template_on_a_live_gateway_is_refused_and_the_tunnel_kept(lab):
    a = lab["a"]
    kind, gateway = the_gateway(a)
    field = "clientTemplateRef" if kind == "gatewayclients" else "serverTemplateRef"
    template = gateway["spec"][field]
    before = kernel_state(a)
    ping = flow(lab)
    try:
        _patch(a, kind, gateway, {"spec": {field: dict(template, name="no-such-template")}})
        out = controller_runs(lab, expect_refusal=True)
        assert "no-such-template" in out and "runs on as last built" in out, out[-4000:]
    finally:
        _patch(a, kind, gateway, {"spec": {field: template}})
        assert_untouched(lab, ping, before)
    controller_runs(lab, expect_refusal=False)
    assert kernel_state(a) == before, differences(before, kernel_state(a))


@pytest.mark.parametrize("kind, change, words", [
    # a remote pod CIDR no pool can hold: the IPAM refuses it and keeps the allocation in use
    ("configurations", {"spec": {"remote": {"cidr": {"pod": ["10.0.0.0/7"]}}}}, ["ConfigurationRefused", "10.0.0.0/7"]),
    # a server address that does not resolve
    ("gatewayclients", {"spec": {"endpoint": {"addresses": ["no-such-host.invalid"]}}}, ["no-such-host.invalid"]),
    # the peer's PublicKey replaced by a key that is not the peer's: it completes no handshake
    ("publickeies", {"spec": {"publicKey": "GExyYe7RJ3Lo5nQVa6K2Tp9zobXCvWmJawsLxu7hn10="}},
     ["PeerKeyRejected", "GExyYe7RJ3Lo5nQVa6K2Tp9zobXCvWmJawsLxu7hn10=", "the live peer is kept"]),
], ids=["configuration-cidr-no-pool-holds", "unresolvable-endpoint", "wrong-public-key"])
def test_a_refused_spec_change_keeps_the_connection(lab, kind, change, words):
    a = lab["a"]
    (obj,) = get(a, kind)
    top = next(iter(change["spec"]))
    before = kernel_state(a)
    ping = flow(lab)
    try:
        _patch(a, kind, obj, change)
        if kind == "configurations":
            refused(lab, "reconcile_ipam", kubeconfig=a.kubeconfig)
        out = controller_runs(lab, expect_refusal=True)
        for word in words:
            assert word in out, (word, out[-4000:])
    finally:
        _patch(a, kind, obj, {"spec": {top: obj["spec"][top]}})
        assert_untouched(lab, ping, before)
    if kind == "configurations":
        playbook("reconcile_ipam", kubeconfig=a.kubeconfig)
    controller_runs(lab, expect_refusal=False)
    assert kernel_state(a) == before, differences(before, kernel_state(a))
