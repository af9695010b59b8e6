"""The controller's choice of due key rotations (controller/key_rotation.py) over in-memory caches
and a real WorkQueue: only annotated, due gateways whose peer cluster the controller serves are enqueued,
locked with their cluster's gateway host; a bad period is ignored. The served clusters as each other's peers
(controller/peer_clusters.py): every run gets the others' kubeconfigs by cluster id."""
from __future__ import annotations

import datetime
import types

from controller import key_rotation, peer_clusters
from controller.workqueue import WorkQueue

NOW = datetime.datetime(2026, 11, 25, 3, 0, 0, tzinfo=datetime.timezone.utc)
IDS = {"a": "id-a", "b": "id-b"}


class API:
    """The two reads the schedule makes: the cluster identity ConfigMap and a gateway's key Secret."""

    def __init__(self, cluster, secrets):
        self.cluster, self.secrets = cluster, secrets

    def get(self, res, namespace, name):
        if res.kind == "ConfigMap":
            return {"data": {"CLUSTER_ID": IDS[self.cluster]}}
        return self.secrets.get((namespace, name))


def gw(name, remote, period=None, deleting=False):
    meta = {"name": name, "namespace": "ns", "labels": {"liqo.io/remote-cluster-id": remote},
            "annotations": {key_rotation.kr.PERIOD_ANNOTATION: period} if period else {}}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-25T02:00:00Z"
    return {"metadata": meta}


def cluster(name, clients, secrets, acting=True):
    cache = {f"ns/{g['metadata']['name']}": g for g in clients}
    return types.SimpleNamespace(name=name, api=API(name, secrets), acting=lambda: acting,
                                 informers={"GatewayClient": types.SimpleNamespace(cache=cache)})


def engine(clusters):
    return types.SimpleNamespace(mode="controller", clusters={c.name: c for c in clusters},
                                 queue=WorkQueue(debounce=0.0), runner=types.SimpleNamespace(inventory="inv"))


def secret(rotated):
    return {"metadata": {"creationTimestamp": "2026-11-01T00:00:00Z",
                         "annotations": {key_rotation.kr.ROTATED_AT_ANNOTATION: rotated}}}


def test_only_due_gateways_of_served_peers_are_enqueued_with_the_gateway_host_lock():
    a = cluster("a", [gw("due", "id-b", "1h"), gw("early", "id-b", "2h"), gw("plain", "id-b"),
                      gw("bad", "id-b", "soon"), gw("gone", "id-b", "1h", deleting=True)],
                {("ns", "wg-client-due"): secret("2026-11-25T01:30:00Z"),
                 ("ns", "wg-client-early"): secret("2026-11-25T01:30:00Z"),
                 ("ns", "wg-client-bad"): secret("2026-11-25T01:30:00Z"),
                 ("ns", "wg-client-gone"): secret("2026-11-25T01:30:00Z")})
    b = cluster("b", [], {})
    eng = engine([a, b])
    kr = key_rotation.KeyRotation(eng, "/nowhere")
    keys = kr.check(NOW)
    assert keys == ["rotate:a/GatewayClient/ns/due"]
    item = eng.queue.get(timeout=0)
    assert item.key == keys[0] and item.lock == "a/gateway-host" and item.cluster == "a"
    assert kr.peer_of(gw("due", "id-b")) == "b" and kr.peer_of(gw("x", "id-elsewhere")) is None
    assert key_rotation.parse_key(keys[0]) == ("a", "GatewayClient", "ns", "due")


def test_a_follower_enqueues_nothing():
    a = cluster("a", [gw("due", "id-b", "1h")], {("ns", "wg-client-due"): secret("2026-11-25T01:00:00Z")}, acting=False)
    eng = engine([a, cluster("b", [], {})])
    assert key_rotation.KeyRotation(eng, "/nowhere").check(NOW) == []


def test_disabled_without_a_peer_cluster_or_an_inventory(tmp_path):
    book = tmp_path / key_rotation.PLAYBOOK
    book.write_text("---\n")
    eng = engine([cluster("a", [], {}), cluster("b", [], {})])
    assert key_rotation.KeyRotation(eng, str(tmp_path)).enabled()
    eng.runner.inventory = None
    assert not key_rotation.KeyRotation(eng, str(tmp_path)).enabled()
    assert not key_rotation.KeyRotation(engine([cluster("a", [], {})]), str(tmp_path)).enabled()


def test_the_rotation_playbook_is_the_entry_point_beside_an_internal_gateway_playbook(tmp_path):
    """In cluster the gateways' playbook is playbooks/internal/reconcile_gateway_manifests.yml; rotate_keys.yml stays
    the entry point at the top of playbooks/."""
    (tmp_path / key_rotation.INTERNAL_DIR).mkdir()
    (tmp_path / key_rotation.PLAYBOOK).write_text("---\n")
    eng = engine([cluster("a", [], {}), cluster("b", [], {})])
    for where in (tmp_path, tmp_path / key_rotation.INTERNAL_DIR):
        kr = key_rotation.KeyRotation(eng, str(where))
        assert kr.playbook == str(tmp_path / key_rotation.PLAYBOOK) and kr.enabled()


# ---- the served clusters as each other's peers (controller/peer_clusters.py), which key rotation uses too

def test_each_run_gets_the_other_served_clusters_kubeconfigs_by_cluster_id(monkeypatch):
    a, b, c = cluster("a", [], {}), cluster("b", [], {}), cluster("c", [], {})
    for x in (a, b, c):
        x.kubeconfig = f"/k/{x.name}"
    c.kubeconfig = None      # in a cluster: the service account, nothing to hand to a playbook
    monkeypatch.setitem(IDS, "c", "id-c")
    eng = engine([a, b, c])
    peers = peer_clusters.PeerClusters(eng)
    assert peers.run_context(a) == ({"fabric_peer_kubeconfigs": {"id-b": "/k/b"}}, None)
    assert peers.run_context(b) == ({"fabric_peer_kubeconfigs": {"id-a": "/k/a"}}, None)
    assert peers.run_context(c) == ({"fabric_peer_kubeconfigs": {"id-a": "/k/a", "id-b": "/k/b"}}, None)
    assert peers.peer_of(gw("x", "id-b")) == "b"
    eng.mode = "node"
    assert peers.run_context(a) == ({}, None)
    one = engine([a])
    assert peer_clusters.PeerClusters(one).run_context(a) == ({}, None)


def test_a_cluster_whose_id_cannot_be_read_is_left_out_and_asked_again():
    a, b = cluster("a", [], {}), cluster("b", [], {})
    a.kubeconfig, b.kubeconfig = "/k/a", "/k/b"
    good = b.api.get

    def down(*args):
        raise OSError("connection refused")
    b.api.get = down
    peers = peer_clusters.PeerClusters(engine([a, b]))
    assert peers.run_context(a) == ({}, None)
    b.api.get = good
    assert peers.run_context(a) == ({"fabric_peer_kubeconfigs": {"id-b": "/k/b"}}, None)
