# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine's three modes (one image, one engine: docs/in-cluster.md) and the features each registers.

- controller: the API side (with --inventory also the agentless dataplane); a Lease per cluster; the served clusters
  as each other's peers (fabric_peer_kubeconfigs); key rotation; the CRDs' storage migration when it takes a Lease.
- node: the node agent: its own Node and the Pods on it, no Lease; the overlay re-pointed in process.
- gateway: one gateway pod: its own GatewayServer/GatewayClient in its namespace, a Lease per gateway; gateway HA,
  live peer health, the standby's runs.
"""
from __future__ import annotations

import os
from typing import List, Optional

from controller.engine.mode import Lease, Mode
from controller.gateway_ha import GatewayHA
from controller.gateway_standby import GatewayStandby
from controller.key_rotation import KeyRotation
from controller.node_repoint import NodeRepointFeature
from controller.peer_clusters import PeerClusters
from controller.peer_health import PeerHealthFeature
from controller.storage_migration import StorageMigration
from controller.watchmap import RESOURCES


class ControllerMode(Mode):
    def __init__(self, namespaces: Optional[List[str]] = None, key_rotation_check: float = 10.0,
                 storage_migration: bool = True):
        super().__init__(namespaces)
        self.key_rotation_check = key_rotation_check
        self.storage_migration = storage_migration

    def features(self, engine) -> list:
        out = [StorageMigration(engine)] if self.storage_migration else []
        gw_entry = engine.by_kind.get("GatewayServer") or engine.by_kind.get("GatewayClient")
        if not (gw_entry and gw_entry.playbook):
            return out
        peers = PeerClusters(engine)
        return out + [peers, KeyRotation(engine, os.path.dirname(gw_entry.playbook), period=self.key_rotation_check,
                                         peers=peers)]


class NodeMode(Mode):
    name = "node"
    elects = False
    persists_state = False

    def __init__(self, node_name: str, namespaces: Optional[List[str]] = None, repoint_in_process: bool = True):
        super().__init__(namespaces)
        self.node_name = node_name
        self.repoint_in_process = repoint_in_process

    def field_selector(self, kind: str, label_selector: Optional[str]) -> Optional[str]:
        """Its Node and the Pods on it (unless a label selector picks pods on every node, e.g. the gateway pods its
        overlay leads to)."""
        if kind == "Pod" and label_selector:
            return None
        if self.node_name:
            return {"Pod": f"spec.nodeName={self.node_name}", "Node": f"metadata.name={self.node_name}"}.get(kind)
        return None

    def run_vars(self) -> dict:
        return {"fabric_node": self.node_name}

    def features(self, engine) -> list:
        pod_entry = engine.by_kind.get("Pod") if self.node_name and self.repoint_in_process else None
        if not (pod_entry and pod_entry.enabled):
            return []
        return [NodeRepointFeature(engine, self.node_name, pod_entry.vars)]


class GatewayMode(Mode):
    name = "gateway"
    persists_state = False

    def __init__(self, gateway: dict, node_name: str = "", standby_warmup_delay: float = 0.0):
        # a gateway pod watches its own namespace only
        super().__init__([gateway["namespace"]])
        self.gateway = gateway     # {kind, namespace, name}
        self.node_name = node_name
        self.standby_warmup_delay = standby_warmup_delay
        self.zygote_at_start = standby_warmup_delay <= 0
        self.ha: Optional[GatewayHA] = None
        self._owner: Optional[dict] = None   # the gateway's ownerReference, once known (owner_reference)

    def field_selector(self, kind: str, label_selector: Optional[str]) -> Optional[str]:
        """Its own GatewayServer/GatewayClient."""
        return f"metadata.name={self.gateway['name']}" if kind == self.gateway["kind"] else None

    def scoped(self, kind: str) -> bool:
        return True

    def lease(self, namespace: str) -> Lease:
        # a standby takes a released Lease within 0.25 s (failover), and a holder's pod being deleted at once; the
        # Lease is owned by the gateway, so the garbage collector deletes it with the gateway (the gateway's Role
        # cannot delete it, and no pod of a deleted gateway is left to)
        return Lease(f"liqo-fabric-gateway-{self.gateway['name']}", self.gateway["namespace"], retry=0.25,
                     holder_gone=self.ha.holder_pod_going if self.ha else None, owner=self.owner_reference)

    def owner_reference(self, cs) -> Optional[dict]:
        """The gateway's ownerReference, from the synced cache of its own object (None until it is there). Kept once
        known: a standby that takes over while the gateway is being deleted, after it left the cache, makes a new
        Lease owned by the deleted gateway, which the garbage collector deletes at once."""
        kind, namespace, name = self.gateway["kind"], self.gateway["namespace"], self.gateway["name"]
        uid = ((cs.obj(kind, f"{namespace}/{name}") or {}).get("metadata") or {}).get("uid")
        if uid:
            self._owner = {"apiVersion": RESOURCES[kind].api_version, "kind": kind, "name": name, "uid": uid}
        return self._owner

    def run_vars(self) -> dict:
        return {"fabric_node": self.node_name}

    def features(self, engine) -> list:
        self.ha = GatewayHA(engine, self.gateway)
        return [self.ha, PeerHealthFeature(engine, self.gateway, self.ha.cluster_id),
                GatewayStandby(engine, self.gateway, self.standby_warmup_delay)]


def make(mode: str = "controller", node_name: str = "", gateway: Optional[dict] = None,
         namespaces: Optional[List[str]] = None, repoint_in_process: bool = True, standby_warmup_delay: float = 0.0,
         key_rotation_check: float = 10.0, storage_migration: bool = True) -> Mode:
    """The mode `mode` with the command line's settings (controller/__main__.py)."""
    if mode == "node":
        return NodeMode(node_name, namespaces, repoint_in_process=repoint_in_process)
    if mode == "gateway":
        return GatewayMode(gateway, node_name, standby_warmup_delay=standby_warmup_delay)
    return ControllerMode(namespaces, key_rotation_check=key_rotation_check, storage_migration=storage_migration)
