"""A minimal load-balancer implementation for a real-node lab cluster (a lab part, not the fabric's).

What a cloud's (or MetalLB's layer-2 mode's) load balancer does for a Service of type LoadBalancer, reduced to
the lab's WAN: an address from a pool of WAN addresses is given to the Service (its
`status.loadBalancer.ingress`) and announced on the WAN by one of the cluster's WAN-attached nodes (the address
on its `wan0`, so it answers ARP for it; on a routed WAN the router gets a route to it through that node).
Traffic to that address then enters the node, where kube-proxy's rules for load-balancer ingress addresses send it
to the Service's endpoints, as on a cloud. A thread polls the
Services (0.3 s); `stop()` takes every address back. The lab creates nothing else.
"""
from __future__ import annotations

import logging
import threading

from tests.lab import netns

log = logging.getLogger(__name__)
POLL = 0.3


class LabLoadBalancer(threading.Thread):
    def __init__(self, cluster, addresses: list[str]):
        super().__init__(name=f"lab-lb-{cluster.name}", daemon=True)
        self.cluster = cluster
        self.pool = list(addresses)
        self.assigned: dict[str, str] = {}    # "namespace/name" -> address
        self.halt = threading.Event()
        self.errors: list[str] = []

    @property
    def speaker(self):
        """The node announcing the addresses: the first WAN-attached node."""
        return self.cluster.gateway_nodes[0]

    def run(self) -> None:
        while not self.halt.wait(POLL):
            try:
                self.sync()
            except Exception as exc:  # pylint: disable=broad-except  # the lab keeps serving; the test sees errors
                self.errors.append(str(exc))
                log.warning("lab load balancer: %s", exc)

    def sync(self) -> None:
        core = self.cluster.kube.core
        wanted = {}
        for svc in core.list_service_for_all_namespaces().items:
            if svc.spec.type == "LoadBalancer":
                wanted[f"{svc.metadata.namespace}/{svc.metadata.name}"] = svc
        for key in [k for k in self.assigned if k not in wanted]:
            self._release(key)
        for key, svc in wanted.items():
            address = self.assigned.get(key) or self._assign(key, svc.spec.load_balancer_ip)
            if address is None:
                continue
            ingress = (svc.status.load_balancer.ingress or []) if svc.status and svc.status.load_balancer else []
            if [i.ip for i in ingress] != [address]:
                core.patch_namespaced_service_status(svc.metadata.name, svc.metadata.namespace,
                                                     {"status": {"loadBalancer": {"ingress": [{"ip": address}]}}})

    def _assign(self, key: str, requested: str | None) -> str | None:
        free = [a for a in self.pool if a not in self.assigned.values()]
        if requested:
            free = [a for a in free if a == requested]
        if not free:
            return None   # as a cloud would: the Service stays pending
        self.assigned[key] = free[0]
        netns.ip_batch([f"addr add {free[0]}/32 dev wan0"], netns=self.speaker.netns)
        if self._router():   # a routed WAN (LabWan(routed=True)): the router sends the address to the speaker
            netns.ip_batch([f"route replace {free[0]}/32 via {self.speaker.wan_ip.split('/')[0]}"], netns=self._router())
        return free[0]

    def _router(self) -> str | None:
        wan = getattr(self.cluster, "wan", None)
        return wan.netns if wan is not None and wan.routed else None

    def _release(self, key: str) -> None:
        address = self.assigned.pop(key)
        netns.run(["ip", "-n", self.speaker.netns, "addr", "del", f"{address}/32", "dev", "wan0"], check=False)
        if self._router():
            netns.run(["ip", "-n", self._router(), "route", "del", f"{address}/32"], check=False)

    def stop(self) -> None:
        self.halt.set()
        if self.is_alive():
            self.join(5)
        for key in list(self.assigned):
            self._release(key)
