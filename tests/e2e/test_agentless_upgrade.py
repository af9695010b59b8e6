"""Agentless upgrade: a pair installed and connected by the previous release of the collection
(tests/e2e/previous_release.py, built once from this repository's history), then `install` and `connect` of the
current tree run over it under pings between pods both ways. Nothing is lost; the gateways' keys, WireGuard
interfaces, wireguard-go processes, overlay links and the per-node overlay records of the older release are
understood and kept (no key regenerated, no link recreated); what the rerun changes is what docs/upgrade.md lists.
The tests run in order on one lab."""
import contextlib
import hashlib
import json
import shutil

import pytest

from tests.conftest import require_root
from tests.e2e import fabric, previous_release
from tests.e2e.fabric import PingFlow, changed_tasks, get, kubectl, playbook, translate
from tests.e2e.test_crds_apiserver import crds_for
from tests.lab import Lab, netns

pytestmark = pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl is not installed")
GROUPS = dict(gateway_group="cluster_a_gateway", remote_gateway_group="cluster_b_gateway",
              nodes_group="cluster_a_nodes", remote_nodes_group="cluster_b_nodes")
STATE = {}   # what the tests hand on: the snapshot after the previous release's connect, the upgrade's run


MIGRATE = "Stored objects in the CRDs' storage version [localhost]"
CIDRS = ["spec.remote.cidr.external", "spec.remote.cidr.pod", "status.remote.cidr.external", "status.remote.cidr.pod"]
BUILT = "metadata.annotations.fabric.liqo.io/built-generation"
PUBLISH = "liqo.fabric.gateway : Publish gateway status and Connection [%s]"
CRDS = "CRDs of networking.liqo.io [localhost]"
TEMPLATES = "Namespace, network configuration and default gateway templates [localhost]"
DATAPLANE = "liqo.fabric.gateway : Gateway dataplane of this host (built on the active host, removed elsewhere) [%s]"
PROBE = "liqo.fabric.gateway : Live health probe of each gateway (started where built, stopped elsewhere) [%s]"


@pytest.fixture(scope="module", params=[previous_release.PREVIOUS, previous_release.BEFORE_CIDR_LISTS])
def previous(request):
    STATE.clear()
    STATE["release"] = request.param
    return previous_release.collection(request.param)


@pytest.fixture(scope="module")
def lab(previous):
    with connected_by(previous) as lab_:
        yield lab_


@contextlib.contextmanager
def connected_by(root):
    """Two light lab clusters (2 nodes, a pod each, the same pod CIDR) installed and connected by the tree at root."""
    require_root()
    with Lab([{"name": "a"}, {"name": "b"}], pod_cidr="10.243.0.0/16", nodes=2, pods_per_node=1) as lab_:
        for c in ("a", "b"):
            run(root, "install", kubeconfig=lab_[c].kubeconfig, pod_cidr=lab_[c].pod_cidr,
                service_cidr=lab_[c].service_cidr, reserved=[lab_[c].underlay_cidr])
        run(root, "connect", lab_.inventory_path, kubeconfig=lab_["a"].kubeconfig,
            remote_kubeconfig=lab_["b"].kubeconfig, wait=True, wait_timeout=30, **GROUPS)
        yield lab_


def run(root, book, *inventory, **extra):
    """A playbook of the tree at `root` (None: the current tree), with its json output."""
    if root is None:
        return playbook(book, *inventory, json_output=True, **extra)
    proc = playbook(book, *inventory, json_output=True, playbooks=root + "/playbooks",
                    environ=previous_release.environ(root), **extra)
    paths = [t["task"].get("path", "") for play in json.loads(proc.stdout)["plays"] for t in play["tasks"]]
    assert all(p.startswith(root) for p in paths if p), paths              # its playbooks, and its roles
    assert book != "connect" or any("/roles/" in p for p in paths), paths
    return proc


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def snapshot(lab) -> dict:
    """What an upgrade must keep: per cluster the key Secrets (a digest of their data: no key in any output), the
    PublicKeys, the gateways' specs and Connections, the liqo ConfigMaps (overlay records, IPAM ledger, network);
    per node its fabric links with their ifindex, its processes (wireguard-go, health probes) and, on a gateway
    host, its WireGuard device (public key, port, peers)."""
    out = {}
    for c in (lab["a"], lab["b"]):
        secrets = json.loads(kubectl(c, "get", "secrets", "-A", "-l", "networking.liqo.io/gateway-keys=true",
                                     "-o", "json"))["items"]
        cms = json.loads(kubectl(c, "get", "configmaps", "-n", "liqo", "-o", "json"))["items"]
        out[c.name] = {
            "key_secrets": {s["metadata"]["name"]: (_digest(s["data"]), s["metadata"]["resourceVersion"])
                            for s in secrets},
            "publickeies": {p["metadata"]["name"]: p["spec"]["publicKey"] for p in get(c, "publickeies")},
            "gateways": {g["kind"] + "/" + g["metadata"]["name"]: g["spec"]
                         for kind in ("gatewayservers", "gatewayclients") for g in get(c, kind)},
            "connections": {n["metadata"]["name"]: (n["status"] or {}).get("value") for n in get(c, "connections")},
            "configmaps": {m["metadata"]["name"]: m.get("data") for m in cms if m["metadata"]["name"] != "kube-root-ca.crt"},
        }
        for node in c.nodes:
            links = json.loads(netns.exec_in(node.netns, ["ip", "-j", "link"]).stdout)
            fabric_links = {ln["ifname"]: ln["ifindex"] for ln in links if ln["ifname"].startswith(("lwg", "lov"))}
            here = {"links": fabric_links,
                    "processes": sorted(fabric._cmdline(p) + " pid=%d" % p for p in netns.pids_in_netns(node.netns))}
            for iface in (i for i in fabric_links if i.startswith("lwg")):
                here["wireguard"] = {what: netns.exec_in(node.netns, ["wg", "show", iface, what]).stdout.strip()
                                     for what in ("public-key", "listen-port", "peers", "allowed-ips", "fwmark")}
            out[c.name + "/" + node.name] = here
    return out


def kept(snap: dict) -> dict:
    """A snapshot with each health probe as "probe" (no command line, no PID): a newer collection replaces an older
    collection's probe (it now watches the path MTU); wireguard-go stays as it is, PID included."""
    return {k: dict(v, processes=sorted(p if p.startswith("wireguard-go ") else "probe" for p in v["processes"]))
            if "processes" in v else v for k, v in snap.items()}


def probe_pids(snap: dict) -> list:
    return sorted(p for v in snap.values() for p in v.get("processes", []) if not p.startswith("wireguard-go "))


TIMES = ("lastTransitionTime", "lastHeartbeatTime", "resourceVersion", "managedFields", "generation", "uid",
         "creationTimestamp", "latency")


def _untimed(value):
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in TIMES}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def api_objects(lab) -> dict:
    """The fabric's objects as the rerun may rewrite them (v1beta1, times left out): {cluster/kind/name: object}."""
    out = {}
    for c in (lab["a"], lab["b"]):
        for kind in ("configurations", "gatewayservers", "gatewayclients", "connections", "publickeies"):
            for obj in get(c, kind):
                out["%s/%s/%s" % (c.name, kind, obj["metadata"]["name"])] = _untimed(
                    {"metadata": {k: obj["metadata"].get(k) for k in ("labels", "annotations", "finalizers")},
                     "spec": obj.get("spec"), "status": obj.get("status")})
    return out


def what_changed(before: dict, after: dict) -> dict:
    """{object: {field path: [before, after]}} of the leaves that differ."""
    def leaves(value, path=""):
        if isinstance(value, dict) and value:
            out = {}
            for k, v in value.items():
                out.update(leaves(v, f"{path}.{k}" if path else k))
            return out
        return {path: value}
    out = {}
    for name in sorted(set(before) | set(after)):
        b, a = leaves(before.get(name) or {}), leaves(after.get(name) or {})
        fields = {p: [b.get(p), a.get(p)] for p in sorted(set(b) | set(a)) if b.get(p) != a.get(p)}
        if fields:
            out[name] = fields
    return out


def pods_flows(lab):
    """A ping every 0.2 s from a pod of each cluster to a pod of the other (through the remapped CIDR)."""
    flows = []
    for src, dst in ((lab["a"], lab["b"]), (lab["b"], lab["a"])):
        view = get(src, "configurations")[0]["status"]["remote"]["cidr"]["pod"]
        view = view if isinstance(view, str) else view[0]   # a release before v1beta1's CIDR lists wrote a string
        flows.append(PingFlow(src.nodes[-1].pods[0].netns, translate(dst.nodes[-1].pods[0].ip, dst.pod_cidr, view)))
    return flows


def test_connected_by_the_previous_release(lab):
    before = snapshot(lab)
    for c in ("a", "b"):
        assert before[c]["key_secrets"] and before[c]["publickeies"], before[c]
        assert set(before[c]["connections"].values()) == {"Connected"}, before[c]["connections"]
    STATE["before"], STATE["objects"] = before, api_objects(lab)


def test_connect_before_install(lab):
    """The current connect before the current install, under pings both ways (none lost): over the previous release
    it changes each gateway host's NAT table (the host's marked packets enter the tunnel in the reply direction only)
    and restarts its health probe (the probe now watches the path MTU), and touches nothing else: no key, link,
    wireguard-go or API object; over Configurations holding v1beta1 CIDR strings, which the current CRDs' schema no
    longer takes, it cannot apply until the storage migration (in install) has rewritten them, and says so."""
    if STATE["release"] == previous_release.BEFORE_CIDR_LISTS:
        for c in ("a", "b"):
            kubectl(lab[c], "apply", "-f", "-", input=crds_for(lab[c].apiserver))   # as install applies them
    flows = pods_flows(lab)
    try:
        proc = playbook("connect", lab.inventory_path, check=False, json_output=True, kubeconfig=lab["a"].kubeconfig,
                        remote_kubeconfig=lab["b"].kubeconfig, **GROUPS)
    finally:
        results = [flow.stop() for flow in flows]
    for sent, lost, losses in results:
        assert sent > 0 and not lost, losses
    out = proc.stdout + proc.stderr
    if STATE["release"] == previous_release.BEFORE_CIDR_LISTS:
        assert proc.returncode != 0 and "failed to create typed live object" in out, out[-3000:]
        assert "migrate it with liqo.fabric.migrate_storage" in out, out[-3000:]
        assert snapshot(lab) == STATE["before"] and api_objects(lab) == STATE["objects"]
        return
    gateways = [lab[c].gateway_nodes[0].name for c in ("a", "b")]
    assert proc.returncode == 0, out[-3000:]
    assert sorted(changed_tasks(proc)) == sorted(t % gw for gw in gateways for t in (DATAPLANE, PROBE, PUBLISH)), \
        changed_tasks(proc)
    after = snapshot(lab)
    assert kept(after) == kept(STATE["before"]) and api_objects(lab) == STATE["objects"]
    assert len(probe_pids(after)) == 2 and not set(probe_pids(after)) & set(probe_pids(STATE["before"]))


def test_install_and_connect_of_the_current_tree_lose_nothing_and_keep_keys_and_links(lab):
    flows = pods_flows(lab)
    runs = {}
    try:
        for c in ("a", "b"):
            runs["install " + c] = run(None, "install", kubeconfig=lab[c].kubeconfig, pod_cidr=lab[c].pod_cidr,
                                       service_cidr=lab[c].service_cidr, reserved=[lab[c].underlay_cidr])
        runs["connect"] = run(None, "connect", lab.inventory_path, kubeconfig=lab["a"].kubeconfig,
                              remote_kubeconfig=lab["b"].kubeconfig, wait=True, wait_timeout=30, **GROUPS)
    finally:
        results = [flow.stop() for flow in flows]
    for sent, lost, losses in results:
        assert sent > 0 and not lost, losses
    after = snapshot(lab)
    before = STATE["before"]
    # no key regenerated, no link or wireguard-go recreated, the per-node overlay records and the IPAM ledger kept
    assert kept(after) == kept(before), json.dumps({k: [before[k], after.get(k)] for k in before
                                                    if before[k] != after.get(k)}, indent=1)
    tasks = {name: changed_tasks(proc) for name, proc in runs.items()}
    changes = what_changed(STATE["objects"], api_objects(lab))
    print("what the upgrade from %s changed:" % STATE["release"], json.dumps({"tasks": tasks, "objects": changes}, indent=1))
    gateways = [lab[c].gateway_nodes[0].name for c in ("a", "b")]
    if STATE["release"] != previous_release.BEFORE_CIDR_LISTS:
        # the CRDs (spec.mtu takes "auto", status.mtu) and the gateway templates (the gateway pod's CPU request);
        # status.mtu, which the previous CRDs pruned, stored on the gateways and Connections
        assert tasks == {"install a": [CRDS, TEMPLATES], "install b": [CRDS, TEMPLATES],
                         "connect": [PUBLISH % gw for gw in gateways]}, tasks
        assert sorted(changes) == ["a/connections/b", "a/gatewayclients/b", "b/connections/a", "b/gatewayservers/a"], changes
        assert all(fields == {"status.mtu.source": [None, "configured"], "status.mtu.value": [None, 1340]}
                   for fields in changes.values()), changes
        return
    # the stored Configurations migrated (each CIDR string now its list of one); each Connection gets the generation
    # its gateway was built from (the CRDs were applied by the test before, as install applies them); and, as over
    # the previous release, the templates, each gateway host's NAT table and health probe, and status.mtu
    assert {k: sorted(v) for k, v in tasks.items()} == {
        "install a": sorted([MIGRATE, TEMPLATES]), "install b": sorted([MIGRATE, TEMPLATES]),
        "connect": sorted(t % gw for gw in gateways for t in (DATAPLANE, PROBE, PUBLISH))}, tasks
    assert sorted(changes) == ["a/configurations/b", "a/connections/b", "a/gatewayclients/b", "b/configurations/a",
                               "b/connections/a", "b/gatewayservers/a"], changes
    mtu = {"status.mtu.source": [None, "configured"], "status.mtu.value": [None, 1340]}
    for name, fields in changes.items():
        if "/configurations/" in name:
            assert sorted(fields) == CIDRS and all(isinstance(b, str) and a == [b] for b, a in fields.values()), fields
        elif "/connections/" in name:
            assert fields == dict(mtu, **{BUILT: [None, "1"]}), fields
        else:
            assert fields == mtu, fields


def test_connect_again_changes_nothing(lab):
    objects = api_objects(lab)
    proc = run(None, "connect", lab.inventory_path, kubeconfig=lab["a"].kubeconfig,
               remote_kubeconfig=lab["b"].kubeconfig, wait=True, wait_timeout=30, **GROUPS)
    assert changed_tasks(proc) == [] and fabric.overlay_applied(proc) == {}
    assert kept(snapshot(lab)) == kept(STATE["before"]) and api_objects(lab) == objects


def test_disconnect_of_the_current_tree_leaves_nothing(lab):
    interfaces = fabric.wireguard_interfaces(lab)
    assert interfaces
    playbook("disconnect", lab.inventory_path, kubeconfig=lab["a"].kubeconfig, remote_kubeconfig=lab["b"].kubeconfig,
             confirm="yes", **GROUPS)
    assert fabric.residue(lab, interfaces) == {}
