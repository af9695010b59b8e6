"""The controller upgraded side by side (agentless face, light lab): a pair connected and served by the previous
release's controller (tests/e2e/previous_release.py), the current controller started beside it as a standby (the
Leases held by the previous one), then the previous one stopped: the current one takes both Leases, reads the state
the previous one persisted (ConfigMap liqo/liqo-fabric-controller-state) and reconciles every key with the current
roles. Under pings between pods both ways nothing is lost; its runs change only what the current gateway role builds
differently (each gateway host's NAT table, its health probe, the gateway's status.mtu: three tasks per gateway) and
nothing of the overlay or the IPAM; the gateways' keys, links, wireguard-go processes and the overlay records are
what they were."""
import json
import shutil

import pytest

from tests.e2e import fabric, previous_release
from tests.e2e.test_agentless_upgrade import GROUPS, connected_by, pods_flows, snapshot
from tests.e2e.test_agentless_upgrade import kept as probes_as_one
from tests.e2e.test_controller import ControllerProc, wait_for

pytestmark = pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl is not installed")


@pytest.fixture(scope="module")
def lab():
    previous = previous_release.collection()
    with connected_by(previous) as lab_:
        try:
            yield lab_, previous
        finally:
            fabric.playbook("disconnect", lab_.inventory_path, kubeconfig=lab_["a"].kubeconfig,
                            remote_kubeconfig=lab_["b"].kubeconfig, confirm="yes", check=False, **GROUPS)


def settled(ctl, runs_at_least: int):
    """True once `ctl` leads both clusters, ran at least `runs_at_least` playbooks and has nothing queued or running."""
    return (ctl.metric("liqo_fabric_leader") == 2 and ctl.metric("liqo_fabric_playbook_runs_total") >= runs_at_least
            and ctl.metric("liqo_fabric_queue_depth") == 0 and ctl.metric("liqo_fabric_queue_running") == 0)


def kept(lab) -> dict:
    """snapshot() without the controllers' own state (ConfigMap liqo-fabric-controller-state), which they rewrite, and
    with the health probes as one (the current role replaces the previous one's probe)."""
    out = probes_as_one(snapshot(lab))
    for c in ("a", "b"):
        out[c]["configmaps"].pop("liqo-fabric-controller-state", None)
    return out


def state_keys(cluster) -> dict:
    cm = json.loads(fabric.kubectl(cluster, "get", "configmap", "-n", "liqo", "liqo-fabric-controller-state", "-o", "json"))
    return json.loads(cm["data"]["state.json"])["keys"]


def recorded_all(cluster) -> bool:
    """True once the controller's state records each of the cluster's keys: its gateway, its IPAM and its overlay
    (the ConfigMap is written at most every second after the runs: an empty queue alone does not say that every key is in it)."""
    keys = [k.split("/")[1] for k in state_keys(cluster)]
    return sorted(k if k in ("ipam", "overlay") else "gateway" for k in keys) == ["gateway", "ipam", "overlay"]


def test_the_current_controller_takes_over_from_the_previous_one(lab, tmp_path):
    lab, previous = lab
    clusters = {"a": lab["a"].kubeconfig, "b": lab["b"].kubeconfig}
    old = ControllerProc(str(tmp_path), clusters, inventory=lab.inventory_path, name="previous", root=previous)
    new = ControllerProc(str(tmp_path), clusters, inventory=lab.inventory_path, name="current")
    try:
        old.start()
        # the previous controller adopts what its connect built: each cluster's keys run once and are recorded
        wait_for(lambda: settled(old, 2) and all(recorded_all(lab[c]) for c in ("a", "b")),
                 180, "the previous controller's first runs", interval=1)
        before = kept(lab)
        recorded = {c: sorted(state_keys(lab[c])) for c in ("a", "b")}
        flows = pods_flows(lab)
        try:
            new.start()   # a standby beside it: the Leases are the previous one's
            assert new.metric("liqo_fabric_leader") == 0 and new.metric("liqo_fabric_playbook_runs_total") == 0
            old.stop()    # releases its Leases: the current one takes them and reconciles every key
            wait_for(lambda: settled(new, 1), 180, "the current controller's runs", interval=1)
        finally:
            results = [flow.stop() for flow in flows]
        for sent, lost, losses in results:
            assert sent > 0 and not lost, losses
        runs = new.metric("liqo_fabric_playbook_runs_total")
        changed = new.metric("liqo_fabric_changed_tasks_total")
        print("current controller after the takeover: %d runs, %d changed tasks" % (runs, changed))
        per_key = {}
        for r in new.logs():
            if r.get("msg") == "playbook done":
                per_key[r["key"]] = per_key.get(r["key"], 0) + r.get("changed", 0)
        gateways = [k for k in per_key if "/Gateway" in k]
        assert len(gateways) == 2 and all(per_key[k] == 3 for k in gateways), new.log_tail(60)
        assert all(v == 0 for k, v in per_key.items() if k not in gateways) and changed == 6, new.log_tail(60)
        versions = {c.name: {r.get("role_version") for r in c.logs() if r.get("msg") == "controller started"}
                    for c in (old, new)}
        assert len(versions["previous"]) == 1 and versions["previous"] != versions["current"], versions  # two trees
        after = kept(lab)
        assert after == before, json.dumps({k: [before[k], after.get(k)] for k in before if before[k] != after.get(k)},
                                           indent=1)
        assert {c: sorted(state_keys(lab[c])) for c in ("a", "b")} == recorded
    finally:
        for ctl in (old, new):
            ctl.stop()
            ctl.reap_orphans()
