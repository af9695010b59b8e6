# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Leader election on a coordination.k8s.io/v1 Lease, one per cluster (like client-go's leaderelection).

A candidate takes the Lease when it does not exist, when it already holds it, or when the holder's record
has not changed for leaseDurationSeconds as observed on the candidate's own clock (no clock-skew
assumptions). Writes carry the resourceVersion, so of two candidates only one wins. The holder renews
every renew period; if it cannot renew within the lease duration it stops acting (is_leader() False)
before anyone else may take over. A candidate given `holder_gone` also takes a live-looking Lease whose
holder it knows to be going (a gateway's standby, when the active pod is being deleted). One given `owner` (an
ownerReference, or None while it is not known) writes it into the Lease, so the garbage collector deletes the Lease
with its owner (a gateway's Lease with the GatewayServer/GatewayClient).
"""
from __future__ import annotations

import datetime
import logging
import threading
import time
from typing import Callable, Optional

from controller.kubeapi import ApiError, ClusterAPI
from controller.watchmap import RESOURCES

log = logging.getLogger("controller.leader")
LEASE = RESOURCES["Lease"]


def micro_time(t: Optional[float] = None) -> str:
    d = datetime.datetime.fromtimestamp(time.time() if t is None else t, datetime.timezone.utc)
    return d.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector(threading.Thread):
    def __init__(self, api: ClusterAPI, identity: str, stop: threading.Event, name: str = "liqo-fabric-controller",
                 namespace: str = "liqo", duration: float = 15.0, renew: Optional[float] = None,
                 on_change: Optional[Callable[[bool], None]] = None, clock: Callable[[], float] = time.monotonic,
                 retry: Optional[float] = None, holder_gone: Optional[Callable[[str], bool]] = None,
                 owner: Optional[Callable[[], Optional[dict]]] = None):
        super().__init__(name=f"leader-{api.name}", daemon=True)
        self.api, self.identity, self.stop_event = api, identity, stop
        self.lease_name, self.namespace = name, namespace
        self.duration = duration
        self.renew = renew or max(0.5, duration / 3)
        # how often a candidate looks at the Lease: a released one is taken within this
        self.retry = retry or max(0.2, self.renew / 2)
        # holder identity -> True when the holder is known to be going (a gateway pod being deleted): its Lease
        # is taken at once instead of after its release or expiry
        self.holder_gone = holder_gone
        self.owner = owner
        self.on_change = on_change
        self.clock = clock
        self._leader_until = 0.0     # we may act until this (monotonic) time
        self._observed = None        # (holder, renewTime, resourceVersion) last seen
        self._observed_at = 0.0
        self.transitions = 0
        self.holder = ""

    def is_leader(self) -> bool:
        return self.clock() < self._leader_until

    def run(self) -> None:
        was = False
        while not self.stop_event.is_set():
            start = self.clock()
            try:
                ok = self.try_acquire_or_renew()
            except ApiError as exc:
                ok = False
                self.api.maybe_reload()
                log.warning("lease update failed", extra={"fields": {"cluster": self.api.name, "error": str(exc)}})
            if ok:
                self._leader_until = start + self.duration * 0.8  # stop acting before others may take over
            now = self.is_leader()
            if now != was:
                was = now
                log.info("leadership %s", "acquired" if now else "lost",
                         extra={"fields": {"cluster": self.api.name, "identity": self.identity, "lease": self.lease_name}})
                if self.on_change:
                    self.on_change(now)
            self.stop_event.wait(self.renew if now else self.retry)
        if self.is_leader():
            self.release()

    def try_acquire_or_renew(self) -> bool:
        now = time.time()
        lease = self.api.get(LEASE, self.namespace, self.lease_name)
        spec_new = {"holderIdentity": self.identity, "leaseDurationSeconds": int(max(1, round(self.duration))),
                    "renewTime": micro_time(now)}
        owner = self.owner() if self.owner else None
        if lease is None:
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.lease_name, "namespace": self.namespace,
                                 **({"ownerReferences": [owner]} if owner else {})},
                    "spec": {**spec_new, "acquireTime": micro_time(now), "leaseTransitions": 0}}
            try:
                self.api.request("POST", LEASE.path(self.namespace), body=body)
            except ApiError as exc:
                if exc.status == 409:
                    return False
                raise
            self.holder = self.identity
            return True
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        record = (holder, spec.get("renewTime"), lease["metadata"].get("resourceVersion"))
        if record != self._observed:
            self._observed, self._observed_at = record, self.clock()
        self.holder = holder
        duration = float(spec.get("leaseDurationSeconds") or self.duration)
        if holder and holder != self.identity and self.clock() < self._observed_at + duration:
            if not (self.holder_gone and self.holder_gone(holder)):
                return False
            log.info("taking the Lease of a holder that is going",
                     extra={"fields": {"lease": self.lease_name, "holder": holder}})
        new_spec = dict(spec)
        new_spec.update(spec_new)
        if holder != self.identity:
            new_spec["acquireTime"] = micro_time(now)
            new_spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        lease["spec"] = new_spec
        refs = lease["metadata"].get("ownerReferences") or []
        if owner and not any(r.get("uid") == owner["uid"] for r in refs):
            # a Lease made before its owner was known (or by an older version): owned from this write on
            lease["metadata"]["ownerReferences"] = refs + [owner]
        try:
            self.api.request("PUT", LEASE.path(self.namespace, self.lease_name), body=lease)
        except ApiError as exc:
            if exc.status == 409:
                return False
            raise
        if holder != self.identity:
            self.transitions += 1
        self.holder = self.identity
        return True

    def release(self) -> None:
        """Gives the Lease up on a clean shutdown so a standby takes over at once."""
        try:
            lease = self.api.get(LEASE, self.namespace, self.lease_name)
            if lease and (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                lease["spec"]["holderIdentity"] = ""
                lease["spec"]["leaseDurationSeconds"] = 1
                self.api.request("PUT", LEASE.path(self.namespace, self.lease_name), body=lease)
        except ApiError:
            pass
        self._leader_until = 0.0
