# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node agent's overlay applied in process when a gateway pod changes (a failover, a rollout).

The node agent's playbook run (playbooks/internal/node_agent.yml) is the reference: it plans the node's overlay
from the API and applies it, records the manifest for the drift checks and its result. But a run costs a spawn
and an Ansible start (1-7 s on 2 busy vCPUs), and during a failover every node's link still points to the pod
that is gone. So on every event of a gateway pod, this thread plans the node's overlay with the same functions
(`overlay_incluster.gather` / `plan_node`, the module's own) and applies it with `overlay_dataplane` (a lock per
network namespace keeps it and a running module apart). The playbook run the same event queues follows as
before and finds nothing left to change. Events coming while one apply runs are folded into the next one.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Optional

from controller import ensure_collection_importable

ensure_collection_importable()
# pylint: disable=wrong-import-position
from ansible_collections.liqo.fabric.plugins.module_utils import overlay_dataplane  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.kube_client import Kube, KubeError  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.overlay_incluster import (  # noqa: E402
    TABLE, OverlayPlanError, gather, plan_node)

log = logging.getLogger(__name__)


class NodeRepoint(threading.Thread):
    """Applies the overlay of node `node_name` in process on `kick()`. `options`: the role's variables the
    playbook would pass (node_overlay_link_type, node_overlay_incluster_mtu, node_overlay_masquerade_bypass)."""

    def __init__(self, node_name: str, kubeconfig: Optional[str], stop: threading.Event, options: Optional[dict] = None):
        super().__init__(name="node-repoint", daemon=True)
        self.node_name = node_name
        self.kubeconfig = kubeconfig
        self.stop_event = stop
        self.options = options or {}
        self.wanted = threading.Event()
        self._kube: Optional[Kube] = None

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
            self._kube = Kube(self.kubeconfig)
        kube = self._kube
        try:
            node = kube.get("Node", None, self.node_name)
            if node is None:
                raise OverlayPlanError(f"node_name: '{self.node_name}' is not a Node of the cluster")
            facts = gather(kube)
        except KubeError as exc:
            raise RuntimeError(f"the API: {exc}") from None
        host = plan_node(node, facts, self.options.get("node_overlay_link_type") or "auto",
                         self.options.get("node_overlay_incluster_mtu"),
                         bool(self.options.get("node_overlay_masquerade_bypass", True)))
        result = overlay_dataplane.sync_overlay_dataplane(host, table=TABLE, state="present")
        if result["changed"]:
            pod = facts.get("pod") or {}
            log.info("overlay re-pointed in process", extra={"fields": {
                "gateway": facts.get("gateway"), "gateway_pod": pod.get("name"), "pod_ip": pod.get("ip"),
                "writes": result["writes"], "seconds": round(time.monotonic() - started, 3)}})
        return result
