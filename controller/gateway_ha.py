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
import socket
import subprocess

from controller import peer_health
from controller.kubeapi import ApiError
from controller.watchmap import RESOURCES

ACTIVE_LABEL = "networking.liqo.io/active"
log = logging.getLogger(__name__)


def own_pod_name() -> str:
    """The pod this engine runs in (the Downward API's POD_NAME; a pod's hostname is its name)."""
    return os.environ.get("POD_NAME") or socket.gethostname()


def mark(api, namespace: str, pod: str, active: bool) -> bool:
    """Sets or removes the active label on `pod`; False (logged) when the API refuses or the pod is gone."""
    body = {"metadata": {"labels": {ACTIVE_LABEL: "true" if active else None}}}
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
