"""Pure parts of the controller: work queue, watch map, conditions merge, hashes, durations, logs."""
from __future__ import annotations

import dataclasses
import io
import json
import logging
import os
import threading

import pytest
from hypothesis import given, strategies as st

from controller import hashing, logs, modes, watchmap
from controller.engine import informers
from controller.engine.inputs import applied_repr
from controller.metrics import parse_duration_us
from controller.runner import RunResult
from controller.status import desired_conditions, merge_conditions, reason_word
from controller.workqueue import PRIO_DRIFT, PRIO_EVENT, PRIO_RESYNC, WorkQueue

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


# ------------------------------------------------------------------------------------------ work queue
def test_events_for_one_key_coalesce_and_debounce():
    clk = Clock()
    q = WorkQueue(debounce=0.2, clock=clk)
    for i in range(10):
        q.add("k", reason=f"e{i}")
        clk.t += 0.05
    assert q.depth() == 1
    assert q.get(timeout=0) is None          # still inside the (re-armed) debounce window
    clk.t += 0.2
    item = q.get(timeout=0)
    assert item.key == "k" and len(item.reasons) == 10


def test_burst_is_dispatched_after_max_delay():
    clk = Clock()
    q = WorkQueue(debounce=0.2, max_delay=1.0, clock=clk)
    q.add("k")
    for _step in range(30):               # an event every 0.1 s forever would starve a pure trailing debounce
        clk.t += 0.1
        q.add("k")
        if q.get(timeout=0):
            break
    assert clk.t - 1000.0 <= 1.05


def test_priority_changes_before_drift_before_resync():
    clk = Clock()
    q = WorkQueue(debounce=0.0, clock=clk)
    q.add("resync", priority=PRIO_RESYNC)
    q.add("drift", priority=PRIO_DRIFT)
    q.add("event", priority=PRIO_EVENT)
    order = [q.get(timeout=0).key for _n in range(3)]
    assert order == ["event", "drift", "resync"]


def test_resync_upgraded_to_event_priority():
    clk = Clock()
    q = WorkQueue(debounce=0.0, clock=clk)
    q.add("a", priority=PRIO_RESYNC)
    q.add("b", priority=PRIO_RESYNC)
    clk.t += 1
    q.add("b", priority=PRIO_EVENT)
    assert q.get(timeout=0).key == "b"


def test_key_never_runs_twice_and_event_during_run_is_kept():
    clk = Clock()
    q = WorkQueue(debounce=0.0, clock=clk)
    q.add("k")
    first = q.get(timeout=0)
    q.add("k", reason="while running")
    assert q.get(timeout=0) is None          # k is running
    q.done(first)
    again = q.get(timeout=0)
    assert again.key == "k" and "while running" in again.reasons


def test_one_run_per_lock_key_others_proceed():
    clk = Clock()
    q = WorkQueue(debounce=0.0, clock=clk)
    q.add("gw1", lock="host")
    q.add("gw2", lock="host")
    q.add("other", lock="elsewhere")
    a = q.get(timeout=0)
    b = q.get(timeout=0)
    assert {a.key, b.key} == {"gw1", "other"}
    assert q.get(timeout=0) is None           # gw2 waits for the host lock
    q.done(a)
    assert q.get(timeout=0).key == "gw2"


def test_delay_and_eligibility():
    clk = Clock()
    q = WorkQueue(debounce=0.0, clock=clk)
    q.add("retry", priority=PRIO_RESYNC, delay=5.0, force=True, attempts=2)
    q.add("other-cluster", cluster="b")
    assert q.get(timeout=0, eligible=lambda it: it.cluster != "b") is None
    clk.t += 5
    item = q.get(timeout=0, eligible=lambda it: it.cluster != "b")
    assert item.key == "retry" and item.force and item.attempts == 2


def test_blocking_get_wakes_on_add_and_close():
    q = WorkQueue(debounce=0.0)
    got = []
    t = threading.Thread(target=lambda: got.append(q.get(timeout=5)))
    t.start()
    q.add("x")
    t.join(5)
    assert got and got[0].key == "x"
    t = threading.Thread(target=lambda: got.append(q.get(timeout=5)))
    t.start()
    q.close()
    t.join(5)
    assert got[-1] is None


# ------------------------------------------------------------------------------------------ watch map
def test_shipped_watch_map_loads():
    entries = {e.kind: e for e in watchmap.load(watchmap.DEFAULT_PATH)}
    conf = entries["Configuration"]
    assert conf.enabled and conf.grouped and conf.status
    assert conf.work_key("a", {"metadata": {"name": "x", "namespace": "n"}}) == "a/ipam"
    assert entries["Node"].key == entries["Pod"].key == "{cluster}/overlay"
    gw = entries["GatewayServer"]
    assert gw.lock_key("a", {"metadata": {"name": "s"}}) == "a/gateway-host"
    assert [r.kind for r in gw.related] == ["PublicKey", "Configuration", "WgGatewayServerTemplate"]
    assert gw.drift.call is not None and gw.finalizer
    assert gw.related[0].namespace and not gw.related[0].labels   # PublicKeys: either labelling (the seeds' or Liqo's)


def test_public_keys_of_the_namespace_relate_to_its_gateways_whatever_their_label():
    """A PublicKey labelled with this cluster's id (the seeds) enqueues the gateways of its namespace."""
    import types  # pylint: disable=import-outside-toplevel
    from controller.engine.relations import related_owners  # pylint: disable=import-outside-toplevel
    gw = {e.kind: e for e in watchmap.load(watchmap.DEFAULT_PATH)}["GatewayServer"]
    owners = {"ns1/s": {"metadata": {"name": "s", "namespace": "ns1", "labels": {"liqo.io/remote-cluster-id": "peer"}}},
              "ns2/t": {"metadata": {"name": "t", "namespace": "ns2", "labels": {"liqo.io/remote-cluster-id": "peer"}}}}
    cs = types.SimpleNamespace(informers={"GatewayServer": types.SimpleNamespace(cache=owners)})
    pk = {"metadata": {"name": "k", "namespace": "ns1", "labels": {"liqo.io/remote-cluster-id": "this-cluster"}}}
    rels = [r for r in gw.related if r.kind == "PublicKey"]
    hits = related_owners(cs, gw, rels, pk, None)
    assert [h["metadata"]["name"] for h in hits] == ["s"]


def test_the_node_agents_daemonset_relates_to_every_gateway_in_controller_mode():
    """In the cluster, a DaemonSet event (the node agents' roll) reaches every gateway of any namespace, and only the
    rollout's fields enter their hash: a gateway's roll waits for the agents' (module_utils/gateway/rollout.py)."""
    import types  # pylint: disable=import-outside-toplevel
    from controller.engine.inputs import Inputs  # pylint: disable=import-outside-toplevel
    from controller.engine.relations import related_owners  # pylint: disable=import-outside-toplevel
    entries = watchmap.load(os.path.join(os.path.dirname(watchmap.DEFAULT_PATH), "watches-in-cluster.yaml"))
    ds_entry = next(e for e in entries if e.kind == "DaemonSet")
    assert ds_entry.modes == ("controller",) and ds_entry.label_selector == "app.kubernetes.io/name=liqo-fabric-node-agent"
    gws = [e for e in entries if e.kind in ("GatewayServer", "GatewayClient") and "controller" in e.modes]
    assert len(gws) == 2 and all(any(r.kind == "DaemonSet" and r.all for r in g.related) for g in gws)
    assert not [e for e in entries if "controller" not in e.modes and any(r.kind == "DaemonSet" for r in e.related)]
    owners = {f"ns{i}/gw": {"metadata": {"name": "gw", "namespace": f"ns{i}", "uid": str(i), "resourceVersion": "1"}}
              for i in (1, 2)}
    ds = {"metadata": {"name": "agents", "namespace": "liqo", "uid": "d", "resourceVersion": "5", "generation": 2},
          "status": {"observedGeneration": 2, "desiredNumberScheduled": 3, "updatedNumberScheduled": 1,
                     "numberAvailable": 2, "numberReady": 2}}
    cs = types.SimpleNamespace(informers={"GatewayServer": types.SimpleNamespace(cache=owners),
                                          "DaemonSet": types.SimpleNamespace(cache={"liqo/agents": ds})},
                               hash_memo={}, epoch=0)
    gw = gws[0]
    rels = [r for r in gw.related if r.kind == "DaemonSet"]
    assert sorted(h["metadata"]["namespace"] for h in related_owners(cs, gw, rels, ds, None)) == ["ns1", "ns2"]
    inputs = Inputs(types.SimpleNamespace(role_version="v"))
    before = inputs.member_hash(cs, gw, owners["ns1/gw"])
    ds["status"]["numberReady"] = 3                     # not an input: no rerun
    cs.epoch += 1
    assert inputs.member_hash(cs, gw, owners["ns1/gw"]) == before
    ds["status"].update(updatedNumberScheduled=3, numberAvailable=3)   # rolled out: the gateway reruns
    cs.epoch += 1
    assert inputs.member_hash(cs, gw, owners["ns1/gw"]) != before


@pytest.mark.parametrize("raw,field", [
    ({"kind": "Nope"}, "watches[0].kind"),
    ({"kind": "Configuration", "key": "{name}"}, "watches[0].key"),
    ({"kind": "Configuration", "key": "{cluster}/{bogus}"}, "watches[0].key"),
    ({"kind": "Configuration", "resync": -1}, "watches[0].resync"),
    ({"kind": "PublicKey", "status": True}, "watches[0].status"),
    ({"kind": "Configuration", "vars": {"kubeconfig": "x"}}, "watches[0].vars"),
    ({"kind": "Configuration", "related": [{"kind": "PublicKey"}]}, "watches[0].related[0]"),
    ({"kind": "Configuration", "related": [{"kind": "PublicKey", "labels": ["a"], "ref": "spec.x"}]}, "watches[0].related[0]"),
    ({"kind": "GatewayServer", "related": [{"kind": "PublicKey", "namespace": "yes"}]}, "watches[0].related[0].namespace"),
    ({"kind": "GatewayServer", "related": [{"kind": "PublicKey", "namespace": True, "labels": ["a"]}]}, "watches[0].related[0]"),
    ({"kind": "GatewayServer", "related": [{"kind": "Node", "namespace": True}]}, "watches[0].related[0].namespace"),
    ({"kind": "GatewayServer", "related": [{"kind": "DaemonSet", "all": "yes"}]}, "watches[0].related[0].all"),
    ({"kind": "GatewayServer", "related": [{"kind": "DaemonSet", "all": True, "namespace": True}]}, "watches[0].related[0]"),
    ({"kind": "Configuration", "drift": {"function": "nowhere.mod:fn"}}, "watches[0].drift.function"),
    ({"kind": "Configuration", "finalizer": "a.io/x"}, "watches[0].finalizer"),
    ({"kind": "Configuration", "modes": ["server"]}, "watches[0].modes"),
    ({"kind": "Configuration", "surprise": 1}, "watches[0]"),
])
def test_watch_map_errors_name_the_field(raw, field):
    with pytest.raises(watchmap.WatchMapError) as exc:
        watchmap.parse([raw], None)
    assert str(exc.value).startswith(field), str(exc.value)


def test_missing_playbook_disables_entry(tmp_path):
    (e,) = watchmap.parse([{"kind": "Configuration", "playbook": "absent.yml"}], str(tmp_path))
    assert not e.enabled and "absent.yml" in e.disabled_reason


def test_group_with_finalizer_rejected(tmp_path):
    (tmp_path / "p.yml").write_text("[]")
    with pytest.raises(watchmap.WatchMapError, match="finalizer"):
        watchmap.parse([{"kind": "GatewayServer", "playbook": "p.yml", "key": "{cluster}/gw", "finalizer": "a.io/b",
                         "finalizer_playbook": "p.yml"}], str(tmp_path))


def test_get_field():
    obj = {"spec": {"secretRef": {"name": "s"}}, "metadata": {"labels": {"a": "b"}}}
    assert watchmap.get_field(obj, "spec.secretRef.name") == "s"
    assert watchmap.get_field(obj, "spec.nothing.deeper") is None
    assert watchmap.RESOURCES["PublicKey"].path("ns", "k") == "/apis/networking.liqo.io/v1beta1/namespaces/ns/publickeies/k"
    assert watchmap.RESOURCES["Node"].path(None, "n1", "status") == "/api/v1/nodes/n1/status"


# ------------------------------------------------------------------------------------------ conditions
def test_merge_keeps_foreign_conditions_and_order():
    current = [{"type": "NetworkCIDRsConfigured", "status": "True", "reason": "Allocated", "message": "m",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    out, changed, trans = merge_conditions(current, desired_conditions("ready", 3), 3, now="2026-02-02T00:00:00Z")
    assert changed and out[0] == current[0]
    assert [c["type"] for c in out] == ["NetworkCIDRsConfigured", "Ready", "Reconciling", "Degraded"]
    assert all(c["observedGeneration"] == 3 for c in out[1:])
    assert ("Ready", None, "True") in trans


def test_merge_transition_time_moves_only_on_status_flip():
    base = merge_conditions([], desired_conditions("ready", 1), 1, now="T1")[0]
    same, changed, trans = merge_conditions(base, desired_conditions("ready", 1), 1, now="T2")
    assert not changed and not trans and same == base
    newgen, changed, trans = merge_conditions(base, desired_conditions("ready", 2), 2, now="T3")
    assert changed and not trans and {c["lastTransitionTime"] for c in newgen} == {"T1"}
    bad, changed, trans = merge_conditions(base, desired_conditions("degraded", 2, "task 'x' failed: spec.mtu"), 2, now="T4")
    ready = next(c for c in bad if c["type"] == "Ready")
    assert ready["status"] == "False" and ready["lastTransitionTime"] == "T4" and "spec.mtu" in ready["message"]
    assert ("Degraded", "False", "True") in trans


@given(st.text(max_size=40))
def test_reason_word_is_always_valid(text):
    import re  # pylint: disable=import-outside-toplevel
    assert re.fullmatch(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?", reason_word(text))


# ------------------------------------------------------------------------------------------ hashes
def test_digest_is_order_independent_for_maps_and_secret_digest_hides_data():
    assert hashing.digest({"a": 1, "b": [1, 2]}) == hashing.digest({"b": [1, 2], "a": 1})
    assert hashing.digest([1, 2]) != hashing.digest([2, 1])
    d = hashing.secret_digest({"type": "Opaque", "data": {"privateKey": "c2VjcmV0"}})
    assert "c2VjcmV0" not in d and d != hashing.secret_digest({"type": "Opaque", "data": {"privateKey": "b3RoZXI="}})
    assert hashing.secret_digest(None) is None


def test_role_version_changes_with_a_role_file(tmp_path):
    (tmp_path / "roles" / "r" / "tasks").mkdir(parents=True)
    (tmp_path / "playbooks").mkdir()
    f = tmp_path / "roles" / "r" / "tasks" / "main.yml"
    f.write_text("- debug: {}\n")
    v1 = hashing.role_version(str(tmp_path))
    assert hashing.role_version(str(tmp_path)) == v1
    f.write_text("- debug: {msg: x}\n")
    assert hashing.role_version(str(tmp_path)) != v1


# ------------------------------------------------------------------------------------------ misc
@pytest.mark.parametrize("text,us", [("1.2ms", 1200.0), ("850µs", 850.0), ("850us", 850.0), ("1m2.5s", 62_500_000.0),
                                     ("3s", 3e6), ("", None), (None, None), ("12", None), ("1.2 ms", None)])
def test_parse_duration_us(text, us):
    assert parse_duration_us(text) == us


def test_run_result_message_names_task_and_host():
    r = RunResult(ok=False, status="failed", rc=2, duration=1.0, spawn_seconds=0.3, failed_task="Validate spec.mtu",
                  failed_host="gw1", failed_msg="spec.mtu: 42 is too small")
    assert r.message == "task 'Validate spec.mtu' on gw1 failed: spec.mtu: 42 is too small"
    assert RunResult(ok=True, status="successful", rc=0, duration=1, spawn_seconds=0.2, changed=3).message == \
        "applied (3 changed task(s))"


def test_json_logs():
    buf = io.StringIO()
    logs.setup("info", stream=buf)
    logging.getLogger("controller.test").info("hello", extra={"fields": {"cluster": "a", "n": 2}})
    rec = json.loads(buf.getvalue().strip().splitlines()[-1])
    assert rec["msg"] == "hello" and rec["cluster"] == "a" and rec["n"] == 2 and rec["level"] == "info"
    logging.getLogger().handlers[:] = []


def test_node_and_pod_caches_keep_only_the_fields_the_watch_map_reads():
    from controller.engine.informers import slim_transform  # pylint: disable=import-outside-toplevel
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "namespace": "default", "uid": "u", "resourceVersion": "7", "labels": {"app": "x"},
                        "annotations": {"big": "x" * 1000}, "ownerReferences": [{"kind": "ReplicaSet"}]},
           "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}], "volumes": [{"name": "v"}]},
           "status": {"podIP": "10.0.0.2", "hostIP": "172.30.0.2", "conditions": [{"type": "Ready"}]}}
    inputs = ["spec.nodeName", "status.podIP", "status.hostIP", "status.missing.field"]
    slim = slim_transform(inputs)(pod)
    assert slim == {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": "p", "namespace": "default", "uid": "u", "resourceVersion": "7",
                                 "labels": {"app": "x"}},
                    "spec": {"nodeName": "n1"}, "status": {"podIP": "10.0.0.2", "hostIP": "172.30.0.2"}}
    assert hashing.project(slim, inputs) == hashing.project(pod, inputs)   # the input hash is the same
    assert slim_transform(["metadata.annotations"])(pod)["metadata"]["annotations"] == pod["metadata"]["annotations"]


# ------------------------------------------------------------------------------------------ members (member_if)
def test_member_if_parses_and_rejects_bad_conditions(tmp_path):
    (tmp_path / "p.yml").write_text("[]")
    (e,) = watchmap.parse([{"kind": "Pod", "playbook": "p.yml", "key": "{cluster}/o",
                            "member_if": ["status.podIP", "status.phase=Running"]}], str(tmp_path))
    assert e.member_if == (("status.podIP", None), ("status.phase", "Running"))
    assert e.is_member({"status": {"podIP": "10.0.0.1", "phase": "Running"}})
    assert not e.is_member({"status": {"podIP": "", "phase": "Running"}})
    assert not e.is_member({"status": {"podIP": "10.0.0.1", "phase": "Pending"}})
    for bad in (["status.phase="], [""], "=x"):
        with pytest.raises(watchmap.WatchMapError, match=r"watches\[0\]\.member_if"):
            watchmap.parse([{"kind": "Pod", "member_if": bad}], str(tmp_path))
    with pytest.raises(watchmap.WatchMapError, match="member_if"):
        watchmap.parse([{"kind": "GatewayServer", "playbook": "p.yml", "finalizer": "a.io/b", "finalizer_playbook": "p.yml",
                         "member_if": ["spec.x"]}], str(tmp_path))


def _unreachable_kubeconfig(tmp_path):
    """A kubeconfig naming a closed port: an Engine built on it makes no API call until started."""
    kc = tmp_path / "kc"
    kc.write_text("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
                  "contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\nusers: [{name: u, user: {}}]\n")
    return kc


def _overlay_engine(tmp_path):
    """An Engine on the shipped watch map with hand-filled caches (no API: the kubeconfig names a closed port)."""
    import types  # pylint: disable=import-outside-toplevel
    from controller.engine import Engine  # pylint: disable=import-outside-toplevel
    kc = _unreachable_kubeconfig(tmp_path)
    eng = Engine(watchmap.load(watchmap.DEFAULT_PATH), {"a": str(kc)}, ROOT, str(tmp_path / "rt"), leader_elect=False,
                 state_configmap=False, warm_runner=False)
    cs = eng.clusters["a"]
    caches = {"Node": {}, "Pod": {}}
    cs.informers = {k: types.SimpleNamespace(cache=c) for k, c in caches.items()}
    return eng, cs, caches


def _pod(ip=None, phase="Pending", rv="1", deleting=False):
    meta = {"name": "p", "namespace": "default", "uid": "u-p", "resourceVersion": rv}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-26T10:00:00Z"
    status = {"phase": phase}
    if ip:
        status.update(podIP=ip, hostIP="172.30.0.2")
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"nodeName": "n1"}, "status": status}


def test_a_pod_without_its_ip_starts_no_overlay_run(tmp_path):
    """The lab and kubelets create a Pod, then write its IP: the first event must not start a run that cannot route
    it (the IP's run would wait for it); the IP's event does; a Pod that stops running leaves the key (a run)."""
    eng, cs, caches = _overlay_engine(tmp_path)
    key = "a/overlay"
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u-n1", "resourceVersion": "1"},
            "spec": {"podCIDR": "10.1.0.0/24"}}
    caches["Node"]["n1"] = node
    eng.reactor.on_event(cs, "Node", "ADDED", node, None)
    assert eng.queue.pending_keys() == [key]
    # as if its run had succeeded: the key's applied hashes are the current ones
    _entry, _objs, hashes = eng.inputs.current(cs, key)
    cs.applied[key] = applied_repr(eng.by_kind["Node"], hashes)
    cs.manifests[key] = []
    eng.queue = type(eng.queue)(debounce=0.1)

    for obj in (_pod(), _pod(phase="Pending", ip="10.1.0.5", rv="2")):   # created; an IP but not running yet
        caches["Pod"]["default/p"] = obj
        eng.reactor.on_event(cs, "Pod", "ADDED" if obj["metadata"]["resourceVersion"] == "1" else "MODIFIED", obj, None)
        assert eng.queue.pending_keys() == [], obj["status"]
    assert "Pod/default/p" not in cs.members[key]

    running = _pod(ip="10.1.0.5", phase="Running", rv="3")
    caches["Pod"]["default/p"] = running
    eng.reactor.on_event(cs, "Pod", "MODIFIED", running, None)
    assert eng.queue.pending_keys() == [key] and "Pod/default/p" in cs.members[key]
    _entry, objs, hashes = eng.inputs.current(cs, key)
    assert "Pod/default/p" in objs
    cs.applied[key] = applied_repr(eng.by_kind["Pod"], hashes)
    eng.queue = type(eng.queue)(debounce=0.1)

    done = _pod(ip="10.1.0.5", phase="Succeeded", rv="4")               # no longer routed by the plan: a run
    caches["Pod"]["default/p"] = done
    eng.reactor.on_event(cs, "Pod", "MODIFIED", done, None)
    assert eng.queue.pending_keys() == [key] and "Pod/default/p" not in cs.members[key]


def test_overlay_runs_get_no_fabric_objects(tmp_path):
    """objects: false (the overlay key: every Node and Pod, which reconcile_overlay reads from the API itself): the
    run's extra vars carry no fabric_objects; other entries keep them."""
    import types  # pylint: disable=import-outside-toplevel
    from controller.workqueue import Item  # pylint: disable=import-outside-toplevel
    with pytest.raises(watchmap.WatchMapError, match=r"watches\[0\]\.objects"):
        watchmap.parse([{"kind": "Node", "objects": "no"}], None)
    eng, cs, caches = _overlay_engine(tmp_path)
    assert not eng.by_kind["Node"].objects and not eng.by_kind["Pod"].objects and eng.by_kind["Configuration"].objects
    seen = []

    def run(playbook, extravars, *a, **kw):
        seen.append(dict(extravars))
        return types.SimpleNamespace(ok=True, status="successful", reason="", duration=0.1, warm=True, spawn_seconds=0.1,
                                     changed=0, message="", slowest=(), timeline=())
    eng.runner = types.SimpleNamespace(run=run)
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u-n1", "resourceVersion": "1"}}
    item = Item("a/overlay", "a/overlay", "a", 0, 0.0, 0.0)
    eng.runs.run(cs, eng.by_kind["Node"], item, {"Node/n1": node}, ["Node/n1"], deleting=False)
    conf = {"apiVersion": "networking.liqo.io/v1beta1", "kind": "Configuration",
            "metadata": {"name": "c", "namespace": "default", "uid": "u-c"}}
    eng.by_kind["Configuration"] = dataclasses.replace(eng.by_kind["Configuration"], status=False)
    ipam = Item("a/ipam", "a/ipam", "a", 0, 0.0, 0.0)
    eng.runs.run(cs, eng.by_kind["Configuration"], ipam, {"Configuration/default/c": conf}, [], deleting=False)
    assert "fabric_objects" not in seen[0] and seen[0]["fabric_cluster"] == "a"
    assert [o["name"] for o in seen[1]["fabric_objects"]] == ["c"]


@pytest.mark.parametrize("path", [watchmap.DEFAULT_PATH, os.path.join(ROOT, "controller", "watches-in-cluster.yaml")])
def test_the_ipam_remap_reruns_a_gateway_that_read_none(tmp_path, path):
    """A gateway's run may read its Configuration before the IPAM wrote status.remote (both start on the same
    apply): its overlay plan then routes no peer, and nothing else reruns it. The remap entering the gateway's
    hash makes the IPAM's status write enqueue it; a status change without a new remap does not."""
    import types  # pylint: disable=import-outside-toplevel
    from controller.engine import Engine  # pylint: disable=import-outside-toplevel
    kc = _unreachable_kubeconfig(tmp_path)
    mode = {} if path == watchmap.DEFAULT_PATH else {"mode": modes.make(
        "gateway", node_name="n1", gateway={"kind": "GatewayServer", "namespace": "t", "name": "s"})}
    eng = Engine(watchmap.load(path), {"a": str(kc)}, ROOT, str(tmp_path / "rt"), leader_elect=False,
                 state_configmap=False, warm_runner=False, **mode)
    cs = eng.clusters["a"]
    labels = {"liqo.io/remote-cluster-id": "peer"}
    gw = {"apiVersion": "networking.liqo.io/v1beta1", "kind": "GatewayServer",
          "metadata": {"name": "s", "namespace": "t", "uid": "u-s", "resourceVersion": "1", "labels": labels,
                       "finalizers": ["networking.liqo.io/fabric-gateway"]}, "spec": {"mtu": 1340}}
    conf = {"apiVersion": "networking.liqo.io/v1beta1", "kind": "Configuration",
            "metadata": {"name": "c", "namespace": "t", "uid": "u-c", "resourceVersion": "1", "labels": labels},
            "spec": {"remote": {"cidr": {"pod": ["10.243.0.0/16"]}}}}
    assert "status.remote" in informers.read_fields(eng.entries, "Configuration")
    caches = {k: {} for k in eng.kinds()}
    cs.informers = {k: types.SimpleNamespace(cache=c) for k, c in caches.items()}
    caches["GatewayServer"]["t/s"], caches["Configuration"]["t/c"] = gw, conf
    entry = eng.by_kind["GatewayServer"]
    eng.reactor.on_event(cs, "GatewayServer", "ADDED", gw, None)
    key = entry.work_key("a", gw, eng.node_name)
    assert eng.queue.pending_keys() == [key]
    _entry, _objs, hashes = eng.inputs.current(cs, key)              # its run read no remap, and succeeded
    cs.applied[key] = applied_repr(entry, hashes)
    eng.queue = type(eng.queue)(debounce=0.1)

    remapped = dict(conf, metadata=dict(conf["metadata"], resourceVersion="2"),
                    status={"remote": {"cidr": {"pod": ["10.0.0.0/16"]}}})
    caches["Configuration"]["t/c"] = remapped
    eng.reactor.on_event(cs, "Configuration", "MODIFIED", remapped, conf)
    assert key in eng.queue.pending_keys()
    _entry, _objs, hashes = eng.inputs.current(cs, key)
    cs.applied[key] = applied_repr(entry, hashes)
    eng.queue = type(eng.queue)(debounce=0.1)

    conditions = dict(remapped, metadata=dict(conf["metadata"], resourceVersion="3"),
                      status=dict(remapped["status"], conditions=[{"type": "NetworkCIDRsConfigured", "status": "True"}]))
    caches["Configuration"]["t/c"] = conditions
    eng.reactor.on_event(cs, "Configuration", "MODIFIED", conditions, remapped)
    assert key not in eng.queue.pending_keys()


def test_the_startup_timeline_splits_a_start_into_its_parts():
    """The first log line of every mode says where a slow start went: the process's age when the entry point began
    (interpreter), then each phase against the previous mark."""
    import subprocess  # pylint: disable=import-outside-toplevel
    import sys  # pylint: disable=import-outside-toplevel
    # a child that sleeps 0.3 s before the timeline's origin: its interpreter part holds those 0.3 s
    code = ("import time; time.sleep(0.3); t0 = time.monotonic(); from controller import logs; time.sleep(0.2); "
            "import json; print(json.dumps(logs.startup_timeline(t0, [('a', time.monotonic()), ('b', time.monotonic() + 0.5)])))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=ROOT)).stdout
    got = json.loads(out)
    assert list(got) == ["interpreter", "a", "b"] and got["b"] == 0.5
    assert 0.3 <= got["interpreter"] < 5 and 0.2 <= got["a"] < 5, got  # process_age() measured the child's 0.3 s


def test_a_gateway_standby_runs_nothing_before_its_warm_up_is_due(tmp_path):
    """--standby-warmup-delay: the standby replica of a new gateway (not the Lease holder) takes no work item
    before the delay has passed since its start; the Lease holder, and the standby after the delay, do."""
    import time  # pylint: disable=import-outside-toplevel
    from controller.engine import Engine  # pylint: disable=import-outside-toplevel
    from controller.workqueue import Item  # pylint: disable=import-outside-toplevel
    kc = _unreachable_kubeconfig(tmp_path)
    from controller.gateway_standby import GatewayStandby  # pylint: disable=import-outside-toplevel
    gateway = {"kind": "GatewayClient", "namespace": "t", "name": "c"}
    eng = Engine(watchmap.load(os.path.join(ROOT, "controller", "watches-in-cluster.yaml")), {"a": str(kc)}, ROOT,
                 str(tmp_path / "rt"), state_configmap=False, warm_runner=False,
                 mode=modes.make("gateway", node_name="n1", gateway=gateway, standby_warmup_delay=30))
    cs = eng.clusters["a"]
    item = Item(key="a/gateway-pod", lock="a/gateway-pod", cluster="a", priority=0, ready_at=0.0, first_at=0.0)
    assert not cs.acting() and not eng.executor.eligible(item)
    cs.leader.is_leader = lambda: True                 # the Lease holder: at once
    assert eng.executor.eligible(item)
    cs.leader.is_leader = lambda: False
    standby = next(f for f in eng.features if isinstance(f, GatewayStandby))
    standby.warmup_at = time.monotonic() - 1           # the delay passed: the standby warms up
    assert eng.executor.eligible(item)
    # without the flag a standby works at once, as before
    eng0 = Engine(watchmap.load(os.path.join(ROOT, "controller", "watches-in-cluster.yaml")), {"a": str(kc)}, ROOT,
                  str(tmp_path / "rt0"), state_configmap=False, warm_runner=False,
                  mode=modes.make("gateway", node_name="n1", gateway=gateway))
    assert not eng0.clusters["a"].acting() and eng0.executor.eligible(item)


def test_a_modes_features_get_their_work_items_and_events_and_stop_in_reverse(tmp_path):
    """The engine holds no feature of its own: a mode registers them; an item whose key has a feature's prefix goes
    to that feature (no reconcile, no record), every event reaches every feature before the engine makes work of
    it, and the engine stops them in the reverse order of their registration."""
    import types  # pylint: disable=import-outside-toplevel
    from controller.engine import Engine  # pylint: disable=import-outside-toplevel
    from controller.engine.feature import Feature  # pylint: disable=import-outside-toplevel
    from controller.engine.mode import Mode  # pylint: disable=import-outside-toplevel
    from controller.workqueue import Item  # pylint: disable=import-outside-toplevel
    calls = []

    class Recorder(Feature):
        def __init__(self, name, prefix=""):
            self.name, self.key_prefix = name, prefix

        def process(self, cs, item):
            calls.append((self.name, "process", item.key))

        def on_event(self, cs, kind, etype, obj, old):
            calls.append((self.name, "event", kind, eng.queue.pending_keys()))

        def stop(self):
            calls.append((self.name, "stop"))

    class TwoFeatures(Mode):
        def features(self, engine):
            return [Recorder("first", "first:"), Recorder("second")]

    eng = Engine(watchmap.load(watchmap.DEFAULT_PATH), {"a": str(_unreachable_kubeconfig(tmp_path))}, ROOT,
                 str(tmp_path / "rt"), leader_elect=False, state_configmap=False, warm_runner=False, mode=TwoFeatures())
    cs = eng.clusters["a"]
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u-n1", "resourceVersion": "1"}}
    cs.informers = {"Node": types.SimpleNamespace(cache={"n1": node})}
    eng.executor.process(Item("first:x", "first:x", "a", 0, 0.0, 0.0))
    eng.reactor.on_event(cs, "Node", "ADDED", node, None)
    assert eng.queue.pending_keys() == ["a/overlay"]
    cs.informers = {}
    eng.shutdown(timeout=0.1)
    assert calls == [("first", "process", "first:x"), ("first", "event", "Node", []), ("second", "event", "Node", []),
                     ("second", "stop"), ("first", "stop")]


def test_a_gateway_pods_takeover_and_lost_lease_keep_their_order(tmp_path, monkeypatch):
    """Gateway mode's features on the Lease: taken, the client's tunnel is activated before the pod is labelled
    active, then the probe starts, the waiting zygote starts and every key runs by force; lost, the probe stops
    before the label comes off, the links go, and the pod exits to restart as a standby."""
    import signal  # pylint: disable=import-outside-toplevel
    import types  # pylint: disable=import-outside-toplevel
    from controller import gateway_ha, peer_health  # pylint: disable=import-outside-toplevel
    from controller.engine import Engine  # pylint: disable=import-outside-toplevel
    calls = []
    monkeypatch.setattr(gateway_ha, "mark", lambda api, ns, pod, active: calls.append(("mark", active)))
    monkeypatch.setattr(gateway_ha, "drop_links", lambda: calls.append(("drop_links",)))
    monkeypatch.setattr(gateway_ha, "activate_client", lambda gw, cid: calls.append(("activate", cid)))
    monkeypatch.setattr(gateway_ha.os, "kill", lambda pid, sig: calls.append(("kill", sig)))

    class Probe:
        def __init__(self, api, gateway, cluster_id, **_kw):
            self.cluster_id = cluster_id

        def start(self):
            calls.append(("probe", self.cluster_id()))

        def stop(self):
            calls.append(("probe stopped",))

        def is_alive(self):
            return True
    monkeypatch.setattr(peer_health, "GatewayHealth", Probe)
    gateway = {"kind": "GatewayClient", "namespace": "t", "name": "c"}
    eng = Engine(watchmap.load(os.path.join(ROOT, "controller", "watches-in-cluster.yaml")),
                 {"a": str(_unreachable_kubeconfig(tmp_path))}, ROOT, str(tmp_path / "rt"), warm_runner=False,
                 mode=modes.make("gateway", node_name="n1", gateway=gateway))
    cs = eng.clusters["a"]
    eng.features[0]._cluster_ids["a"] = "cid-a"  # pylint: disable=protected-access
    synced = threading.Event()
    synced.set()
    cs.informers = {"GatewayClient": types.SimpleNamespace(cache={"t/c": {"metadata": {"name": "c", "namespace": "t"}}},
                                                           synced=synced)}
    eng.runner.prestart = lambda: calls.append(("prestart",))
    cs.key_entry["a/gateway-pod"] = eng.by_kind["GatewayClient"]
    eng.consider = lambda c, key, prio, reason, force=False: calls.append(("consider", key, reason, force))
    eng._on_lead(cs)  # pylint: disable=protected-access
    assert calls == [("activate", "cid-a"), ("mark", True), ("probe", "cid-a"), ("prestart",),
                     ("consider", "a/gateway-pod", "gateway pod active", True)]
    del calls[:]
    eng._leadership(cs, False)  # pylint: disable=protected-access
    assert calls == [("probe stopped",), ("mark", False), ("drop_links",), ("kill", signal.SIGTERM)]
