# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node agent's overlay applied in process when a gateway pod changes (a failover, a rollout) or a gateway's
status.mtu does (spec.mtu auto: the path watch of the active gateway pod changed the tunnel's MTU).

The node agent's playbook run (playbooks/internal/node_agent.yml) is the reference: it plans the node's overlay
from the API and applies it, records the manifest for the drift checks and its result. But a run costs a spawn
and an Ansible start (seconds on a busy node), and during a failover every node's link still points to the pod
that is gone. So on every event of a gateway pod, this thread plans the node's overlay with the same functions
(`overlay_incluster.gather` / `plan_node`, the module's own) and applies it with `overlay_dataplane` (a lock per
network namespace keeps it and a running module apart). The playbook run the same event queues follows as
before and finds nothing left to change. Events coming while one apply runs are folded into the next one.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import List, Optional

from controller.engine.feature import Feature
from controller.library import kube_client, overlay_dataplane, overlay_incluster

log = logging.getLogger(__name__)


class NodeRepoint(threading.Thread):
    """Applies the overlay of node `node_name` in process on `kick()`. `options`: the role's variables the
    playbook would pass (node_overlay_link_type, node_overlay_incluster_mtu, node_overlay_masquerade_bypass,
    node_overlay_pod_port_route)."""

    def __init__(self, node_name: str, kubeconfig: Optional[str], stop: threading.Event, options: Optional[dict] = None):
        super().__init__(name="node-repoint", daemon=True)
        self.node_name = node_name
        self.kubeconfig = kubeconfig
        self.stop_event = stop
        self.options = options or {}
        self.wanted = threading.Event()
        self._kube: Optional[kube_client.Kube] = None

    def kick(self) -> None:
        self.wanted.set()

    def run(self) -> None:
        while not self.stop_event.is_set():
            if not self.wanted.wait(0.5):
                continue
            self.wanted.clear()
            try:
                self.apply()
            except Exception as exc:  # pylint: disable=broad-except
                # the playbook run that the same event queued applies the overlay anyway
                log.warning("overlay not re-pointed in process", extra={"fields": {"error": str(exc)}})
                self._close()
        self._close()

    def _close(self) -> None:
        if self._kube:
            self._kube.close()
            self._kube = None

    def apply(self) -> dict:
        """Plans and applies this node's overlay; returns overlay_dataplane's result."""
        started = time.monotonic()
        if self._kube is None:
            self._kube = kube_client.Kube(self.kubeconfig)
        kube = self._kube
        try:
            node = kube.get("Node", None, self.node_name)
            if node is None:
                raise overlay_incluster.OverlayPlanError(f"node_name: '{self.node_name}' is not a Node of the cluster")
            facts = overlay_incluster.gather(kube)
        except kube_client.KubeError as exc:
            raise RuntimeError(f"the API: {exc}") from None
        host = overlay_incluster.plan_node(node, facts, self.options.get("node_overlay_link_type") or "auto",
                                           self.options.get("node_overlay_incluster_mtu"),
                                           bool(self.options.get("node_overlay_masquerade_bypass", True)),
                                           bool(self.options.get("node_overlay_pod_port_route", True)))
        result = overlay_dataplane.sync_overlay_dataplane(host, table=overlay_incluster.TABLE, state="present")
        if result["changed"]:
            pod = facts.get("pod") or {}
            log.info("overlay re-pointed in process", extra={"fields": {
                "gateway": facts.get("gateway"), "gateway_pod": pod.get("name"), "pod_ip": pod.get("ip"),
                "writes": result["writes"], "seconds": round(time.monotonic() - started, 3)}})
        return result


GATEWAY_KINDS = ("GatewayServer", "GatewayClient")


def _mtu(obj: Optional[dict]) -> Optional[dict]:
    """A gateway's status.mtu: with spec.mtu auto, the MTU its path watch set on the tunnel, which the node's overlay
    links take at once (a black hole below the links' MTU stalls every flow through them)."""
    return ((obj or {}).get("status") or {}).get("mtu")


class NodeRepointFeature(Feature):
    """The node mode's feature: a NodeRepoint thread per cluster, kicked by every Pod event (the gateway pods'
    among them) and every change of a gateway's status.mtu, ahead of the playbook run the same event queues."""

    name = "node re-pointing"

    def __init__(self, engine, node_name: str, options: Optional[dict] = None):
        self.repoint = {name: NodeRepoint(node_name, cs.kubeconfig, engine.stop, options=options)
                        for name, cs in engine.clusters.items()}
        self.started: List[NodeRepoint] = []

    def start(self, cs) -> None:
        self.repoint[cs.name].start()
        self.started.append(self.repoint[cs.name])

    def on_event(self, cs, kind: str, etype: str, obj: dict, old: Optional[dict]) -> None:
        if cs.name in self.repoint and (kind == "Pod" or kind in GATEWAY_KINDS and _mtu(obj) != _mtu(old)):
            self.repoint[cs.name].kick()

    def threads(self) -> list:
        return list(self.started)
