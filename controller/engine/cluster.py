# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One served cluster: its API client, informers and Lease, the members of each work key, and what the last
successful runs applied there (input hashes, dataplane manifests)."""
from __future__ import annotations

import threading
from typing import Dict, List, Optional, Set

from controller.kubeapi import ClusterAPI, Informer, obj_key
from controller.leader import LeaderElector
from controller.status import StatusWriter
from controller.watchmap import WatchEntry


def member_id(kind: str, obj: dict) -> str:
    """A member of a work key: `<kind>/<cache key>`."""
    return f"{kind}/{obj_key(obj)}"


class ClusterState:
    def __init__(self, name: str, kubeconfig: Optional[str]):
        self.name = name
        self.kubeconfig = kubeconfig
        self.api = ClusterAPI(name, kubeconfig)
        self.status = StatusWriter(self.api)
        self.informers: Dict[str, Informer] = {}
        self.leader: Optional[LeaderElector] = None
        self.lock = threading.RLock()
        self.members: Dict[str, Dict[str, tuple]] = {}   # work key -> {member id: (kind, cache key)}
        self.key_entry: Dict[str, WatchEntry] = {}
        self.applied: Dict[str, dict] = {}                # work key -> applied repr (inputs.applied_repr)
        self.manifests: Dict[str, object] = {}            # work key -> dataplane manifest
        self.failures: Dict[str, int] = {}
        self.drift_unreadable: Dict[str, List[str]] = {}  # work key -> what its last drift check could not read
        self.forced_for_manifest: Set[str] = set()        # keys a resync already ran by force to record a manifest
        self.epoch = 0                                    # bumped when related objects / Secrets change
        self.hash_memo: Dict[tuple, str] = {}             # (kind, uid, resourceVersion, epoch) -> input hash
        self.state_dirty = False
        self.state_loaded = False

    def acting(self) -> bool:
        return self.leader is None or self.leader.is_leader()

    def obj(self, kind: str, key: str) -> Optional[dict]:
        inf = self.informers.get(kind)
        return inf.cache.get(key) if inf else None
