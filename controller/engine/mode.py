# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a replica of the engine is: its mode. The engine asks it where to look (namespaces, selectors), whether
and which Lease to hold, what every run is told, and which features it registers. This base is the controller
mode's answers without its features; controller/modes.py makes the three modes (controller, node, gateway).
"""
from __future__ import annotations

import dataclasses
from typing import Callable, List, Optional


@dataclasses.dataclass(frozen=True)
class Lease:
    """The Lease a replica holds per cluster (controller/leader.py)."""
    name: str
    namespace: str
    retry: Optional[float] = None                        # seconds between looks at it (None: the elector's)
    holder_gone: Optional[Callable[..., bool]] = None    # (cs, holder identity) -> take it at once
    owner: Optional[Callable[..., Optional[dict]]] = None  # (cs) -> the Lease's ownerReference (None: not known yet)


class Mode:
    name = "controller"
    node_name = ""
    elects = True            # a Lease per cluster: a replica acts on a cluster only while it holds it
    persists_state = True    # applied hashes and manifests kept in ConfigMap liqo/liqo-fabric-controller-state
    zygote_at_start = True   # the warm runner's zygote starts with the engine

    def __init__(self, namespaces: Optional[List[str]] = None):
        # namespaces served: Secrets are watched there only (RBAC grants them nowhere else)
        self.namespaces = list(namespaces or [])

    def field_selector(self, kind: str, label_selector: Optional[str]) -> Optional[str]:
        """The field selector of `kind`'s informers (`label_selector`: the watch map's for the kind)."""
        return None

    def scoped(self, kind: str) -> bool:
        """Whether `kind`'s informers watch each served namespace (when there are some) instead of all."""
        return kind == "Secret"

    def lease(self, namespace: str) -> Lease:
        """The Lease of each cluster (`namespace`: --lease-namespace)."""
        return Lease("liqo-fabric-controller", namespace)

    def run_vars(self) -> dict:
        """Extra vars every playbook run of this mode gets (besides fabric_mode)."""
        return {}

    def features(self, engine) -> list:
        """The features this mode registers (controller/engine/feature.py); called once by the engine, after its
        clusters exist and before their Leases are made."""
        return []
