"""Bad input and gateway deletion on two lab clusters, the controller running with the default watches.yaml:

- bad input is refused before any write: connect's inputs (each wrong one named), two kubeconfigs of one
  cluster (refused by cluster id), a missing or malformed kubeconfig (one error), a GatewayServer whose
  template is missing or renders an invalid label (nothing built, Degraded with the reason);
- deleting a gateway CR removes its overlay side on every node in the same finalizer run.
The tests run in order on one lab."""
import json
import os
import re
import shutil

import pytest
import yaml

from tests.e2e import fabric
from tests.e2e.fabric import apply_yaml, get, kubectl, playbook, wait_for
from tests.e2e.test_controller import ControllerProc
from tests.lab import netns
from ansible_collections.liqo.fabric.plugins.module_utils.gateway.plan import gateway_id, interface_name, mark_for

pytestmark = pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl is not installed")
TABLE = "18952"


@pytest.fixture(scope="module")
def lab():
    with fabric.lab_pair(nodes=2) as lab_:
        yield lab_


def connect(lab, check=False, **extra):
    args = {"kubeconfig": lab["a"].kubeconfig, "remote_kubeconfig": lab["b"].kubeconfig,
            "gateway_group": "cluster_a_gateway", "remote_gateway_group": "cluster_b_gateway",
            "nodes_group": "cluster_a_nodes", "remote_nodes_group": "cluster_b_nodes"}
    args.update(extra)
    return playbook("connect", lab.inventory_path, check=check, **args)


def _failures(proc) -> list:
    """The failed tasks the liqoctl callback printed (`ERROR  <task> [<host>]: <message>`)."""
    return re.findall(r"^ERROR .*$", proc.stderr, re.M)


def _nothing_written(lab):
    for cluster in lab.clusters.values():
        namespaces = json.loads(kubectl(cluster, "get", "namespaces", "-o", "json"))["items"]
        assert not [n["metadata"]["name"] for n in namespaces if n["metadata"]["name"].startswith("liqo-tenant-")]
        for kind in ("configurations", "gatewayservers", "gatewayclients", "publickeies"):
            assert get(cluster, kind) == [], kind


def test_connect_input_check_names_only_the_wrong_input(lab):
    proc = connect(lab, mtu=100)
    assert proc.returncode != 0
    errors = _failures(proc)
    assert len(errors) == 1 and errors[0].endswith("connect: mtu: 100 is not in 576-9000 nor auto"), proc.stderr
    proc = connect(lab, remote_kubeconfig=lab["a"].kubeconfig, server_port=70000)
    assert proc.returncode != 0
    errors = _failures(proc)
    assert len(errors) == 1, proc.stderr
    assert errors[0].endswith(f"connect: kubeconfig and remote_kubeconfig: both are {lab['a'].kubeconfig}, connect "
                              "needs two different clusters; server_port: 70000 is not a port (1-65535)"), errors
    _nothing_written(lab)


def test_connect_refuses_two_kubeconfigs_of_one_cluster_before_any_write(lab, tmp_path):
    twin = tmp_path / "same-cluster-other-file.kubeconfig"
    shutil.copy(lab["a"].kubeconfig, twin)
    proc = connect(lab, remote_kubeconfig=str(twin))
    assert proc.returncode != 0
    errors = _failures(proc)
    assert len(errors) == 1, proc.stderr[-3000:]
    assert (f"kubeconfig ({lab['a'].kubeconfig}) and remote_kubeconfig ({twin}) reach the same cluster "
            f"(cluster id {lab['a'].cluster_id})") in errors[0]
    _nothing_written(lab)


@pytest.mark.parametrize("case", ["missing", "malformed", "unreachable"])
def test_bad_kubeconfig_gives_one_error(lab, tmp_path, case):
    bad = tmp_path / "bad.kubeconfig"
    if case == "malformed":
        bad.write_text("apiVersion: v1\nclusters: [this is: not a kubeconfig\n")
    elif case == "unreachable":
        conf = yaml.safe_load(open(lab["b"].kubeconfig, encoding="utf-8"))
        conf["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:9"  # discard port: connection refused
        bad.write_text(yaml.safe_dump(conf))
    proc = connect(lab, remote_kubeconfig=str(bad))
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert len(_failures(proc)) == 1, out[-3000:]  # one error: the other side does not fail on its absence
    assert "has no attribute" not in out
    if case == "missing":
        assert f"remote_kubeconfig: {bad} is not a file" in out
    _nothing_written(lab)


@pytest.fixture(scope="module")
def controller(lab, tmp_path_factory):
    connect(lab, check=True, wait=True)
    ctl = ControllerProc(str(tmp_path_factory.mktemp("ctl")), {"a": lab["a"].kubeconfig, "b": lab["b"].kubeconfig},
                         inventory=lab.inventory_path)
    ctl.start()
    try:
        yield ctl
    finally:
        ctl.stop()
        ctl.reap_orphans()


def _bad_server(name, template, remote_id):
    return f"""
apiVersion: networking.liqo.io/v1beta1
kind: GatewayServer
metadata:
  name: {name}
  namespace: default
  labels:
    liqo.io/remote-cluster-id: {remote_id}
spec:
  endpoint: {{port: 51830, serviceType: NodePort}}
  mtu: 1340
  serverTemplateRef:
    apiVersion: networking.liqo.io/v1beta1
    kind: WgGatewayServerTemplate
    name: {template}
    namespace: liqo
"""


def _degraded(cluster, name):
    gw = [g for g in get(cluster, "gatewayservers", "default") if g["metadata"]["name"] == name]
    conds = {c["type"]: c for c in ((gw[0].get("status") or {}).get("conditions") or [])} if gw else {}
    return conds.get("Degraded") if (conds.get("Degraded") or {}).get("status") == "True" else None


def _ip(node_netns, *args):
    proc = netns.exec_in(node_netns, ["ip", *args], check=False)
    if proc.returncode and "table does not exist" not in proc.stderr:  # a table never made: nothing in it
        raise AssertionError(f"ip {' '.join(args)} in {node_netns}: {proc.stderr}")
    return proc.stdout


def test_gateway_with_bad_template_builds_nothing_and_is_degraded(lab, controller):
    a, b = lab["a"], lab["b"]
    long_name = "gw" + "x" * 62   # the template's Service name gw-<name> and label values: over 63 characters
    cases = {"no-template": ("no-such-template", "InvalidGatewayTemplate", "liqo/no-such-template not found"),
             long_name: ("wireguard-server", "GatewayManifestRejected", "63")}
    for name, (template, dummy, dummy2) in cases.items():
        apply_yaml(b, _bad_server(name, template, a.cluster_id))
    host = b.gateway_nodes[0].netns
    for name, (dummy, reason, words) in cases.items():
        cond = wait_for(lambda n=name: _degraded(b, n), 120, what=f"{name} Degraded")
        assert cond["reason"] == reason, cond
        assert words in cond["message"], cond
        gid = gateway_id(b.cluster_id, "default", name, "GatewayServer")
        ifname, mark = interface_name(gid), mark_for(gid)
        assert ifname not in _ip(host, "-br", "link"), "a WireGuard interface was built"
        assert f"lfgw_{gid[:12]}" not in netns.exec_in(host, ["nft", "list", "tables"]).stdout
        rules = _ip(host, "rule")
        assert ifname not in rules and f"lookup {mark}" not in rules, rules
        assert not _ip(host, "route", "show", "table", str(mark)).strip()
        assert not [e for e in os.listdir("/var/run/wireguard") if e.startswith(ifname)]
        assert kubectl(b, "get", "secret", f"wg-server-{name}", "-n", "default", check=False) == ""
    for name in cases:
        kubectl(b, "delete", "gatewayservers.networking.liqo.io", name, "-n", "default", "--wait=true", "--timeout=120s")
    # the good tunnel is untouched (the bad ones' Connections, in namespace default, wait for the garbage
    # collector, which the lab does not run)
    assert [c["status"]["value"] for c in get(b, "connections") if c["metadata"]["namespace"] != "default"] \
        == ["Connected"]


def test_deleting_a_gateway_removes_its_overlay_on_every_node_in_the_finalizer_run(lab, controller):
    b = lab["b"]
    server = get(b, "gatewayservers")[0]
    ns, name = server["metadata"]["namespace"], server["metadata"]["name"]
    wait_for(lambda: "networking.liqo.io/fabric-gateway" in
             (get(b, "gatewayservers", ns)[0]["metadata"].get("finalizers") or []), 60, what="the finalizer")
    before = {n.netns: _ip(n.netns, "rule") for n in b.nodes}
    assert all(f"lookup {TABLE}" in rules for rules in before.values()), before
    kubectl(b, "delete", "gatewayservers.networking.liqo.io", name, "-n", ns, "--wait=true", "--timeout=120s")
    # no wait: the CR is gone only once the finalizer run finished, which removed the overlay too
    for node in b.nodes:
        assert f"lookup {TABLE}" not in _ip(node.netns, "rule"), node.name
        assert not _ip(node.netns, "route", "show", "table", TABLE).strip(), node.name
        assert "lov" not in _ip(node.netns, "-br", "link"), node.name
        assert "liqo_fabric_overlay" not in netns.exec_in(node.netns, ["nft", "list", "tables"]).stdout, node.name
