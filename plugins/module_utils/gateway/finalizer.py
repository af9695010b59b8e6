# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Deleting gateways with or without a controller. The controller adds its finalizer to every GatewayServer and
GatewayClient and lets a deleted one go after its teardown (controller/watches*.yaml: the agentless
internal/teardown_gateway.yml, the in-cluster internal/reconcile_gateway_manifests.yml). While no controller holds
its Lease, nobody would: `delete_gateways` then does that teardown's API side itself (the in-cluster Deployment and
Service rendered for the gateway, `incluster.controller_teardown`) and removes the finalizer. The dataplane on
agentless gateway hosts is the gateway role's (`gateway_state: absent`), which the playbooks run before."""

from __future__ import annotations

import time

from ansible_collections.liqo.fabric.plugins.module_utils.gateway.incluster import controller_teardown
from ansible_collections.liqo.fabric.plugins.module_utils.gateway.plan import KINDS
from ansible_collections.liqo.fabric.plugins.module_utils.kube.apply import describe, diff_entry, redact
from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import GROUP, VERSION, ApiError

GATEWAY_FINALIZER = "networking.liqo.io/fabric-gateway"   # the controller's (controller/watches*.yaml)


class GatewayDeleteError(Exception):
    """Gateways still there when the wait ends; the message says who holds them and what to do."""


def remove_finalizer(kube, obj, finalizer=GATEWAY_FINALIZER):
    """Removes `finalizer` from `obj` (a merge patch guarded by its resourceVersion: a conflict reads it again and
    tries again). True when removed, False when the object is gone or does not carry it."""
    meta = obj["metadata"]
    for _attempt in range(8):
        finalizers = list(meta.get("finalizers") or [])
        if finalizer not in finalizers:
            return False
        body = {"metadata": {"finalizers": [f for f in finalizers if f != finalizer],
                             "resourceVersion": meta.get("resourceVersion")}}
        try:
            kube.patch(obj["kind"], meta["namespace"], meta["name"], body)
            return True
        except ApiError as exc:
            if exc.status == 404:
                return False
            if exc.status != 409:
                raise
        fresh = kube.get(obj["kind"], meta["namespace"], meta["name"])
        if fresh is None or fresh["metadata"].get("uid") != meta.get("uid"):
            return False
        meta = fresh["metadata"]
    raise GatewayDeleteError("%s: the finalizer %s could not be removed (the object kept changing)"
                             % (describe(obj), finalizer))


def _gateways(kube, namespace, kinds, name):
    out = []
    for kind in kinds:
        objs = [kube.get(kind, namespace, name)] if name else kube.list(kind, namespace)
        for obj in objs:
            if obj is not None:
                obj["kind"], obj["apiVersion"] = kind, "%s/%s" % (GROUP, VERSION)
                out.append(obj)
    return out


def _still_there(kube, obj):
    """The object as it is now, or None once it is gone (or replaced by a new one of the same name)."""
    meta = obj["metadata"]
    cur = kube.get(obj["kind"], meta["namespace"], meta["name"])
    if cur is None or cur["metadata"].get("uid") != meta.get("uid"):
        return None
    cur["kind"] = obj["kind"]
    return cur


def acting_here(controller, force):
    """Whether the finalizer's work is done here: forced, or the Lease read and held by nobody."""
    return force or controller["held"] is False


def delete_gateways(kube, namespace, lease, kinds=tuple(KINDS), name=None, force=False, timeout=120,
                    check_mode=False, sleep=time.sleep, monotonic=time.monotonic):
    """Deletes the gateways of `namespace` (or the one `name`d) and waits until they are gone. While `lease`
    (kube.lease.LeaseWatch of the controller's Lease) is held, the controller's finalizer lets them go; otherwise (or
    with `force`) the finalizer's work is done here and the finalizer removed. Check mode deletes and waits for
    nothing and says what would be done.

    Returns {deleted, finalized, torn_down, controller, resources, diffs}: `Kind ns/name` of the gateways deleted,
    of those whose finalizer was removed here, of what their teardown deleted (Deployment, Service); the last
    reading of the Lease (None when there was nothing to delete)."""
    gws = _gateways(kube, namespace, kinds, name)
    out = {"deleted": [describe(g) for g in gws], "finalized": [], "torn_down": [], "controller": None,
           "resources": [redact(g) for g in gws], "diffs": [diff_entry(g, None) for g in gws]}
    if not gws:
        return out

    def finalize(obj):
        meta = obj["metadata"]
        if GATEWAY_FINALIZER not in (meta.get("finalizers") or []) or describe(obj) in out["finalized"]:
            return
        out["torn_down"] += controller_teardown(kube, obj["kind"], meta["namespace"], meta["name"], check_mode)
        if check_mode or remove_finalizer(kube, obj):
            out["finalized"].append(describe(obj))

    if check_mode:
        out["controller"] = lease.read()
        if acting_here(out["controller"], force):
            for obj in gws:
                finalize(obj)
        return out
    for obj in gws:
        if not obj["metadata"].get("deletionTimestamp"):
            kube.delete(obj["kind"], namespace, obj["metadata"]["name"])
    deadline, interval = monotonic() + timeout, 0.05
    while True:
        left = [cur for cur in (_still_there(kube, g) for g in gws) if cur is not None]
        if not left:
            return out
        if any(GATEWAY_FINALIZER in (g["metadata"].get("finalizers") or []) for g in left):
            out["controller"] = lease.read()
            if acting_here(out["controller"], force):
                done = len(out["finalized"])
                for obj in left:
                    finalize(obj)
                if len(out["finalized"]) > done:
                    continue   # look again at once: most are gone now
        if monotonic() >= deadline:
            raise GatewayDeleteError(_timeout_message(left, timeout, out["controller"]))
        sleep(interval)
        interval = min(interval * 2, 1.0)


def _timeout_message(left, timeout, controller):
    what = "; ".join("%s (finalizers: %s)" % (describe(g), ", ".join(g["metadata"].get("finalizers") or []) or "none")
                     for g in left)
    msg = "%s still there after %s s" % (what, timeout)
    ours = any(GATEWAY_FINALIZER in (g["metadata"].get("finalizers") or []) for g in left)
    if not ours:
        return msg + ": their other finalizers are not the fabric's"
    if controller and controller["held"]:
        return msg + (": %s and has not let them go; the gateways' Degraded condition (TeardownFailed) and its log "
                      "say why. With that controller stopped, force=true does its teardown here" % controller["reason"])
    return msg + ": %s. force=true does the controller's teardown here" % (controller or {}).get("reason", "")
