# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The live health of a peer written to its Connection: status.value, status.latency and the Established
condition, by a merge patch of the status subresource (no resourceVersion: the probe's view is the newest).

`api` is anything with request(method, path, query=None, body=None, content_type=...): module_utils'
Kube and the controller's ClusterAPI both are."""

from __future__ import annotations

from ansible_collections.liqo.fabric.plugins.module_utils.health.prober import CONNECTED, latency_text
from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import now_rfc3339, set_condition
from ansible_collections.liqo.fabric.plugins.module_utils.kube.rest import ApiError

CONDITION = "Established"
PATH = "/apis/networking.liqo.io/v1beta1/namespaces/%s/connections/%s"


# Reasons of an Error the probe itself can see end (the peer answering again). Any other reason (an MTU mismatch,
# a refused field, a key problem) is the gateway's plan: only a run that finds it fixed clears it; a probe whose
# small pings still pass must not turn it back to Connected.
PROBE_REASONS = frozenset(("PeerUnreachable", "NoInterface", "NoHandshake", "Probing"))


def status_patch(current_status, value, reason, message, latency_us, now):
    """The merge patch of a Connection's status for this health, or None when nothing would change but the
    latency's timestamp. The Established condition is rewritten only when the value changes (keeping its
    observedGeneration): while the value holds, the gateway role's publish and the probe agree on it. An Error
    whose reason is not the probe's to clear (PROBE_REASONS) is left as it is."""
    cur = current_status or {}
    if value == CONNECTED and cur.get("value") == "Error":
        held = next((c for c in cur.get("conditions") or [] if c.get("type") == CONDITION), {})
        if held.get("reason") and held["reason"] not in PROBE_REASONS:
            return None
    latency = {"value": latency_text(latency_us), "timestamp": now} if value == CONNECTED and latency_us is not None \
        else None
    old_latency = (cur.get("latency") or {}).get("value")
    if cur.get("value") == value:
        if (latency or {}).get("value") == old_latency:
            return None
        return {"status": {"latency": latency}}
    old = next((c for c in cur.get("conditions") or [] if c.get("type") == CONDITION), {})
    conditions, _changed = set_condition(cur.get("conditions"), CONDITION, "True" if value == CONNECTED else "False",
                                         reason, message, old.get("observedGeneration"))
    return {"status": {"value": value, "latency": latency, "conditions": conditions}}


def write(api, namespace, name, value, reason, message, latency_us=None):
    """Writes the health to Connection namespace/name; False when it does not exist (the gateway role or
    the gateway pod creates it) or nothing changed."""
    path = PATH % (namespace, name)
    try:
        cur = api.request("GET", path)
    except ApiError as exc:
        if exc.status == 404:
            return False
        raise
    patch = status_patch((cur or {}).get("status"), value, reason, message, latency_us, now_rfc3339())
    if patch is None:
        return False
    api.request("PATCH", path + "/status", body=patch, content_type="application/merge-patch+json")
    return True
