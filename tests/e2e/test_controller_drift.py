"""The controller repairs dataplane drift in production.

The drift checks against a real netns (no lab cluster), then two lab clusters connected by the agentless
`connect`, the controller run as its README says (default controller/watches.yaml, shipped playbooks, the lab
inventory) with a short drift period, and one fault at a time, nobody running a playbook: each is detected by
a drift check, repaired by a forced reconcile, and pod traffic across the clusters resumes. On the same live
connection, an MTU change on both gateways reconverges each way under the controller alone. Last, on the same lab,
a drift check that cannot read a namespace marks the object Degraded (DriftCheckFailed) instead of passing.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time

import pytest
import yaml

from tests.conftest import require_root
from tests.e2e import fabric
from tests.e2e.fabric import playbook, translate

# the controller process, the API client and the engine's test watch map
from tests.e2e.test_controller import (  # noqa: F401 # pylint: disable=unused-import
    ControllerProc, Kube, engine_map, gateway_server, wait_for)

DRIFT_PERIOD = 2.0      # the periodic check alone (--no-drift-events)
EVENT_PERIOD = 600.0    # the module's controller: a fault is found by the kernel's notification, not the period
GROUPS = dict(gateway_group="cluster_a_gateway", remote_gateway_group="cluster_b_gateway",
              nodes_group="cluster_a_nodes", remote_nodes_group="cluster_b_nodes")


# ------------------------------------------------------------------------------ drift checks, one netns
@pytest.fixture
def netns():
    require_root()
    name = f"lfab{os.urandom(2).hex()}dr"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        _setup(name)
    except BaseException:
        subprocess.run(["ip", "netns", "del", name], check=False)
        raise
    yield name
    subprocess.run(["ip", "netns", "del", name], check=False)


def _setup(name):
    subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
    subprocess.run(["ip", "-n", name, "link", "add", "dummy7", "mtu", "1400", "type", "veth", "peer", "name", "dummy8"],
                   check=True)
    subprocess.run(["ip", "-n", name, "route", "add", "10.98.0.0/16", "dev", "lo", "table", "18952"], check=True)
    subprocess.run(["ip", "-n", name, "rule", "add", "priority", "1900", "to", "10.98.0.0/16", "lookup", "18952"],
                   check=True)
    subprocess.run(["ip", "netns", "exec", name, "nft", "-f", "-"], check=True, text=True,
                   input="table ip lfabtest {\n chain post {\n  type nat hook postrouting priority 100;\n"
                         "  ip saddr 10.243.0.0/16 snat ip prefix to 10.72.0.0/16\n }\n}\n")


def test_dataplane_manifest_check_finds_each_kind_of_drift(netns):
    from controller import drift  # pylint: disable=import-outside-toplevel
    before = os.stat("/proc/thread-self/ns/net").st_ino
    manifest = [{"netns": netns, "kind": "overlay", "links": [{"name": "dummy7", "mtu": 1400}],
                 "routes": [{"table": 18952, "dst": ["10.98.0.0/16"]}],
                 "rules": [{"table": 18952, "line": "1900: from all to 10.98.0.0/16 lookup 18952"}],
                 "nft_tables": [{"family": "ip", "name": "lfabtest", "rules": 1}],
                 "sysctls": {"net.ipv4.conf.all.forwarding": "0"}}]
    assert drift.overlay(manifest) == []
    assert drift.gateway(manifest) == []          # an overlay target is not the gateway check's
    subprocess.run(["ip", "-n", netns, "link", "set", "dummy7", "mtu", "1300"], check=True)
    subprocess.run(["ip", "-n", netns, "rule", "del", "priority", "1900"], check=True)
    subprocess.run(["ip", "netns", "exec", netns, "sysctl", "-qw", "net.ipv4.conf.all.forwarding=1"], check=True)
    diffs = drift.dataplane(manifest)
    assert "link dummy7 has MTU 1300, expected 1400" in " ".join(diffs), diffs
    assert f"{netns}: rule '1900: from all to 10.98.0.0/16 lookup 18952' is missing" in diffs, diffs
    assert f"{netns}: sysctl net.ipv4.conf.all.forwarding is 1, expected 0" in diffs, diffs
    subprocess.run(["ip", "-n", netns, "route", "del", "10.98.0.0/16", "table", "18952"], check=True)
    subprocess.run(["ip", "netns", "exec", netns, "nft", "flush", "table", "ip", "lfabtest"], check=True)
    subprocess.run(["ip", "-n", netns, "link", "del", "dummy7"], check=True)
    diffs = drift.dataplane(manifest)
    assert any("route 10.98.0.0/16 missing from table 18952" in d for d in diffs), diffs
    assert any("nft table ip lfabtest has 0 rule(s)" in d for d in diffs), diffs
    assert any("link dummy7 is missing" in d for d in diffs), diffs
    assert drift.failures(diffs) == []
    subprocess.run(["ip", "netns", "exec", netns, "nft", "delete", "table", "ip", "lfabtest"], check=True)
    assert any("nft table ip lfabtest is missing" in d for d in drift.overlay(manifest))
    # what cannot be read is a CheckFailure (reported, not repaired blindly), never a pass
    missing = drift.dataplane([{"netns": netns + "x"}])
    assert missing == [f"{netns}x: network namespace is missing"] and drift.failures(missing) == missing
    foreign = drift.dataplane([{"boot_id": "00000000-0000-0000-0000-000000000000", "host": "n1", "links": ["lo"]}])
    assert len(drift.failures(foreign)) == 1 and "another machine" in foreign[0], foreign
    # the calling thread's namespace is untouched
    assert os.stat("/proc/thread-self/ns/net").st_ino == before


# ------------------------------------------------------------------------------ two clusters, the real controller
@pytest.fixture(scope="module")
def fabric_lab(tmp_path_factory):
    """Two lab clusters connected by `connect`, and the controller (default watches) serving both."""
    require_root()
    if not shutil.which("kubectl"):
        pytest.skip("kubectl is not installed")
    with fabric.connected_pair(nodes=2, wait_timeout=30, **GROUPS) as lab:
        ctl = ControllerProc(str(tmp_path_factory.mktemp("drift")), {"a": lab["a"].kubeconfig, "b": lab["b"].kubeconfig},
                             "--drift-period", str(EVENT_PERIOD), inventory=lab.inventory_path, name="drift")
        ctl.start()
        try:
            # the controller adopts what connect built: every key runs once and records its manifest
            wait_for(lambda: len(manifests(lab["a"])) >= 2 and len(manifests(lab["b"])) >= 2, 180,
                     "the controller's first runs recorded their dataplane manifests", interval=1)
            yield lab, ctl
        finally:
            ctl.stop()
            ctl.reap_orphans()
            playbook("disconnect", lab.inventory_path, kubeconfig=lab["a"].kubeconfig,
                     remote_kubeconfig=lab["b"].kubeconfig, check=False, **GROUPS)


def manifests(cluster) -> dict:
    """{work key: manifest} from the controller's persisted state (ConfigMap liqo/liqo-fabric-controller-state)."""
    out = fabric.kubectl(cluster, "get", "configmap", "-n", "liqo", "liqo-fabric-controller-state", "-o", "json",
                         check=False)
    if not out:
        return {}
    state = json.loads(json.loads(out)["data"]["state.json"])
    return {k: v["manifest"] for k, v in state["keys"].items() if v.get("manifest")}


def targets(cluster, kind: str) -> list:
    """The targets of `kind` the controller checks: overlay ones from the cluster's overlay key (Node entry),
    gateway ones from the gateway keys (a gateway run's overlay targets are the Node entry's to check)."""
    owner = (lambda k: k == f"{cluster.name}/overlay") if kind == "overlay" else (lambda k: "/Gateway" in k)
    return [t for k, m in manifests(cluster).items() if owner(k) for t in m if t.get("kind") == kind]


def remapped(cluster):
    return fabric.get(cluster, "configurations")[0]["status"]["remote"]["cidr"]["pod"][0]


def traffic(lab) -> bool:
    a, b = lab["a"], lab["b"]
    src, dst = a.nodes[1].pods[0], b.nodes[1].pods[0]       # non-gateway nodes: overlay and tunnel both
    return a.ping(src.netns, translate(dst.ip, b.pod_cidr, remapped(a)))


def sh(*argv, check=True, input=None):
    return subprocess.run(list(argv), check=check, capture_output=True, text=True, input=input)


def _gw(lab):
    a = lab["a"]
    node = a.gateway_nodes[0]
    target = next(t for t in targets(a, "gateway") if t.get("netns") == node.netns)
    return node.netns, target


def _node(lab):
    a = lab["a"]
    node = a.nodes[1]
    target = next(t for t in targets(a, "overlay") if t.get("netns") == node.netns)
    return node.netns, target


def fault_flush_nft(lab):
    ns, t = _gw(lab)
    sh("ip", "netns", "exec", ns, "nft", "flush", "table", "ip", t["nft_tables"][0]["name"])
    return "rule(s), expected"


def fault_delete_node_routes(lab):
    ns = _node(lab)[0]
    sh("ip", "-n", ns, "route", "flush", "table", "18952")
    return "missing from table 18952"


def fault_delete_node_rules(lab):
    ns, t = _node(lab)
    for r in t["rules"]:
        sh("ip", "-n", ns, "rule", "del", "priority", r["line"].split(":")[0])
    return "rule '"


def fault_kill_wireguard_go(lab):
    t = _gw(lab)[1]
    iface = t["wireguard"][0]["name"]
    with open(f"/var/run/wireguard/{iface}.pid", encoding="ascii") as f:
        os.kill(int(f.read().strip()), signal.SIGKILL)
    return f"wireguard interface {iface} is missing"


def fault_kill_health_probe(lab):
    """Kills the gateway host's live health probe process (its pid file stays behind, stale)."""
    from ansible_collections.liqo.fabric.plugins.module_utils.health import daemon as phd  # pylint: disable=import-outside-toplevel
    spec = _gw(lab)[1]["health"][0]
    rec = phd.read_pidfile(spec["state_dir"], spec["interface"])
    assert rec, spec
    os.kill(rec["pid"], signal.SIGKILL)
    return f"the health probe process of {spec['interface']} is not running"


def fault_delete_overlay_link(lab):
    ns, t = _node(lab)
    sh("ip", "-n", ns, "link", "del", t["links"][0]["name"])
    return f"link {t['links'][0]['name']} is missing"


def fault_delete_gateway_rule(lab):
    ns, t = _gw(lab)
    sh("ip", "-n", ns, "rule", "del", "priority", t["rules"][0]["line"].split(":")[0])
    return "rule '"


def fault_change_mtu(lab):
    ns, t = _gw(lab)
    iface = t["wireguard"][0]["name"]
    sh("ip", "-n", ns, "link", "set", iface, "mtu", "1280")
    return f"{iface} has MTU 1280"


def fault_wrong_peer_endpoint(lab):
    from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.keys import key_to_hex  # pylint: disable=import-outside-toplevel
    from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.userspace import UserspaceBackend  # pylint: disable=import-outside-toplevel
    from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.validation import (  # pylint: disable=import-outside-toplevel
        format_endpoint, split_endpoint)
    t = _gw(lab)[1]
    spec = t["wireguard"][0]
    peer = next(p for p in spec["peers"] if p.get("endpoint"))
    host, port = split_endpoint(peer["endpoint"], "endpoint")
    wrong = format_endpoint(host, port + 1 if port < 65535 else port - 1)   # the server's address, wrong port
    resp = UserspaceBackend(spec["name"]).exchange(
        f"set=1\npublic_key={key_to_hex(peer['public_key'])}\nendpoint={wrong}\n\n")
    assert "errno=0" in resp, resp
    return "peer endpoint is " + wrong


def endpoint_roamed_back(lab):
    """The gateway's peer endpoint is the planned one again: the peer's packets (its live health probe sends one
    a second) arrive from the right address and WireGuard roams to it, before any drift check."""
    from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.userspace import UserspaceBackend  # pylint: disable=import-outside-toplevel
    spec = _gw(lab)[1]["wireguard"][0]
    want = next(p for p in spec["peers"] if p.get("endpoint"))
    dev = UserspaceBackend(spec["name"]).read()
    return any(p.endpoint == want["endpoint"] for p in dev.peers.values())


# faults that WireGuard itself may undo before the drift check sees them
ROAMING = {"set a wrong peer endpoint": endpoint_roamed_back}


FAULTS = {
    "flush the gateway's nft table": fault_flush_nft,
    "delete a node's routes of table 18952": fault_delete_node_routes,
    "delete a node's policy rules": fault_delete_node_rules,
    "kill -9 the gateway's wireguard-go": fault_kill_wireguard_go,
    "delete a node's overlay link": fault_delete_overlay_link,
    "delete a rule on the gateway host": fault_delete_gateway_rule,
    "change the WireGuard MTU": fault_change_mtu,
    "set a wrong peer endpoint": fault_wrong_peer_endpoint,
    "kill -9 the gateway's health probe": fault_kill_health_probe,
}


def pod_flow(lab) -> fabric.PingFlow:
    """5 pings a second between pods of non-gateway nodes (overlay and tunnel both)."""
    a, b = lab["a"], lab["b"]
    return fabric.PingFlow(a.nodes[1].pods[0].netns, translate(b.nodes[1].pods[0].ip, b.pod_cidr, remapped(a)))


def inject_and_measure(lab, ctl, name: str, timeout: float = 60.0, settle: float = 1.0) -> dict:
    """Injects one fault under a 5 pings/s flow; returns {fault, key, trigger, detected, repaired, traffic, outage,
    lost}: seconds after the injection from the controller's JSON log (the first 'drift detected' naming it and
    what started that check, the next successful run of that key), the longest ping gap and the pings lost, counted
    until `settle` seconds after traffic came back (bench_drift's figures: a repair that breaks it again shows)."""
    wait_for(lambda: traffic(lab), 30, "traffic before the fault", interval=0.5)
    ping = pod_flow(lab)
    try:
        row = _inject(lab, ctl, name, timeout)
        time.sleep(settle)
    finally:
        lost = ping.stop()[1]
    return dict(row, outage=fabric.longest_gap(lost), lost=len(lost))


def _inject(lab, ctl, name: str, timeout: float) -> dict:
    seen = len(ctl.logs())
    t0 = time.time()
    expect = FAULTS[name](lab)

    def detected():
        for rec in ctl.logs()[seen:]:
            if rec.get("msg") == "drift detected" and expect in json.dumps(rec.get("differences")):
                return rec
        return None
    roamed = ROAMING.get(name)
    det = wait_for(lambda: detected() or (roamed is not None and roamed(lab) and "roamed"), timeout,
                   f"drift detected after '{name}' ({expect})", interval=0.2)
    if det == "roamed":
        t_det = time.time() - t0
        wait_for(lambda: traffic(lab), 30, f"traffic after '{name}'", interval=0.2)
        return {"fault": name + " (WireGuard roamed back)", "key": "-", "trigger": "-", "detected": t_det,
                "repaired": 0.0, "traffic": time.time() - t0}

    def repaired():
        after = False
        for rec in ctl.logs()[seen:]:
            if rec is det or (rec.get("msg") == "drift detected" and rec.get("ts") == det.get("ts")):
                after = True
            elif after and rec.get("msg") == "playbook done" and rec.get("key") == det.get("key"):
                return rec if rec.get("result") == "ok" else None
        return None
    rep = wait_for(repaired, timeout, f"a successful forced run after '{name}'", interval=0.2)
    wait_for(lambda: traffic(lab), 30, f"traffic after '{name}'", interval=0.2)
    t_traffic = time.time() - t0
    return {"fault": name, "key": det["key"], "trigger": det.get("trigger"), "detected": _ts(det) - t0,
            "repaired": _ts(rep) - _ts(det), "traffic": t_traffic}


def _ts(rec) -> float:
    from datetime import datetime  # pylint: disable=import-outside-toplevel
    return datetime.fromisoformat(rec["ts"].replace("Z", "+00:00")).timestamp()


def test_each_fault_is_detected_and_repaired_by_the_controller(fabric_lab):
    check_faults(fabric_lab, list(FAULTS))


def check_faults(fabric_lab, names):
    """The manifests the controller recorded declare what each host owns; each fault in `names`, injected in turn,
    is detected within the drift period and repaired by one forced run, and pod traffic resumes."""
    lab, ctl = fabric_lab
    a = lab["a"]
    gw = targets(a, "gateway")
    ov = targets(a, "overlay")
    # every built gateway and every node declared what it owns (names, rules, nft rule counts, sysctls)
    assert [t["netns"] for t in gw] == [a.gateway_nodes[0].netns], gw
    assert gw[0]["wireguard"] and gw[0]["rules"] and gw[0]["nft_tables"][0]["rules"] > 0 and gw[0]["sysctls"], gw
    assert [h["interface"] for h in gw[0]["health"]] == [w["name"] for w in gw[0]["wireguard"]], gw
    assert sorted(t["netns"] for t in ov) == sorted(n.netns for n in a.nodes), ov
    assert all(t["links"] and t["routes"] and t["rules"] for t in ov), ov
    rows = []
    for name in names:
        # what is asserted below is the detection and the repair (traffic resumed): no ping figure
        rows.append(inject_and_measure(lab, ctl, name, settle=0.0))
    if "kill -9 the gateway's health probe" in names:
        from ansible_collections.liqo.fabric.plugins.module_utils.health import daemon as phd  # pylint: disable=import-outside-toplevel
        health = _gw(lab)[1]["health"][0]
        assert phd.read_pidfile(health["state_dir"], health["interface"]), "the health probe process was not restarted"
    for r in rows:
        # found by the kernel's notification of the change (or the process exit), not by the periodic check
        assert r["key"] == "-" or r["trigger"] not in (None, "period", "resync"), r
        assert r["key"] == "-" or r["trigger"].startswith(tuple(t["netns"] for t in gw + ov)), r


def test_the_periodic_check_alone_repairs_a_fault(fabric_lab, tmp_path):
    """The safety net: a controller without kernel notifications (--no-drift-events) finds a fault at its drift
    period and repairs it."""
    lab, ctl = fabric_lab
    ctl.stop()
    alone = ControllerProc(str(tmp_path), {"a": lab["a"].kubeconfig, "b": lab["b"].kubeconfig}, "--drift-period",
                           str(DRIFT_PERIOD), "--no-drift-events", inventory=lab.inventory_path, name="periodic")
    alone.start()
    try:
        wait_for(lambda: alone.metric("liqo_fabric_leader") == 2, 60, "the controller acting on both clusters",
                 interval=0.5)
        # a fresh controller checks a key once its first run recorded the key's manifest: the fault comes after every
        # first run (a loaded machine can take a minute for them), so the period alone has to find it
        wait_for(lambda: alone.metric("liqo_fabric_drift_checks_total") > 0 and alone.metric("liqo_fabric_queue_depth") == 0
                 and alone.metric("liqo_fabric_queue_running") == 0, 240, "the controller's first runs done, its drift checks running",
                 interval=0.5)
        row = inject_and_measure(lab, alone, "flush the gateway's nft table", settle=0.0)
        assert row["trigger"] == "period", row
    finally:
        alone.stop()
        alone.reap_orphans()
        ctl.start()


def test_resync_of_a_key_without_manifest_forces_a_run(fabric_lab, tmp_path):
    """A controller whose persisted state has applied hashes but no manifests (an older controller, or
    a dataplane built by hand): the periodic resync reconciles by force, which records the manifests."""
    lab, ctl = fabric_lab
    a = lab["a"]
    ctl.stop()
    cm = json.loads(fabric.kubectl(a, "get", "configmap", "-n", "liqo", "liqo-fabric-controller-state", "-o", "json"))
    state = json.loads(cm["data"]["state.json"])
    for v in state["keys"].values():
        v["manifest"] = None
    cm["data"]["state.json"] = json.dumps(state)
    for k in ("resourceVersion", "uid", "creationTimestamp", "managedFields"):
        cm["metadata"].pop(k, None)
    fabric.kubectl(a, "replace", "-f", "-", input=yaml.safe_dump(cm))
    assert manifests(a) == {}
    ctl2 = ControllerProc(str(tmp_path), {"a": a.kubeconfig}, "--drift-period", str(DRIFT_PERIOD), "--resync-period", "3",
                          inventory=lab.inventory_path, name="resync")
    ctl2.start()
    try:
        wait_for(lambda: len(manifests(a)) >= 2, 90, "manifests recorded by resync-forced runs", interval=1)
        forced = [rec for rec in ctl2.logs() if rec.get("msg") == "playbook run"
                  and "resync: dataplane never checked (no manifest)" in json.dumps(rec.get("reasons"))]
        assert forced, ctl2.log_tail()
        wait_for(lambda: traffic(lab), 30, "traffic")
    finally:
        ctl2.stop()
        ctl2.reap_orphans()
        ctl.start()


# ------------------------------------------------------------------------------ an MTU change on both gateways
MTU_DEADLINE = 10.0   # seconds from the change to both Connections Connected at the new generation


class Ends:
    """Both ends of the connection: a's GatewayClient and b's GatewayServer, read through the API (a poll costs no
    kubectl), with their gateway host and WireGuard interface (from the controller's manifests)."""

    def __init__(self, lab):
        self.ends = []
        for cluster, kind in ((lab["a"], "GatewayClient"), (lab["b"], "GatewayServer")):
            api = Kube(cluster.kubeconfig)
            gw = api.list(kind)[0]["metadata"]
            ns, iface = next((t["netns"], t["wireguard"][0]["name"]) for t in targets(cluster, "gateway"))
            self.ends.append((cluster.name, api, kind, gw["namespace"], gw["name"], ns, iface))

    def set_mtu(self, mtu):
        for _c, api, kind, namespace, name, _ns, _if in self.ends:
            api.patch(kind, namespace, name, {"spec": {"mtu": mtu}})

    def state(self) -> list:
        out = []
        for cluster, api, kind, namespace, name, ns, iface in self.ends:
            gw = api.get(kind, namespace, name)
            conn = (api.get("Connection", namespace, name) or {}).get("status") or {}
            cond = next((c for c in conn.get("conditions", []) if c["type"] == "Established"), {})
            link = sh("ip", "-n", ns, "-j", "link", "show", iface, check=False).stdout
            out.append({"cluster": cluster, "spec.mtu": gw["spec"].get("mtu"), "generation": gw["metadata"]["generation"],
                        "link.mtu": json.loads(link)[0]["mtu"] if link.strip() else None, "value": conn.get("value"),
                        "observedGeneration": cond.get("observedGeneration"), "reason": cond.get("reason"),
                        "message": cond.get("message")})
        return out

    def settled(self, mtu) -> bool:
        """Both ends run `mtu` (spec and interface), Connected with the Established condition of that generation."""
        return all(e["spec.mtu"] == mtu and e["link.mtu"] == mtu and e["value"] == "Connected"
                   and e["observedGeneration"] == e["generation"] for e in self.state())


def _pod_pings(lab, size: int) -> tuple:
    """(a -> b, b -> a): don't-fragment pings of `size` payload bytes between pods of non-gateway nodes."""
    a, b = lab["a"], lab["b"]
    pa, pb = a.nodes[1].pods[0], b.nodes[1].pods[0]
    return (a.ping(pa.netns, translate(pb.ip, b.pod_cidr, remapped(a)), count=3, size=size),
            b.ping(pb.netns, translate(pa.ip, a.pod_cidr, remapped(b)), count=3, size=size))


def _forget_path_mtus(lab) -> None:
    """The pods learned a smaller path MTU from the gateways' ICMP 'fragmentation needed' (kept 10 min): forgotten,
    so that they use a larger MTU at once."""
    for c in (lab["a"], lab["b"]):
        sh("ip", "netns", "exec", c.nodes[1].pods[0].netns, "ip", "route", "flush", "cache")


def test_an_mtu_change_on_both_gateways_reconverges(fabric_lab):
    """spec.mtu 1340 -> 1300 -> 1340 on both gateways of the live connection, nobody running a playbook: each way
    both Connections are Connected again at the gateways' new generation within MTU_DEADLINE, the WireGuard
    interfaces at the new MTU; at 1300 pods ping each other across with 1,250-byte don't-fragment pings while
    1,320- and 1,400-byte ones do not pass; at 1340 the 1,320-byte ones pass again."""
    lab, ctl = fabric_lab
    ends = Ends(lab)

    def idle():
        return all(ctl.metric(m) == 0 for m in ("liqo_fabric_queue_depth", "liqo_fabric_queue_running"))

    def change(mtu):
        # on a quiet controller: the runs the previous change started on both sides (the rewritten PublicKeys
        # rerun both gateways once more) are over
        wait_for(lambda: idle() and (time.sleep(0.5) or idle()), 60, "the controller idle", interval=0.2)
        ends.set_mtu(mtu)
        try:
            wait_for(lambda: ends.settled(mtu), MTU_DEADLINE, f"both Connections Connected at MTU {mtu}", interval=0.2)
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {ends.state()}") from None

    assert ends.settled(1340), ends.state()
    assert _pod_pings(lab, 1292) == (True, True)            # 1,320-byte packets fit the 1340 tunnel
    try:
        change(1300)
        assert _pod_pings(lab, 1250) == (True, True), ends.state()
        assert _pod_pings(lab, 1292) == (False, False)
        assert _pod_pings(lab, 1400) == (False, False)
    finally:
        change(1340)
    _forget_path_mtus(lab)
    assert _pod_pings(lab, 1292) == (True, True)


# ------------------------------------------------------------------------------ unreadable -> Degraded
def test_unreadable_namespace_is_degraded_not_silent(fabric_lab, engine_map, tmp_path):  # noqa: F811
    """The test playbook declares a route in a netns; the netns disappears: the GatewayServer turns
    Degraded (DriftCheckFailed, naming the namespace), and Ready again once the namespace is back.
    On cluster a of the module's lab (its gateway is a GatewayClient: drift2 is the only GatewayServer there), served
    by an engine controller with the test watch map while the module's controller is stopped."""
    lab, main = fabric_lab
    kube = Kube(lab["a"].kubeconfig)

    def idle():
        return all(main.metric(m) == 0 for m in ("liqo_fabric_queue_depth", "liqo_fabric_queue_running"))
    # stopped between runs (the tests before may have left some going), so that its restart has nothing to redo
    wait_for(lambda: idle() and (time.sleep(0.5) or idle()), 120, "the module's controller idle", interval=0.2)
    main.stop()
    main.reap_orphans()
    ctl = ControllerProc(str(tmp_path), {"a": lab["a"].kubeconfig}, "--watches", engine_map["path"], "--playbook-dir",
                         fabric.ROOT + "/tests/e2e/controller_playbooks", "--no-state", name="unreadable")
    try:
        ctl.start()
        kube.create(gateway_server("drift2", cluster_id="d2"))
        try:
            wait_for(lambda: (kube.condition("GatewayServer", "default", "drift2", "Ready") or {}).get("status") == "True",
                     30, "drift2 Ready")
            wait_for(lambda: ctl.metric("liqo_fabric_drift_checks_total") >= 1, 10, "a drift check")
            ns = engine_map["netns"]
            subprocess.run(["ip", "netns", "del", ns], check=True)

            def degraded():
                c = kube.condition("GatewayServer", "default", "drift2", "Degraded") or {}
                return c.get("status") == "True" and c.get("reason") == "DriftCheckFailed" and c
            cond = wait_for(degraded, 15, "Degraded DriftCheckFailed")
            assert f"{ns}: network namespace is missing" in cond["message"], cond
            assert ctl.metric("liqo_fabric_drift_check_failures_total") >= 1
            subprocess.run(["ip", "netns", "add", ns], check=True)
            subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
            # readable again: the route is missing -> drift -> the forced run rebuilds it -> Ready
            wait_for(lambda: (kube.condition("GatewayServer", "default", "drift2", "Ready") or {}).get("status") == "True",
                     20, "drift2 Ready again")
            wait_for(lambda: "10.99.0.0/24" in subprocess.run(["ip", "-n", ns, "route", "show", "table", "18952"],
                                                              capture_output=True, text=True, check=False).stdout,
                     20, "route rebuilt")
        finally:
            kube.delete("GatewayServer", "default", "drift2")
            wait_for(lambda: kube.get("GatewayServer", "default", "drift2") is None, 30, "drift2 deleted")
    finally:
        ctl.stop()
        ctl.reap_orphans()
        main.start()
