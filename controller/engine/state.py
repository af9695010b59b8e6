# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The applied hashes and dataplane manifests persisted per cluster in ConfigMap liqo/liqo-fabric-controller-state
(written when changed, at most every second), so that a restarted controller or a new leader does not re-run
everything."""
from __future__ import annotations

import json
import logging

from controller.kubeapi import ApiError
from controller.logs import fields
from controller.watchmap import RESOURCES

log = logging.getLogger("controller.engine")
STATE_CONFIGMAP = "liqo-fabric-controller-state"
STATE_KEY = "state.json"


class StateStore:
    def __init__(self, engine, enabled: bool):
        self.engine = engine
        self.enabled = enabled

    def load(self, cs) -> None:
        """Adds the stored keys' applied hashes and manifests to those `cs` does not know yet."""
        if not self.enabled:
            return
        try:
            cm = cs.api.get(RESOURCES["ConfigMap"], "liqo", STATE_CONFIGMAP)
        except ApiError as exc:
            log.warning("state not loaded", extra=fields(cluster=cs.name, error=str(exc)))
            return
        if not cm:
            cs.state_loaded = True
            return
        try:
            data = json.loads((cm.get("data") or {}).get(STATE_KEY) or "{}")
        except ValueError:
            data = {}
        with cs.lock:
            for k, v in (data.get("keys") or {}).items():
                if k not in cs.applied and isinstance(v.get("applied"), dict):
                    cs.applied[k] = v["applied"]
                if k not in cs.manifests and v.get("manifest") is not None:
                    cs.manifests[k] = v["manifest"]
            cs.state_loaded = True
        log.info("state loaded", extra=fields(cluster=cs.name, keys=len(data.get("keys") or {})))

    def flush(self, force: bool = False) -> None:
        """Writes the state of every cluster that changed and that this replica acts on (any, when `force`)."""
        if not self.enabled:
            return
        for cs in self.engine.clusters.values():
            if not cs.state_dirty or not (cs.acting() or force) or not cs.state_loaded and cs.leader:
                continue
            with cs.lock:
                cs.state_dirty = False
                keys = {k: {"applied": v, "manifest": cs.manifests.get(k)} for k, v in cs.applied.items()}
            body = {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": STATE_CONFIGMAP, "namespace": "liqo",
                                 "labels": {"app.kubernetes.io/managed-by": "liqo-fabric-controller"}},
                    "data": {STATE_KEY: json.dumps({"version": 1, "keys": keys}, separators=(",", ":"), sort_keys=True)}}
            res = RESOURCES["ConfigMap"]
            try:
                try:
                    cs.api.request("PUT", res.path("liqo", STATE_CONFIGMAP), body=body)
                except ApiError as exc:
                    if exc.status != 404:
                        raise
                    cs.api.request("POST", res.path("liqo"), body=body)
            except ApiError as exc:
                cs.state_dirty = True
                log.warning("state not saved", extra=fields(cluster=cs.name, error=str(exc)))
