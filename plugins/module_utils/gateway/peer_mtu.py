# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A gateway's MTU and its peer's, where the plan reaches the peer cluster too (the controller serving both).

A gateway's plan reports an MTUMismatch when its ``spec.mtu`` differs from the MTU its peer declared: the
``networking.liqo.io/mtu`` annotation of the peer's PublicKey, written by ``connect`` and ``generate_publickey``.
Nothing else writes that annotation, so a change of ``spec.mtu`` on both gateways of a connection would leave
each side comparing its new MTU with the peer's old one, for good.

With the peer cluster's kubeconfig the plan
- announces: the PublicKeys of the peer cluster that carry this gateway's public key and an MTU annotation get
  the gateway's MTU in it (the annotation's change reruns the peer's gateway under the controller);
- compares with the peer gateway itself (the one of the other kind in the namespace of that PublicKey): its
  ``spec.mtu`` decides, not an annotation that its own run may not have rewritten yet.
A PublicKey without the annotation is left as it is (YAML a user keeps in Git)."""

from __future__ import annotations

from ansible_collections.liqo.fabric.plugins.module_utils.gateway.plan import KINDS, MTU_ANNOTATION, gateway_mtu, mtu_auto
from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import Kube, KubeError
from ansible_collections.liqo.fabric.plugins.module_utils.kube.rest import ApiError, Unreachable

OTHER_KIND = {"GatewayServer": "GatewayClient", "GatewayClient": "GatewayServer"}
MISMATCH = "MTUMismatch"


def announced_mtu(plan_):
    """The MTU a plan announces to its peer: its tunnel MTU, or with auto what its own last probe found (the peer
    takes the smaller of the two; announcing the agreed value would keep both sides at it for good); None (nothing
    announced) before that probe."""
    if plan_.get("mtu_auto"):
        return ((plan_.get("status") or {}).get("mtu") or {}).get("probed")
    return plan_.get("mtu")


def mtu_patches(public_keys, public_key, mtu):
    """[(namespace, name, old value, merge patch)] of the PublicKeys (a peer cluster's) that carry `public_key`
    and declare another MTU than `mtu`. The patch sets the annotation alone (no resourceVersion: whatever else
    changed meanwhile, the PublicKey still describes this gateway)."""
    out = []
    if not public_key or not mtu:
        return out
    for pk in public_keys:
        meta = pk.get("metadata") or {}
        if (pk.get("spec") or {}).get("publicKey") != public_key:
            continue
        old = (meta.get("annotations") or {}).get(MTU_ANNOTATION)
        if old is None or str(old) == str(mtu):
            continue
        out.append((meta.get("namespace"), meta.get("name"), str(old),
                    {"metadata": {"annotations": {MTU_ANNOTATION: str(mtu)}}}))
    return out


def peer_gateway(public_keys, gateways, public_key, kind):
    """The peer cluster's gateway at the other end of a `kind` gateway whose public key is `public_key`: the one
    gateway of the other kind, not being deleted, in the namespace of the PublicKey that carries the key; None
    when there is not exactly one (the annotation is all the plan has then)."""
    namespaces = {(pk.get("metadata") or {}).get("namespace") for pk in public_keys
                  if public_key and (pk.get("spec") or {}).get("publicKey") == public_key}
    found = [g for g in gateways if g.get("kind") == OTHER_KIND.get(kind)
             and (g.get("metadata") or {}).get("namespace") in namespaces
             and not (g.get("metadata") or {}).get("deletionTimestamp")]
    return found[0] if len(found) == 1 else None


def with_peer_mtu(plan_, peer):
    """The plan's error once the peer gateway (`peer`, a CR of the peer cluster, or None) is known: its spec.mtu
    decides whether the MTUs differ. Any other error of the plan stays; a plan without a peer yet is left alone, and
    so is one whose peer gateway refuses its own spec.mtu (it runs on as last built: the annotation's view stays)."""
    if peer is None or not plan_.get("peer") or (plan_.get("error") and plan_["error"]["reason"] != MISMATCH):
        return plan_
    if plan_.get("mtu_auto") or mtu_auto(peer):  # a probing side follows the other's announced MTU (plan.with_peer_cap)
        return plan_
    mtu = gateway_mtu(peer)
    if mtu is None:
        return plan_
    if str(mtu) == str(plan_["mtu"]):
        plan_["error"] = None
    else:
        meta = peer.get("metadata") or {}
        plan_["error"] = {"reason": MISMATCH, "message": "spec.mtu: %s here but %s on the remote gateway (%s %s/%s); the"
                          " MTU must be equal on both sides" % (plan_["mtu"], mtu, peer.get("kind"),
                                                                meta.get("namespace"), meta.get("name"))}
    return plan_


def follow_peer(peer_kube, plans, check_mode=False):
    """Announces each ready plan's MTU to the peer cluster of `peer_kube` and compares it with the peer gateway's (the
    plans' errors are updated in place). A plan that is not ready builds nothing: a refused change (held, the tunnel
    runs on as last built) or one still waiting announces no MTU its tunnel does not run. Returns the lines written (or
    that would be, in check mode)."""
    public_keys = peer_kube.list("PublicKey")
    gateways = [dict(g, kind=kind) for kind in KINDS for g in peer_kube.list(kind)]
    done = []
    for p in plans:
        announced = announced_mtu(p) if p.get("ready") else None
        for namespace, name, old, patch in mtu_patches(public_keys, p.get("public_key"), announced):
            done.append("PublicKey/%s/%s of cluster %s: %s %s -> %s" % (
                namespace, name, p.get("remote_cluster_id"), MTU_ANNOTATION, old, announced))
            if not check_mode:
                peer_kube.patch("PublicKey", namespace, name, patch)
        with_peer_mtu(p, peer_gateway(public_keys, gateways, p.get("public_key"), p["kind"]))
    return done


def follow_peers(plans, peer_kubeconfigs, check_mode=False):
    """follow_peer for every peer cluster of `plans` in `peer_kubeconfigs` ({cluster id: kubeconfig}). Returns
    (lines written, {cluster id: why its API could not be used}): a peer cluster out of reach is no failure of
    these gateways, their plans keep the annotation's view."""
    done, errors = [], {}
    by_peer = {}
    for p in plans:
        if p.get("remote_cluster_id") in (peer_kubeconfigs or {}):
            by_peer.setdefault(p["remote_cluster_id"], []).append(p)
    for cluster_id, group in sorted(by_peer.items()):
        kubeconfig = peer_kubeconfigs[cluster_id]
        try:
            kube = Kube(kubeconfig)
            try:
                done += follow_peer(kube, group, check_mode)
            finally:
                kube.close()
        except (KubeError, Unreachable, ApiError) as exc:
            errors[cluster_id] = "the peer cluster's PublicKeys and gateways (kubeconfig %s): %s" % (kubeconfig, exc)
    return done, errors
