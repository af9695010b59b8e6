# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The clusters one controller serves (``--cluster a=… --cluster b=…``) as each other's peers, by cluster id
(ConfigMap ``liqo/liqo-clusterid-configmap``, read once per cluster).

Every playbook run of a cluster gets ``fabric_peer_kubeconfigs``: {cluster id: kubeconfig} of the other clusters
served here, so that a run can write what its peer cluster must know of it (the gateway role's publish keeps a
gateway's MTU on its PublicKey in the peer cluster). Key rotation finds a gateway's peer cluster here too."""
from __future__ import annotations

import logging
from typing import Dict, Optional

from controller.engine.feature import Feature
from controller.library import kube_client
from controller.watchmap import RESOURCES

log = logging.getLogger("controller.peer_clusters")
IDENTITY = ("liqo", "liqo-clusterid-configmap")


class PeerClusters(Feature):
    name = "peer clusters"

    def __init__(self, engine):
        self.engine = engine
        self._ids: Dict[str, str] = {}     # cluster name -> cluster id
        self._unread: Dict[str, str] = {}  # cluster name -> the error already logged

    def cluster_id(self, cs) -> Optional[str]:
        """The cluster's id, None while it cannot be read (no identity yet, the API down: asked again next time)."""
        if cs.name not in self._ids:
            try:
                cm = cs.api.get(RESOURCES["ConfigMap"], *IDENTITY)
            except Exception as exc:  # pylint: disable=broad-except
                if self._unread.get(cs.name) != str(exc):
                    self._unread[cs.name] = str(exc)
                    log.warning("cluster id not read", extra={"fields": {"cluster": cs.name, "error": str(exc)}})
                return None
            cid = ((cm or {}).get("data") or {}).get("CLUSTER_ID")
            if not cid:
                return None
            self._ids[cs.name] = cid
        return self._ids[cs.name]

    def peer_of(self, gateway: dict) -> Optional[str]:
        """The name of the served cluster whose id the gateway's remote-cluster-id label names."""
        want = ((gateway.get("metadata") or {}).get("labels") or {}).get(kube_client.REMOTE_CLUSTER_ID_LABEL)
        for name, cs in self.engine.clusters.items():
            if want and self.cluster_id(cs) == want:
                return name
        return None

    def kubeconfigs(self, cs) -> Dict[str, str]:
        """{cluster id: kubeconfig} of the served clusters other than `cs` (none in a cluster: no kubeconfig)."""
        out = {}
        for name, other in self.engine.clusters.items():
            if name == cs.name or not other.kubeconfig:
                continue
            cid = self.cluster_id(other)
            if cid:
                out[cid] = other.kubeconfig
        return out

    def run_context(self, cs):
        peers = self.kubeconfigs(cs) if self.engine.mode == "controller" and len(self.engine.clusters) > 1 else {}
        return ({"fabric_peer_kubeconfigs": peers} if peers else {}), None
