"""Pure parts of drift repair: the manifests the dataplane modules return, the newest overlay target winning
across keys, the period overrides of the CLI."""
from __future__ import annotations

import json
import os
import types

import pytest

from controller import drift, manifest, watchmap
from controller.__main__ import override_periods
from controller.engine.record import supersede
from controller.engine.run import full_apply
from tests.unit.test_controller_engine import ROOT

from ansible_collections.liqo.fabric.plugins.module_utils.gateway import dataplane as gd  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.health import daemon as phd  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.host import manifest as dm  # noqa: E402


def test_overlay_manifest_from_the_plan_and_result():
    plan = {"links": [{"name": "lovg1", "type": "vxlan", "vni": 7, "mtu": 1450}],
            "routes": [{"dst": "10.72.0.0/16", "dev": "lovg1"}, {"dst": "10.71.0.0/16", "dev": "lovg1"}],
            "rules": [{"priority": 1900, "to": "10.72.0.0/16"}], "bypass": [{"saddr": "10.243.0.0/16"}]}
    m = dm.overlay(plan, 18952, {"nat": {"rules": 2}}, "liqo_fabric_overlay")
    assert m["kind"] == "overlay" and "boot_id" in m
    assert m["links"] == [{"name": "lovg1", "mtu": 1450}]
    assert m["routes"] == [{"table": 18952, "dst": ["10.71.0.0/16", "10.72.0.0/16"]}]
    assert m["rules"] == [{"table": 18952, "line": "1900: from all to 10.72.0.0/16 lookup 18952"}]
    assert m["nft_tables"] == [{"family": "ip", "name": "liqo_fabric_overlay", "rules": 2}]
    assert dm.overlay({}, 18952, {}, "liqo_fabric_overlay")["nft_tables"] == []


def test_gateway_manifest_covers_only_built_gateways():
    gw = {"interface": "lfab1", "mtu": 1340, "listen_port": 51820, "table": 1001, "nat_table": "lfgw_1",
          "mark": 1001, "rule_priority": 1001, "nat_tunnel": {"remote_remapped": "10.72.0.0/16"},
          "peer": {"public_key": "k=", "endpoint": "172.30.0.2:31000"}}
    other = dict(gw, interface="lfab2", nat_table="lfgw_2", table=1002)
    result = {"gateways": [{"interface": "lfab1", "nat": {"rules": 4}}]}
    m = dm.gateway([gw, other], result, gd._rules, gd._routes, gd.SYSCTLS)  # pylint: disable=protected-access
    assert [w["name"] for w in m["wireguard"]] == ["lfab1"]
    assert m["wireguard"][0]["peers"] == [{"public_key": "k=", "endpoint": "172.30.0.2:31000"}]
    assert m["nft_tables"] == [{"family": "ip", "name": "lfgw_1", "rules": 4}]
    assert m["routes"] == [{"table": 1001, "dst": ["0.0.0.0/0"]}]
    assert [r["line"] for r in m["rules"]] == ["1001: from all fwmark 0x3e9 lookup 1001",
                                               "1002: from all to 10.72.0.0/16 lookup 1001"]
    assert m["sysctls"] == dict(gd.SYSCTLS)


def test_where_and_the_check_agree_on_the_callers_namespace():
    w = dm.where()
    assert w["netns"] is None and w["boot_id"]
    # with or without the inode (/proc/1 unreadable in some sandboxes), the controller reads its own namespace
    assert drift.dataplane([dict(w, kind="overlay", links=[{"name": "lo"}])]) == []
    other = drift.dataplane([dict(w, netns_inode=1, links=["lo"])])
    assert drift.failures(other) == other and "unnamed network namespace" in other[0]


def test_newest_overlay_target_replaces_older_ones_in_other_keys():
    old = {"kind": "overlay", "netns": "n1", "boot_id": "b", "routes": [{"table": 18952, "dst": ["10.1.0.0/16"]}]}
    other_node = {"kind": "overlay", "netns": "n2", "boot_id": "b"}
    gw = {"kind": "gateway", "netns": "n1", "boot_id": "b"}
    cs = types.SimpleNamespace(manifests={"a/overlay": [old, other_node], "a/GatewayServer/x/y": [gw]})
    new = dict(old, routes=[{"table": 18952, "dst": ["10.1.0.0/16", "10.2.0.0/16"]}])
    supersede(cs, "a/GatewayServer/x/y", [gw, new])
    assert cs.manifests["a/overlay"] == [new, other_node]
    assert cs.manifests["a/GatewayServer/x/y"] == [gw]      # the run's own key keeps what it stored


def test_check_failures_are_told_apart_from_drift():
    diffs = ["host: link x is missing", drift.CheckFailure("n1: network namespace is missing")]
    assert drift.failures(diffs) == ["n1: network namespace is missing"]
    assert drift.dataplane([{"kind": "gateway", "netns": "nope-" + os.urandom(3).hex()}], kind="overlay") == []


def test_period_overrides_apply_to_entries_that_have_one():
    entries = watchmap.load(watchmap.DEFAULT_PATH, os.path.join(ROOT, "playbooks"))
    out = override_periods(entries, drift_period=2, resync_period=5)
    assert {e.kind: e.drift.period for e in out if e.drift} == {"GatewayServer": 2, "GatewayClient": 2, "Node": 2}
    assert all(e.resync == 5 for e in out if e.playbook)
    with pytest.raises(SystemExit, match="--drift-period: 0.5 is below the 1 s minimum"):
        override_periods(entries, drift_period=0.5)


def test_health_probe_process_alive_or_named(tmp_path):
    """A gateway host's live probe process is part of what the gateway role declares; the drift check
    names one that is not running (no pid file, or a pid file of a dead or reused pid)."""
    target = {"kind": "gateway", "health": [{"state_dir": str(tmp_path), "interface": "lwg0"}]}
    assert drift.check_target(target) == ["host: the health probe process of lwg0 is not running"]
    pid_path = phd.paths(str(tmp_path), "lwg0")[0]
    with open(pid_path, "w", encoding="utf-8") as f:
        json.dump({"pid": os.getpid(), "start": phd._start_time(os.getpid()), "config": "x"}, f)
    assert drift.check_target(target) == []
    with open(pid_path, "w", encoding="utf-8") as f:  # the pid now names another process
        json.dump({"pid": os.getpid(), "start": "1", "config": "x"}, f)
    assert drift.check_target(target) == ["host: the health probe process of lwg0 is not running"]


def test_a_partial_runs_targets_replace_theirs_and_keep_the_others():
    n1 = {"kind": "overlay", "netns": "n1", "boot_id": "b", "routes": []}
    n2 = {"kind": "overlay", "netns": "n2", "boot_id": "b"}
    new_n1 = dict(n1, routes=[{"table": 18952, "dst": ["10.243.1.2/32"]}])
    assert manifest.merge_targets([n1, n2], [new_n1]) == [n2, new_n1]
    assert manifest.partial({"fabric_dataplane_partial": True}) and manifest.partial({"fabric_dataplane_partial": "True"})
    assert not manifest.partial({"fabric_dataplane_partial": False}) and not manifest.partial({})


def _engine_stub(manifests):
    entries = watchmap.parse([{"kind": "Node", "playbook": "/dev/null", "key": "{cluster}/overlay",
                               "drift": {"function": "controller.drift:overlay", "period": 30}},
                              {"kind": "Pod", "playbook": "/dev/null", "key": "{cluster}/overlay"}], None)
    eng = types.SimpleNamespace(by_kind={e.kind: e for e in entries})
    cs = types.SimpleNamespace(lock=__import__("threading").RLock(), manifests=manifests)
    return eng, cs


@pytest.mark.parametrize("force, stored, reasons, full", [
    (False, True, {"added Pod/default/p1", "modified Pod/default/p2"}, False),   # an event: only what changed
    (True, True, {"drift: route missing"}, True),                               # forced: drift, retry
    (False, False, {"added Pod/default/p1"}, True),                             # no manifest yet: record all
    (False, True, {"deleted Pod/default/p1"}, False),                           # a pod owns no target
    (False, True, {"deleted Node/n3"}, True),                                   # a node's target must go
])
def test_full_apply_only_when_forced_unrecorded_or_a_target_owner_left(force, stored, reasons, full):
    eng, cs = _engine_stub({"a/overlay": []} if stored else {})
    item = types.SimpleNamespace(key="a/overlay", force=force, reasons=reasons)
    assert full_apply(eng.by_kind, cs, item) is full


def test_drift_events_are_on_by_default_and_switched_off_by_the_flag_or_the_watch_map():
    entries = watchmap.load(watchmap.DEFAULT_PATH, os.path.join(ROOT, "playbooks"))
    assert all(e.drift.events for e in entries if e.drift)
    assert not any(e.drift.events for e in override_periods(entries, drift_events=False) if e.drift)
    (entry,) = watchmap.parse([{"kind": "Node", "playbook": "/dev/null",
                                "drift": {"function": "controller.drift:overlay", "events": False}}], None)
    assert entry.drift.events is False
    with pytest.raises(watchmap.WatchMapError, match=r"watches\[0\].drift.events: 'yes' must be true or false"):
        watchmap.parse([{"kind": "Node", "playbook": "/dev/null",
                         "drift": {"function": "controller.drift:overlay", "events": "yes"}}], None)
    with pytest.raises(watchmap.WatchMapError, match=r"unknown key\(s\) \['perod'\]"):
        watchmap.parse([{"kind": "Node", "playbook": "/dev/null",
                         "drift": {"function": "controller.drift:overlay", "perod": 3}}], None)


def test_watch_points_are_the_namespaces_this_process_can_read(tmp_path, monkeypatch):
    """Named namespaces that exist, this process's own (no netns, or its inode), never another machine's or another
    unnamed namespace; with the processes whose exit is a fault (a live health probe)."""
    monkeypatch.setattr(drift, "NETNS_DIR", str(tmp_path))
    (tmp_path / "n1").write_text("")
    boot = drift._boot_id()
    own = drift._own_netns_inode()
    health = {"state_dir": str(tmp_path / "health"), "interface": "lwg0"}
    os.makedirs(health["state_dir"])
    with open(phd.paths(health["state_dir"], "lwg0")[0], "w", encoding="utf-8") as f:
        json.dump({"pid": os.getpid(), "start": phd._start_time(os.getpid()), "config": "x"}, f)
    manifest = [{"kind": "overlay", "netns": "n1", "boot_id": boot},
                {"kind": "overlay", "netns": "gone", "boot_id": boot},
                {"kind": "gateway", "boot_id": boot, "netns_inode": own, "health": [health]},
                {"kind": "overlay", "boot_id": "another-machine"},
                {"kind": "overlay", "netns_inode": own + 1},
                {"kind": "overlay", "host": "remote.example"}]
    assert drift.watch_points(manifest) == {"n1": {}, None: {os.getpid(): "the health probe of lwg0"}}
    assert drift.watch_points(manifest, with_pids=False) == {"n1": {}, None: {}}


class _Queue:
    def __init__(self, busy=()):
        self._busy = set(busy)

    def busy(self, key):
        return key in self._busy


def _fault_engine(manifests, busy=()):
    """An engine of one cluster with an overlay key and a gateway key, whose drift checks are recorded."""
    from controller.engine.drift_check import DriftChecks  # pylint: disable=import-outside-toplevel
    book = os.path.join(ROOT, "playbooks", "reconcile_overlay.yml")
    entries = watchmap.parse([{"kind": "Node", "playbook": book, "key": "{cluster}/overlay",
                               "drift": {"function": "controller.drift:overlay", "period": 30}},
                              {"kind": "GatewayServer", "playbook": book,
                               "drift": {"function": "controller.drift:gateway", "period": 30, "events": False}}],
                             None)
    assert all(e.enabled for e in entries), entries
    cs = types.SimpleNamespace(name="a", lock=__import__("threading").RLock(), manifests=manifests,
                               applied=set(manifests), failures={}, acting=lambda: True,
                               key_entry={"a/overlay": entries[0], "a/GatewayServer/ns/gw": entries[1]})
    checked = []
    eng = types.SimpleNamespace(entries=entries, clusters={"a": cs}, queue=_Queue(busy))
    eng.drift = DriftChecks(eng)
    eng.drift.check = lambda c, e, keys=None, trigger="period": checked.append((e.kind, keys, trigger)) or 0
    return eng, checked


def test_a_notification_checks_the_keys_of_its_namespace_with_events_on(tmp_path, monkeypatch):
    from controller.engine.fault_events import FaultEvents  # pylint: disable=import-outside-toplevel
    monkeypatch.setattr(drift, "NETNS_DIR", str(tmp_path))
    for ns in ("n1", "n2"):
        (tmp_path / ns).write_text("")
    manifests = {"a/overlay": [{"kind": "overlay", "netns": "n1"}, {"kind": "overlay", "netns": "n2"}],
                 "a/GatewayServer/ns/gw": [{"kind": "gateway", "netns": "n1"}]}
    eng, checked = _fault_engine(manifests)
    faults = FaultEvents(eng)
    assert set(faults.wanted()) == {"n1", "n2"}
    faults.check("n1", "route deleted")
    # the gateway entry has events off: its key waits for its period
    assert checked == [("Node", ["a/overlay"], "n1: route deleted")]
    assert not faults.pending


def test_a_notification_during_a_run_of_its_key_is_checked_again_after(tmp_path, monkeypatch):
    from controller.engine.fault_events import FaultEvents  # pylint: disable=import-outside-toplevel
    monkeypatch.setattr(drift, "NETNS_DIR", str(tmp_path))
    (tmp_path / "n1").write_text("")
    eng = _fault_engine({"a/overlay": [{"kind": "overlay", "netns": "n1"}]}, busy={"a/overlay"})[0]
    faults = FaultEvents(eng)
    faults.check("n1", "link deleted")
    assert list(faults.pending) == ["n1"]


def test_a_burst_of_notifications_is_one_check_and_a_namespace_waits_its_interval():
    from controller.engine import fault_events as fe  # pylint: disable=import-outside-toplevel
    eng = types.SimpleNamespace(entries=[], clusters={})
    faults = fe.FaultEvents(eng)
    for _burst in range(50):
        faults._notified("n1", "route deleted")
    now = __import__("time").monotonic()
    assert faults._due(now) == ([], pytest.approx(fe.SETTLE, abs=0.05))
    due = faults._due(now + fe.SETTLE)[0]
    assert due == [("n1", "route deleted")]
    faults._notified("n1", "rule deleted")
    due, wait = faults._due(now + fe.SETTLE + 0.2)
    assert due == [] and wait == pytest.approx(fe.MIN_INTERVAL - 0.2, abs=0.01)
    assert faults._due(now + fe.SETTLE + fe.MIN_INTERVAL)[0] == [("n1", "rule deleted")]
