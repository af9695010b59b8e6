# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""WireGuard key rotation of a gateway, with overlap: the API steps and the schedule.

A rotation of one gateway X (with peer gateway Y in the other cluster) is four steps, each idempotent:

1. ``prepare``: X's key Secret gets a next key pair beside the current one (``nextPrivateKey``,
   ``nextPublicKey``); the private key is generated here and written only to the Secret.
2. ``announce``: the PublicKey of X in Y's cluster gets the next public key as an annotation
   (``networking.liqo.io/next-public-key``): Y learns it before anything switches.
3. ``promote``: X's Secret holds the next key as its only key (the old private key is overwritten, the
   rotation time is stamped); X's host then switches its interface's private key. WireGuard keeps
   receiving on the current session but sends nothing on it: X's packets wait in wireguard-go's staging
   queue until a new handshake (docs/key-rotation.md).
4. ``adopt``: the PublicKey of X in Y's cluster carries the new key in ``spec.publicKey``, the annotation
   goes; Y's host replaces the peer (keeping the endpoint WireGuard learned) and handshakes at once.

Nothing here returns or logs a private key.
"""

from __future__ import annotations

import base64
import datetime
import re

from ansible_collections.liqo.fabric.plugins.module_utils.gateway.plan import KINDS, secret_name
from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import REMOTE_CLUSTER_ID_LABEL
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.errors import ValidationError
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.keys import (
    CHECK_MODE_PUBLIC_KEY, decode_key, generate_keypair)

PERIOD_ANNOTATION = "networking.liqo.io/key-rotation-period"
ROTATED_AT_ANNOTATION = "networking.liqo.io/keys-rotated-at"
NEXT_KEY_ANNOTATION = "networking.liqo.io/next-public-key"
MIN_PERIOD = 30  # seconds: a rotation takes a few seconds; a shorter period would rotate back to back
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_PERIOD_RE = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


class RotationError(ValueError):
    """Bad input or state; the message names the object and field, never a private key."""


# ------------------------------------------------------------------------------------------- schedule

def parse_period(value, where=PERIOD_ANNOTATION):
    """'90d', '24h', '1h30m', '45s', '3600' (seconds) -> seconds; '', '0', 'off' -> None (no rotation).
    Raises RotationError naming `where` and the value."""
    if value is None:
        return None
    text = str(value).strip().lower()
    if text in ("", "0", "off", "false", "never"):
        return None
    if text.isdigit():
        seconds = int(text)
    else:
        m = _PERIOD_RE.match(text)
        if not m or not any(m.groups()):
            raise RotationError("%s: %r is not a period (e.g. 24h, 7d, 1h30m, 90s, or seconds)" % (where, value))
        seconds = sum(int(n) * _UNITS[u] for n, u in zip(m.groups(), "dhms") if n)
    if seconds < MIN_PERIOD:
        raise RotationError("%s: %r is shorter than the minimum of %d s" % (where, value, MIN_PERIOD))
    return seconds


def parse_time(value):
    """RFC 3339 (as the apiserver writes it, 'Z' or an offset) -> aware datetime; None for none/invalid."""
    if not value:
        return None
    try:
        t = datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=datetime.timezone.utc)


def format_time(t):
    return t.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def schedule(gateway, secret, now):
    """When the gateway's keys are due for rotation: a dict with ``period`` (seconds or None), ``due`` (bool),
    ``due_at`` (datetime or None), ``wait`` (seconds until due, 0 when due) and ``error`` (a bad annotation).

    The period comes from the gateway's annotation; the last rotation from the key Secret's
    ``keys-rotated-at`` annotation, else its creation time (the first keys). No Secret yet: not due (the
    gateway is not built)."""
    ann = (gateway.get("metadata") or {}).get("annotations") or {}
    out = {"period": None, "due": False, "due_at": None, "wait": None, "error": None}
    try:
        out["period"] = parse_period(ann.get(PERIOD_ANNOTATION))
    except RotationError as exc:
        out["error"] = str(exc)
        return out
    user_secret = ((gateway.get("spec") or {}).get("secretRef") or {}).get("name")
    if out["period"] is not None and user_secret:
        out["error"] = ("metadata.annotations[%s]: the gateway's keys are the user's (spec.secretRef: Secret %s), which"
                        " the fabric never writes; rotate them by writing a new privateKey into that Secret, or remove"
                        " spec.secretRef" % (PERIOD_ANNOTATION, user_secret))
        return out
    if out["period"] is None or not secret:
        return out
    meta = secret.get("metadata") or {}
    last = (parse_time((meta.get("annotations") or {}).get(ROTATED_AT_ANNOTATION))
            or parse_time(meta.get("creationTimestamp")))
    if last is None:  # a Secret without times (should not happen): rotate now, the stamp fixes it
        out.update(due=True, due_at=now, wait=0.0)
        return out
    due_at = last + datetime.timedelta(seconds=out["period"])
    wait = (due_at - now).total_seconds()
    out.update(due=wait <= 0, due_at=due_at, wait=max(0.0, wait))
    return out


# ---------------------------------------------------------------------------------- the API steps

def _b64(value):
    return base64.b64encode(value.encode()).decode()


def _unb64(data, key):
    return base64.b64decode(data[key]).decode() if data.get(key) else None


def find_gateway(kube, namespace, remote_cluster_id):
    """The one GatewayServer or GatewayClient of `namespace` labelled with the remote cluster id."""
    found = []
    for kind in KINDS:
        for obj in kube.list(kind, namespace):
            if ((obj.get("metadata") or {}).get("labels") or {}).get(REMOTE_CLUSTER_ID_LABEL) == remote_cluster_id:
                obj.setdefault("kind", kind)
                found.append(obj)
    if len(found) != 1:
        raise RotationError("namespace %s: expected one GatewayServer or GatewayClient labelled %s=%s, found %d"
                            % (namespace, REMOTE_CLUSTER_ID_LABEL, remote_cluster_id, len(found)))
    return found[0]


def _secret(kube, gateway):
    user_secret = ((gateway.get("spec") or {}).get("secretRef") or {}).get("name")
    if user_secret:
        raise RotationError("spec.secretRef: the keys of %s %s/%s are the user's (Secret %s), which the fabric never"
                            " writes; rotate them by writing a new privateKey into that Secret"
                            % (gateway["kind"], gateway["metadata"]["namespace"], gateway["metadata"]["name"], user_secret))
    ns, name = gateway["metadata"]["namespace"], secret_name(gateway["kind"], gateway["metadata"]["name"])
    sec = kube.get("Secret", ns, name)
    data = (sec or {}).get("data") or {}
    if not data.get("privateKey") or not data.get("publicKey"):
        raise RotationError("Secret %s/%s: the gateway has no keys yet (connect or reconcile the gateway first)"
                            % (ns, name))
    return sec, data


def _gateway_view(gateway, secret_obj):
    return {"kind": gateway["kind"], "namespace": gateway["metadata"]["namespace"],
            "name": gateway["metadata"]["name"], "secret": secret_obj["metadata"]["name"]}


def _key_fields(data):
    """What a diff shows of a key Secret: the public keys, and only whether private keys are there."""
    return {"publicKey": _unb64(data, "publicKey"), "privateKey": "(set)" if data.get("privateKey") else None,
            "nextPublicKey": _unb64(data, "nextPublicKey"),
            "nextPrivateKey": "(set)" if data.get("nextPrivateKey") else None}


def prepare(kube, gateway, check=False):
    """Step 1: a next key pair in the gateway's Secret, kept when already there (a rerun announces the same
    key). Returns (result, diff)."""
    sec, data = _secret(kube, gateway)
    before = _key_fields(data)
    out = _gateway_view(gateway, sec)
    out["public_key"] = before["publicKey"]
    if data.get("nextPrivateKey") and data.get("nextPublicKey"):
        out.update(changed=False, next_public_key=before["nextPublicKey"])
        return out, None
    if check:
        nxt = CHECK_MODE_PUBLIC_KEY
    else:
        private, nxt = generate_keypair()
        kube.patch("Secret", sec["metadata"]["namespace"], sec["metadata"]["name"], {
            "metadata": {"resourceVersion": sec["metadata"]["resourceVersion"]},
            "data": {"nextPrivateKey": _b64(private), "nextPublicKey": _b64(nxt)}})
        del private
    after = dict(before, nextPublicKey=nxt, nextPrivateKey="(set)")
    out.update(changed=True, next_public_key=nxt)
    return out, {"before": before, "after": after}


def promote(kube, gateway, next_public_key, check=False):
    """Step 3: the next key becomes the Secret's only key (old private key overwritten, next fields removed,
    rotation time stamped). `next_public_key` is the one announced to the peer: the Secret's next key must be
    it. Without a next key: nothing to do when the current key already is it (a rerun), else an error."""
    _check_key(next_public_key, "next_public_key")
    sec, data = _secret(kube, gateway)
    before = _key_fields(data)
    out = _gateway_view(gateway, sec)
    ns, name = sec["metadata"]["namespace"], sec["metadata"]["name"]
    if not data.get("nextPrivateKey"):
        if before["publicKey"] == next_public_key:
            out.update(changed=False, public_key=next_public_key)
            return out, None
        if not (check and next_public_key == CHECK_MODE_PUBLIC_KEY):
            raise RotationError("Secret %s/%s: no next key to promote (run the prepare step first)" % (ns, name))
    elif before["nextPublicKey"] != next_public_key:
        raise RotationError("Secret %s/%s: nextPublicKey %s is not next_public_key %s (the key announced to the"
                            " peer); run the rotation again" % (ns, name, before["nextPublicKey"], next_public_key))
    if not check:
        kube.patch("Secret", ns, name, {
            "metadata": {"resourceVersion": sec["metadata"]["resourceVersion"],
                         "annotations": {ROTATED_AT_ANNOTATION: format_time(datetime.datetime.now(datetime.timezone.utc))}},
            "data": {"privateKey": data["nextPrivateKey"], "publicKey": data["nextPublicKey"],
                     "nextPrivateKey": None, "nextPublicKey": None}})
    after = {"publicKey": next_public_key, "privateKey": "(set, new)", "nextPublicKey": None, "nextPrivateKey": None}
    out.update(changed=True, public_key=next_public_key)
    return out, {"before": before, "after": after}


def _check_key(value, field):
    if value == CHECK_MODE_PUBLIC_KEY:
        return
    try:
        decode_key(value, field)
    except ValidationError as exc:
        raise RotationError(str(exc)) from None


def _public_key_obj(kube, namespace, name):
    pk = kube.get("PublicKey", namespace, name)
    if pk is None:
        raise RotationError("PublicKey %s/%s: not found (the peer's copy of this gateway's key; connect first)"
                            % (namespace, name))
    return pk


def _pk_fields(pk):
    return {"spec.publicKey": (pk.get("spec") or {}).get("publicKey"),
            "annotation " + NEXT_KEY_ANNOTATION: ((pk.get("metadata") or {}).get("annotations") or {}).get(NEXT_KEY_ANNOTATION)}


def announce(kube, namespace, name, next_public_key, check=False):
    """Step 2: the PublicKey (in the peer's cluster) carries the next key as an annotation."""
    _check_key(next_public_key, "next_public_key")
    pk = _public_key_obj(kube, namespace, name)
    before = _pk_fields(pk)
    after = dict(before, **{"annotation " + NEXT_KEY_ANNOTATION: next_public_key})
    if before == after:
        return {"changed": False, "namespace": namespace, "name": name}, None
    if not check:
        kube.patch("PublicKey", namespace, name, {"metadata": {"resourceVersion": pk["metadata"]["resourceVersion"],
                                                               "annotations": {NEXT_KEY_ANNOTATION: next_public_key}}})
    return {"changed": True, "namespace": namespace, "name": name}, {"before": before, "after": after}


def adopt(kube, namespace, name, next_public_key, check=False):
    """Step 4: the PublicKey's spec.publicKey is the new key, the annotation is removed."""
    _check_key(next_public_key, "next_public_key")
    pk = _public_key_obj(kube, namespace, name)
    before = _pk_fields(pk)
    after = {"spec.publicKey": next_public_key, "annotation " + NEXT_KEY_ANNOTATION: None}
    if before == after:
        return {"changed": False, "namespace": namespace, "name": name}, None
    if not check:
        kube.patch("PublicKey", namespace, name, {
            "metadata": {"resourceVersion": pk["metadata"]["resourceVersion"], "annotations": {NEXT_KEY_ANNOTATION: None}},
            "spec": {"publicKey": next_public_key}})
    return {"changed": True, "namespace": namespace, "name": name}, {"before": before, "after": after}
