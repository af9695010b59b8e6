"""Connect again with nothing changed runs no module on any node (the plan's digest per node is the one
recorded after its last apply); a changed input applies on exactly the nodes whose planned state it changes;
a node whose kernel drifted under an unchanged plan is repaired by reconcile_overlay, or by connect with
node_overlay_skip_unchanged=false. Tests run in order on one lab (2 x 3 light nodes)."""
import json
import shutil

import pytest
import yaml

from ansible_collections.liqo.fabric.plugins.plugin_utils import speed
from tests.e2e import fabric
from tests.e2e.fabric import playbook, translate
from tests.lab import netns

pytestmark = pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl is not installed")
GROUPS = dict(gateway_group="cluster_a_gateway", remote_gateway_group="cluster_b_gateway",
              nodes_group="cluster_a_nodes", remote_nodes_group="cluster_b_nodes")
BATCH = fabric.OVERLAY_BATCH_TASK
applied = fabric.overlay_applied
# the run-once steps of tasks/pending.yml (on the play's first host); with nothing changed, the batch applies nothing
# and the others are skipped
DECIDE = {"liqo.fabric.node_overlay : Plan the overlay of the cluster (internal addresses recorded on the Nodes)",
          "liqo.fabric.node_overlay : " + BATCH,
          "liqo.fabric.node_overlay : The changed nodes left to a task of their own",
          "liqo.fabric.node_overlay : Declare the overlay dataplane of the nodes applied in the batch",
          "liqo.fabric.node_overlay : Record the digest of the overlay each node now runs",
          "liqo.fabric.node_overlay : Forget the recorded overlay digests"}


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


def record(cluster):
    found = fabric.kubectl(cluster, "-n", "liqo", "get", "configmap", "--ignore-not-found", "-o", "json",
                           "liqo-fabric-overlay-applied")
    return json.loads(found)["data"] if found.strip() else None


def reaches(lab, src_cluster, dst_cluster, src_pod, dst_pod):
    view = fabric.get(src_cluster, "configurations")[0]["status"]["remote"]["cidr"]["pod"][0]
    return src_cluster.ping(src_pod.netns, translate(dst_pod.ip, dst_cluster.pod_cidr, view))


def test_first_connect_applies_and_records_every_node(lab):
    proc = connect(lab)
    # every node of the lab (liqo.fabric.netns) in the batch, none in a task of its own (with the speed paths off,
    # make plain, the other way round)
    batch, host = ("host", "batch") if speed.off_reason() else ("batch", "host")
    assert sorted(applied(proc, batch)) == sorted(node_hosts(lab)) and applied(proc, host) == {}
    for c in ("a", "b"):
        assert sorted(record(lab[c])) == sorted(n.name for n in lab[c].nodes)
    assert reaches(lab, lab["a"], lab["b"], lab["a"].nodes[1].pods[0], lab["b"].nodes[2].pods[0])


def test_connect_again_with_nothing_changed_runs_nothing_on_any_node(lab):
    before = {c: record(lab[c]) for c in ("a", "b")}
    proc = connect(lab)
    # per cluster, the two run-once decision steps on the controller host (reported under the first node), and
    # nothing else: the apply plays match no host
    tasks = node_tasks(proc, lab)
    assert {t for dummy, t, dummy in tasks} <= DECIDE, tasks
    assert len({h for dummy, dummy, h in tasks}) == 2, tasks
    assert applied(proc) == {}
    assert {c: record(lab[c]) for c in ("a", "b")} == before


def test_a_rerun_still_says_the_overlay_is_set_up(lab):
    """The liqoctl lines of a connect that skips every node."""
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


def test_nodes_the_batch_cannot_apply_get_a_task_of_their_own_and_the_record_holds_both(lab, tmp_path, monkeypatch):
    """A node whose connection the controller host cannot act for (here liqo_fabric_in_process=false on one host)
    is applied by the per-host task, the others in the batch; the record after the run holds every node, and the
    drift targets (the run's fabric_dataplane) every node's manifest once. node_overlay_batch=false: per host only."""
    if speed.off_reason():
        pytest.skip("LIQO_FABRIC_SPEED_PATHS=off: no node is applied in the batch, the other tests cover a task per node")
    a, b = lab["a"], lab["b"]
    odd = a.nodes[2].name
    inventory = yaml.safe_load(open(lab.inventory_path, encoding="utf-8"))
    _host_vars(inventory, odd)["liqo_fabric_in_process"] = False
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(inventory), encoding="utf-8")
    before = {c: record(lab[c]) for c in ("a", "b")}
    netns.exec_in(a.nodes[2].netns, ["ip", "route", "flush", "table", "18952"])
    netns.exec_in(a.nodes[1].netns, ["ip", "route", "flush", "table", "18952"])

    monkeypatch.setenv("ANSIBLE_SHOW_CUSTOM_STATS", "true")  # the json callback then prints the run's stats
    proc = playbook("connect", str(path), json_output=True, kubeconfig=a.kubeconfig, remote_kubeconfig=b.kubeconfig,
                    wait=True, wait_timeout=20, node_overlay_skip_unchanged=False, **GROUPS)
    assert sorted(applied(proc, "host")) == [odd]
    assert sorted(applied(proc, "batch")) == sorted(node_hosts(lab) - {odd})
    assert sorted(h for h, r in applied(proc).items() if r.get("changed")) == sorted([odd, a.nodes[1].name])
    assert {c: record(lab[c]) for c in ("a", "b")} == before
    stats = json.loads(proc.stdout)["global_custom_stats"]["fabric_dataplane"]
    assert sorted(m["netns"] for m in stats if m.get("kind") == "overlay") == sorted(
        n.netns for c in ("a", "b") for n in lab[c].nodes), stats
    assert reaches(lab, a, b, a.nodes[2].pods[0], b.nodes[1].pods[0])
    assert reaches(lab, a, b, a.nodes[1].pods[0], b.nodes[1].pods[0])

    proc = connect(lab, node_overlay_skip_unchanged=False, node_overlay_batch=False)
    assert applied(proc, "batch") == {} and sorted(applied(proc, "host")) == sorted(node_hosts(lab))
    assert {c: record(lab[c]) for c in ("a", "b")} == before


def _host_vars(inventory, host):
    """The dict of `host`'s variables wherever the YAML inventory lists it."""
    def walk(group):
        if host in (group.get("hosts") or {}):
            group["hosts"][host] = group["hosts"][host] or {}
            return group["hosts"][host]
        for child in (group.get("children") or {}).values():
            found = walk(child or {})
            if found is not None:
                return found
        return None
    for group in inventory.values():
        found = walk(group or {})
        if found is not None:
            return found
    raise AssertionError("%s is not in the inventory" % host)
