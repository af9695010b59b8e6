# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A gateway's Deployment rolls after the node agents.

A gateway roll hands the active role over to another pod (a new pod IP); every node agent then points its node's
overlay link at that pod. A node whose agent is restarting (the DaemonSet's own roll: the old agent stops, the
kubelet removes its pod, the DaemonSet starts the next one: about 10 s a node) cannot follow, and its pods lose
the peering until the new agent runs. So while the node-agent DaemonSet is not rolled out (a template change not
observed, agents not updated or not available), the controller holds back a change to a gateway Deployment's pod
template: the Deployment stays as it is and the change is applied once the DaemonSet has rolled out (its status
change reruns the gateway: controller/watches-in-cluster.yaml). A hold lasts at most HOLD_MAX seconds (an agent
that never comes back, a node down): then the gateway rolls anyway. The live Deployment carries the time the hold
began in HELD_SINCE.
"""

from __future__ import annotations

import time

AGENT_SELECTOR = "app.kubernetes.io/name=liqo-fabric-node-agent"
HELD_SINCE = "networking.liqo.io/rollout-held-since"
HOLD_MAX = 600.0


def agents_rolling(daemonsets):
    """Why the node-agent DaemonSets are not rolled out ('' when they are): a template change the DaemonSet
    controller has not observed yet, agents not on the current template, or not available."""
    why = []
    for ds in daemonsets:
        meta, st = ds.get("metadata") or {}, ds.get("status") or {}
        name = "%s/%s" % (meta.get("namespace"), meta.get("name"))
        want = st.get("desiredNumberScheduled") or 0
        if (st.get("observedGeneration") or 0) < (meta.get("generation") or 0):
            why.append("%s: template change not observed yet" % name)
        elif (st.get("updatedNumberScheduled") or 0) < want or (st.get("numberAvailable") or 0) < want:
            why.append("%s: %d of %d agents updated, %d available" % (
                name, st.get("updatedNumberScheduled") or 0, want, st.get("numberAvailable") or 0))
    return "; ".join(why)


def held_since(deployment):
    """When the hold of the live Deployment began (epoch seconds), None when it is not held."""
    value = ((deployment.get("metadata") or {}).get("annotations") or {}).get(HELD_SINCE)
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def decide(live, would_be, rolling, now=None):
    """'hold', 'expired' (held for HOLD_MAX: roll anyway) or 'apply' for a gateway Deployment: `live` the current
    object (None: a new gateway, nothing to hold), `would_be` the object a server-side dry-run apply returned,
    `rolling` agents_rolling()'s reason."""
    if live is None or not rolling:
        return "apply"
    if (live.get("spec") or {}).get("template") == (would_be.get("spec") or {}).get("template"):
        return "apply"   # no roll in this change
    since = held_since(live)
    if since is not None and (now if now is not None else time.time()) - since > HOLD_MAX:
        return "expired"
    return "hold"
