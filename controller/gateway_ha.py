"""Active/standby gateway pods (the seeds' "active/standby high-availability").

The replicas of a gateway's Deployment all run the engine in gateway mode; the one holding the gateway's
Lease is the active one: it labels its own pod `networking.liqo.io/active=true`, which the server's Service
selects and the node agents' overlay follows (overlay_incluster.active_pod), and it alone reaches the peer.
A standby is warm: it runs the same playbook with `gateway_standby` and builds the tunnel, the NAT and its end
of the overlay, but its client peer has no endpoint (two pods reaching the peer with one WireGuard key would make
the peer's endpoint flap) and it publishes nothing; nothing reaches it (the Service and the nodes' links point to
the active pod). Taking over is the label and one run that gives the peer its endpoint. A pod that loses the
Lease while alive takes its label off and exits, so its container restarts as a clean standby (wireguard-go, a
child of the container, goes with it).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
from typing import Dict

from controller import peer_health
from controller.engine.feature import Feature
from controller.kubeapi import ApiError
from controller.watchmap import RESOURCES

ACTIVE_LABEL = "networking.liqo.io/active"
# the ReplicaSet removes the pods of a lower cost first: a roll (maxSurge 1, maxUnavailable 0) or a scale-down
# takes the standby before the active pod, so a roll hands over once, to a new warm standby
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
ACTIVE_COST = "100"
log = logging.getLogger(__name__)


def own_pod_name() -> str:
    """The pod this engine runs in (the Downward API's POD_NAME; a pod's hostname is its name)."""
    return os.environ.get("POD_NAME") or socket.gethostname()


def mark(api, namespace: str, pod: str, active: bool) -> bool:
    """Sets or removes the active label on `pod`, with its deletion cost; False (logged) when the API refuses or the
    pod is gone."""
    body = {"metadata": {"labels": {ACTIVE_LABEL: "true" if active else None},
                         "annotations": {DELETION_COST: ACTIVE_COST if active else None}}}
    try:
        api.request("PATCH", RESOURCES["Pod"].path(namespace, pod), body=body,
                    content_type="application/merge-patch+json")
    except ApiError as exc:
        if exc.status != 404:
            log.warning("active label not %s", "set" if active else "removed",
                        extra={"fields": {"pod": f"{namespace}/{pod}", "error": str(exc)}})
        return False
    log.info("gateway pod %s", "active" if active else "standby", extra={"fields": {"pod": f"{namespace}/{pod}"}})
    return True


def drop_links() -> list:
    """Deletes this pod's tunnel (its TUN device: wireguard-go exits with it) and its overlay links: a pod that
    stops being active stops carrying traffic at once, instead of for its termination grace period next to the
    new active pod (two pods with one key make the peer's endpoint flap, and an overlay still delivering to a
    pod without its tunnel sends the packets out of its eth0). A gateway pod's netns holds no other TUN, VXLAN
    or Geneve device."""
    try:
        links = json.loads(subprocess.run(["ip", "-j", "-d", "link", "show"], capture_output=True, text=True,
                                          check=True, timeout=10).stdout or "[]")
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        log.warning("links not listed", extra={"fields": {"error": str(exc)}})
        return []
    gone = []
    for link in links:
        if (link.get("linkinfo") or {}).get("info_kind") in ("tun", "vxlan", "geneve"):
            if subprocess.run(["ip", "link", "del", link["ifname"]], capture_output=True, check=False, timeout=10).returncode == 0:
                gone.append(link["ifname"])
    log.info("tunnel and overlay links dropped", extra={"fields": {"links": gone}})
    return gone


def activate_client(gateway: dict, cluster_id: str) -> list:
    """A client standby that took the Lease: its peer gets the endpoint of the GatewayClient and the keepalive
    now (module_utils/wireguard/session.activate), so the handshake starts within a second of the takeover
    instead of after the active pod's first playbook run, which follows and finds the peer as it plans it.
    [] when there is nothing to do: a tunnel not built yet, an endpoint the plan refuses (the caller passes
    GatewayClients only: a server's standby has no peer endpoint to set)."""
    target = peer_health.target_of(gateway, cluster_id)
    endpoint, problem = peer_health.gwplan.endpoint_spec(gateway)
    if not target or problem or not endpoint["addresses"] or not endpoint["port"]:
        return []
    try:
        done = peer_health.wgs.activate(target["interface"], "%s:%s" % (endpoint["addresses"][0], endpoint["port"]),
                                        peer_health.gwplan.KEEPALIVE)
    except Exception as exc:  # pylint: disable=broad-except
        log.warning("standby tunnel not activated", extra={"fields": {"error": str(exc)[:300]}})
        return []
    log.info("standby tunnel activated", extra={"fields": {"interface": target["interface"], "peers": len(done)}})
    return done


class GatewayHA(Feature):
    """The gateway mode's active/standby (this module's docstring): the Lease holder labels its pod active and a
    client's holder activates its tunnel; a pod that loses the Lease alive, or stops, drops its links and label."""

    name = "gateway HA"

    def __init__(self, engine, gateway: dict):
        self.engine = engine
        self.gateway = gateway
        self.pod_name = own_pod_name()
        self._cluster_ids: Dict[str, str] = {}
        self._going = False

    def cluster_id(self, cs) -> str:
        """This cluster's id (its interface names derive from it), read once: a takeover does not wait for it."""
        if not self._cluster_ids.get(cs.name):
            try:
                self._cluster_ids[cs.name] = peer_health.read_cluster_id(cs.api)
            except ApiError as exc:
                log.warning("cluster id not read", extra={"fields": {"cluster": cs.name, "error": str(exc)}})
                return ""
        return self._cluster_ids[cs.name]

    def start(self, cs) -> None:
        if cs.leader:  # a restarted container starts as a standby: no Service traffic, no overlay
            mark(cs.api, self.gateway["namespace"], self.pod_name, False)
            self.cluster_id(cs)   # known before a takeover needs it

    def leading(self, cs, leading: bool) -> None:
        if leading:
            # a client's own tunnel first (a local change, before any run can take the interface's lock); then the
            # label, which a server's Service follows (the node agents re-pointed their links when the old pod
            # began to go: controller/node_repoint.py)
            self._activate_standby(cs)
            mark(cs.api, self.gateway["namespace"], self.pod_name, True)
            return
        # a gateway pod that lost its Lease alive: label off, then exit to restart as a clean standby
        mark(cs.api, self.gateway["namespace"], self.pod_name, False)
        drop_links()
        log.warning("gateway Lease lost: exiting to restart as a standby", extra={"fields": {"cluster": cs.name}})
        os.kill(os.getpid(), signal.SIGTERM)

    def stop(self) -> None:
        # the Service and the overlay leave this pod before the Lease is released
        for cs in self.engine.clusters.values():
            if cs.leader and cs.acting():   # the links first: this pod stops carrying traffic at once
                drop_links()
                mark(cs.api, self.gateway["namespace"], self.pod_name, False)

    def on_event(self, cs, kind: str, etype: str, obj: dict, old) -> None:
        """This pod's own deletion began (`kubectl delete`, a roll's scale-down): it stops now, as on SIGTERM (stop():
        links and label off, the Lease released), and does not wait for the kubelet's SIGTERM, which comes seconds
        later on a busy node. Its standby takes over now (holder_pod_going) and every node agent re-points now; an
        old active pod still up meanwhile would take a peer's handshake that the rest of its cluster no longer
        follows (both gateways of a peering replaced at once)."""
        if kind != "Pod" or self._going:
            return
        meta = obj.get("metadata") or {}
        if meta.get("name") != self.pod_name or meta.get("namespace") != self.gateway["namespace"]:
            return
        if etype == "DELETED" or meta.get("deletionTimestamp"):
            self._going = True
            log.info("gateway pod being deleted: stopping now", extra={"fields": {"pod": f"{meta.get('namespace')}/{self.pod_name}"}})
            os.kill(os.getpid(), signal.SIGTERM)

    def holder_pod_going(self, cs, holder: str) -> bool:
        """A gateway's Lease holder (identity `<pod name>-<pid>`) whose pod is being deleted, or gone from the synced
        cache of the gateway's pods: its standby takes over at `kubectl delete`, not after the old pod's shutdown."""
        inf = cs.informers.get("Pod")
        pod_name = holder.rsplit("-", 1)[0]
        if inf is None or not pod_name or pod_name == self.pod_name:
            return False
        pod = inf.cache.get(f"{self.gateway['namespace']}/{pod_name}")
        if pod is None:
            return inf.synced.is_set()
        return bool((pod.get("metadata") or {}).get("deletionTimestamp"))

    def _activate_standby(self, cs) -> None:
        """A client standby's tunnel reaches the peer at once (activate_client)."""
        obj = cs.obj(self.gateway["kind"], f"{self.gateway['namespace']}/{self.gateway['name']}")
        if obj and self.gateway["kind"] == "GatewayClient":   # a server's standby has nothing to activate
            cluster_id = self.cluster_id(cs)
            if cluster_id:
                activate_client(dict(obj, kind=self.gateway["kind"]), cluster_id)
