"""Issue 20: connect again with nothing changed runs no module on any node (the plan's digest per node is the one
recorded after its last apply); a changed input applies on exactly the nodes whose planned state it changes;
a node whose kernel drifted under an unchanged plan is repaired by reconcile_overlay, or by connect with
node_overlay_skip_unchanged=false. Tests run in order on one lab (2 x 3 light nodes)."""
import json
import shutil

import pytest

from tests.e2e import fabric
from tests.e2e.fabric import playbook, translate
from tests.lab import netns

pytestmark = pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl is not installed")
GROUPS = dict(gateway_group="cluster_a_gateway", remote_gateway_group="cluster_b_gateway",
              nodes_group="cluster_a_nodes", remote_nodes_group="cluster_b_nodes")
APPLY = "Overlay of this node in one call"
DECIDE = ["liqo.fabric.node_overlay : Plan the overlay of the cluster (internal addresses recorded on the Nodes)",
          "liqo.fabric.node_overlay : The nodes whose planned overlay is not the recorded one"]


@pytest.fixture(scope="module")
def lab():
    with fabric.lab_pair(nodes=3) as lab_:
        yield lab_


def connect(lab, **extra):
    return playbook("connect", lab.inventory_path, json_output=True, kubeconfig=lab["a"].kubeconfig,
                    remote_kubeconfig=lab["b"].kubeconfig, wait=True, wait_timeout=20, **GROUPS, **extra)


def node_hosts(lab):
    return {n.name for c in ("a", "b") for n in lab[c].nodes}


def node_tasks(proc, lab):
    """(play, task, host) of every task result on a node host outside the gateway plays."""
    out = []
    for play in json.loads(proc.stdout)["plays"]:
        if "gateway" in play["play"]["name"].lower() or "tunnel" in play["play"]["name"].lower():
            continue
        for task in play["tasks"]:
            out += [(play["play"]["name"], task["task"]["name"], h) for h in task["hosts"] if h in node_hosts(lab)]
    return out


def applied(proc):
    """{host: result} of the overlay module."""
    out = {}
    for play in json.loads(proc.stdout)["plays"]:
        for task in play["tasks"]:
            if APPLY in task["task"]["name"]:
                out.update(task["hosts"])
    return out


def record(cluster):
    found = fabric.kubectl(cluster, "-n", "liqo", "get", "configmap", "--ignore-not-found", "-o", "json",
                           "liqo-fabric-overlay-applied")
    return json.loads(found)["data"] if found.strip() else None


def reaches(lab, src_cluster, dst_cluster, src_pod, dst_pod):
    view = fabric.get(src_cluster, "configurations")[0]["status"]["remote"]["cidr"]["pod"][0]
    return src_cluster.ping(src_pod.netns, translate(dst_pod.ip, dst_cluster.pod_cidr, view))


def test_first_connect_applies_and_records_every_node(lab):
    proc = connect(lab)
    assert sorted(applied(proc)) == sorted(node_hosts(lab))
    for c in ("a", "b"):
        assert sorted(record(lab[c])) == sorted(n.name for n in lab[c].nodes)
    assert reaches(lab, lab["a"], lab["b"], lab["a"].nodes[1].pods[0], lab["b"].nodes[2].pods[0])


def test_connect_again_with_nothing_changed_runs_nothing_on_any_node(lab):
    before = {c: record(lab[c]) for c in ("a", "b")}
    proc = connect(lab)
    # per cluster, the two run-once decision steps on the controller host (reported under the first node), and
    # nothing else: the apply plays match no host
    tasks = node_tasks(proc, lab)
    assert sorted(t for dummy, t, dummy in tasks) == sorted(DECIDE * 2), tasks
    assert len({h for dummy, dummy, h in tasks}) == 2, tasks
    assert applied(proc) == {}
    assert {c: record(lab[c]) for c in ("a", "b")} == before
    # the liqoctl lines still say the overlay is set up
    text = playbook("connect", lab.inventory_path, kubeconfig=lab["a"].kubeconfig,
                    remote_kubeconfig=lab["b"].kubeconfig, **GROUPS).stdout
    assert "INFO   (local) Overlay network correctly set up" in text and "(remote) Overlay network correctly set up" in text


def test_a_new_pod_applies_on_the_gateway_host_only(lab):
    a, b = lab["a"], lab["b"]
    before = record(a)
    pod = a.add_pod(a.nodes[2].name)
    try:
        proc = connect(lab)
        gw = a.gateway_nodes[0].name
        assert sorted(applied(proc)) == [gw] and applied(proc)[gw]["changed"]
        after = record(a)
        assert [n for n in after if after[n] != before[n]] == [gw] and sorted(after) == sorted(before)
        assert reaches(lab, a, b, pod, b.nodes[1].pods[0])
        assert applied(connect(lab)) == {}
    finally:
        a.remove_pod(pod.name)
    assert sorted(applied(connect(lab))) == [a.gateway_nodes[0].name]


def test_a_drifted_node_is_repaired_by_reconcile_overlay_or_a_full_connect(lab):
    """The record vouches for the plan, not for the kernel: connect trusts it; reconcile_overlay (what the
    controller's overlay drift check runs) compares the kernel and repairs, and so does connect with
    node_overlay_skip_unchanged=false."""
    a, b = lab["a"], lab["b"]
    node = a.nodes[1]
    target = b.nodes[2].pods[0]

    netns.exec_in(node.netns, ["ip", "route", "flush", "table", "18952"])
    assert not reaches(lab, a, b, node.pods[0], target)
    assert applied(connect(lab)) == {}  # the plan did not change
    proc = playbook("reconcile_overlay", lab.inventory_path, nodes_group="cluster_a_nodes", json_output=True)
    assert [h for h, r in applied(proc).items() if r.get("changed")] == [node.name]
    assert reaches(lab, a, b, node.pods[0], target)

    netns.exec_in(node.netns, ["ip", "route", "flush", "table", "18952"])
    proc = connect(lab, node_overlay_skip_unchanged=False)
    assert sorted(applied(proc)) == sorted(node_hosts(lab))
    assert [h for h, r in applied(proc).items() if r.get("changed")] == [node.name]
    assert reaches(lab, a, b, node.pods[0], target)
    assert applied(connect(lab)) == {}


def test_disconnect_records_the_empty_overlay_and_connect_applies_every_node_again(lab):
    """disconnect reconciles every node to the overlay with no gateway (nothing): the record says so, and the next
    connect, whose plan is the full overlay again, applies every node."""
    before = {c: record(lab[c]) for c in ("a", "b")}
    playbook("disconnect", lab.inventory_path, kubeconfig=lab["a"].kubeconfig, remote_kubeconfig=lab["b"].kubeconfig,
             confirm="yes", **GROUPS)
    for c in ("a", "b"):
        after = record(lab[c])
        assert sorted(after) == sorted(before[c]) and not set(after.items()) & set(before[c].items())
    proc = connect(lab)
    assert sorted(applied(proc)) == sorted(node_hosts(lab)) and all(r["changed"] for r in applied(proc).values())
    assert {c: record(lab[c]) for c in ("a", "b")} == before
