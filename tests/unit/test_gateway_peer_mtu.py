"""A gateway's MTU where the plan reaches the peer cluster (plugins/module_utils/gateway/peer_mtu.py): which of the
peer's PublicKeys get the gateway's MTU, which peer gateway's spec.mtu decides a mismatch, and the plan's error once
it is known; then one peer cluster read and written through a fake client."""
from __future__ import annotations

import pytest

from ansible_collections.liqo.fabric.plugins.module_utils.gateway import peer_mtu
from ansible_collections.liqo.fabric.plugins.module_utils.gateway.plan import MTU_ANNOTATION

KEY = "GExyYe7RJ3Lo5nQVa6K2Tp9zobXCvWmJawsLxu7hn10="
OTHER = "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg="


def pk(name, key=KEY, mtu="1340", ns="liqo-tenant-a"):
    annotations = {MTU_ANNOTATION: mtu} if mtu is not None else {}
    return {"metadata": {"name": name, "namespace": ns, "annotations": annotations}, "spec": {"publicKey": key}}


def gw(kind, name="a", ns="liqo-tenant-a", mtu=None, deleting=False):
    meta = {"name": name, "namespace": ns}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-28T00:00:00Z"
    return {"kind": kind, "metadata": meta, "spec": {"mtu": mtu} if mtu else {}}


def plan(mtu=1300, error=None, peer=True, kind="GatewayClient", ready=True):
    return {"kind": kind, "mtu": mtu, "public_key": KEY, "remote_cluster_id": "id-b",
            "peer": {"public_key": OTHER} if peer else None, "error": error, "ready": ready}


MISMATCH = {"reason": "MTUMismatch", "message": "spec.mtu: 1300 here but 1340 on the remote gateway (PublicKey b, ...)"}


@pytest.mark.parametrize("public_keys,mtu,expected", [
    ([pk("b")], 1300, [("liqo-tenant-a", "b", "1340")]),                    # ours, another MTU: rewritten
    ([pk("b", mtu="1300")], 1300, []),                                      # already equal
    ([pk("b", mtu=1300)], 1300, []),                                        # an int in the YAML is the same MTU
    ([pk("b", mtu=None)], 1300, []),                                        # no annotation: the user's YAML, left alone
    ([pk("b", key=OTHER)], 1300, []),                                       # another gateway's key
    ([pk("b"), pk("b2", ns="elsewhere")], 1300, [("liqo-tenant-a", "b", "1340"), ("elsewhere", "b2", "1340")]),
    ([pk("b")], None, []),
])
def test_the_peers_public_keys_that_get_the_mtu(public_keys, mtu, expected):
    got = peer_mtu.mtu_patches(public_keys, KEY, mtu)
    assert [g[:3] for g in got] == expected
    for _ns, _name, _old, patch in got:   # the annotation alone, as a string (annotations are strings)
        assert patch == {"metadata": {"annotations": {MTU_ANNOTATION: str(mtu)}}}
    assert peer_mtu.mtu_patches(public_keys, None, mtu) == []


@pytest.mark.parametrize("gateways,kind,expected", [
    ([gw("GatewayServer")], "GatewayClient", "a"),                          # the other kind, in the key's namespace
    ([gw("GatewayClient")], "GatewayClient", None),                         # the same kind is not the peer
    ([gw("GatewayServer", ns="other")], "GatewayClient", None),             # not where our key is
    ([gw("GatewayServer"), gw("GatewayServer", name="x")], "GatewayClient", None),   # two candidates: no guess
    ([gw("GatewayServer", deleting=True)], "GatewayClient", None),
    ([gw("GatewayClient", name="c")], "GatewayServer", "c"),
])
def test_the_peer_gateway_is_the_other_kind_where_our_key_is(gateways, kind, expected):
    found = peer_mtu.peer_gateway([pk("b"), pk("x", key=OTHER, ns="other")], gateways, KEY, kind)
    assert (found["metadata"]["name"] if found else None) == expected


@pytest.mark.parametrize("p,peer,reason,words", [
    # the annotation was stale (the peer's run had not rewritten it): the peer gateway's spec says equal
    (plan(error=MISMATCH), gw("GatewayServer", mtu=1300), None, None),
    (plan(error=None), gw("GatewayServer", mtu=1300), None, None),
    # the annotation said equal but the peer gateway runs another MTU
    (plan(error=None), gw("GatewayServer", mtu=1340), "MTUMismatch",
     "spec.mtu: 1300 here but 1340 on the remote gateway (GatewayServer liqo-tenant-a/a)"),
    (plan(mtu=1340, error=None), gw("GatewayServer"), None, None),         # no spec.mtu: the default, 1340
    (plan(error=MISMATCH), None, "MTUMismatch", "PublicKey b"),            # no peer gateway found: the annotation's view
    (plan(error={"reason": "AmbiguousPublicKey", "message": "m"}), gw("GatewayServer", mtu=1340), "AmbiguousPublicKey", "m"),
    (plan(error=None, peer=False), gw("GatewayServer", mtu=1340), None, None),   # no peer yet: nothing to compare
    # the peer gateway refuses its own spec.mtu (Liqo's CRDs bound nothing) and runs on as last built: the
    # annotation's view stays, no mismatch with a value no tunnel runs
    (plan(mtu=1340, error=None), gw("GatewayServer", mtu=500), None, None),
    (plan(error=MISMATCH), gw("GatewayServer", mtu=70000), "MTUMismatch", "PublicKey b"),
])
def test_the_peer_gateways_mtu_decides_the_mismatch(p, peer, reason, words):
    out = peer_mtu.with_peer_mtu(p, peer)
    assert (out["error"] or {}).get("reason") == reason
    if words:
        assert words in out["error"]["message"]


class PeerKube:
    def __init__(self, objects):
        self.objects = objects
        self.patches = []

    def list(self, kind, namespace=None):
        return [o for o in self.objects.get(kind, []) if namespace in (None, o["metadata"]["namespace"])]

    def patch(self, kind, namespace, name, body):
        self.patches.append((kind, namespace, name, body))


@pytest.mark.parametrize("check", [False, True])
def test_follow_peer_announces_and_compares_in_one_read(check):
    """Both sides changed to 1300, this run first: the peer's PublicKey of us gets 1300 (its change reruns the peer);
    the peer's GatewayServer already says 1300, so the stale annotation here is no mismatch."""
    kube = PeerKube({"PublicKey": [pk("b")], "GatewayServer": [dict(gw("GatewayServer", mtu=1300), kind=None)]})
    p = plan(error=MISMATCH)
    done = peer_mtu.follow_peer(kube, [p], check_mode=check)
    assert done == ["PublicKey/liqo-tenant-a/b of cluster id-b: %s 1340 -> 1300" % MTU_ANNOTATION]
    patch = ("PublicKey", "liqo-tenant-a", "b", {"metadata": {"annotations": {MTU_ANNOTATION: "1300"}}})
    assert kube.patches == ([] if check else [patch])
    assert p["error"] is None


def test_an_unreachable_peer_cluster_is_reported_not_raised(tmp_path):
    p = plan(error=MISMATCH)
    missing = str(tmp_path / "nowhere.kubeconfig")
    done, errors = peer_mtu.follow_peers([p, dict(plan(), remote_cluster_id="id-c")], {"id-b": missing})
    assert done == [] and list(errors) == ["id-b"] and missing in errors["id-b"]
    assert p["error"] == MISMATCH        # the annotation's view stays
    assert peer_mtu.follow_peers([p], {}) == ([], {})


def test_a_refused_change_announces_no_mtu():
    """A plan that is not ready (a refused change, held as last built, or one still waiting) builds nothing: the peer's
    PublicKey of it keeps the MTU its tunnel runs, so the peer's Connection is not turned into an MTUMismatch."""
    kube = PeerKube({"PublicKey": [pk("b")], "GatewayServer": [dict(gw("GatewayServer", mtu=1340), kind=None)]})
    refused = plan(mtu=1340, ready=False, error={"reason": "InvalidMTU", "message": "spec.mtu: 500 is not an MTU ..."})
    refused["mtu"] = 500
    assert peer_mtu.follow_peer(kube, [refused]) == [] and kube.patches == []
    assert refused["error"]["reason"] == "InvalidMTU"
