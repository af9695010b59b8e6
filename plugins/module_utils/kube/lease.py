# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether someone holds a coordination.k8s.io/v1 Lease, read as the controller's candidates read it
(controller/leader.py): nobody holds a missing Lease, one with an empty holder (a clean stop releases it that way),
one whose renewTime is older than its leaseDurationSeconds, or one whose record has not changed for that long as
observed here (no assumption on the holder's clock)."""

from __future__ import annotations

import datetime
import time

from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import ApiError

CONTROLLER_LEASE = "liqo-fabric-controller"   # the controller's Lease, in its --lease-namespace (liqo)


def parse_time(value):
    """Seconds since the epoch of a Lease's MicroTime (`2026-11-26T00:00:00.000000Z`), None if unreadable."""
    if not value:
        return None
    text = str(value).replace("Z", "+00:00")
    try:
        return datetime.datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


class LeaseWatch:
    """One Lease, read again at each `read()`; `wall` and `monotonic` are the clocks (tests pass their own)."""

    def __init__(self, kube, namespace, name, wall=time.time, monotonic=time.monotonic):
        self.kube, self.namespace, self.name = kube, namespace, name
        self.wall, self.monotonic = wall, monotonic
        self._record, self._since = None, 0.0   # the holder's record last seen, and since when (monotonic)

    def where(self):
        return "%s/%s" % (self.namespace, self.name)

    def read(self):
        """{lease, holder, held, renewed_seconds_ago, duration_seconds, reason}: `held` None when the Lease cannot
        be read (`reason` says why)."""
        out = {"lease": self.where(), "holder": "", "held": False, "renewed_seconds_ago": None,
               "duration_seconds": None}
        try:
            lease = self.kube.get("Lease", self.namespace, self.name)
        except ApiError as exc:
            return dict(out, held=None, reason="Lease %s cannot be read: %s" % (self.where(), exc))
        if lease is None:
            return dict(out, reason="no Lease %s" % self.where())
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        duration = int(spec.get("leaseDurationSeconds") or 0)
        renewed = parse_time(spec.get("renewTime") or spec.get("acquireTime"))
        ago = None if renewed is None else round(max(0.0, self.wall() - renewed), 1)
        out.update(holder=holder, duration_seconds=duration, renewed_seconds_ago=ago)
        if not holder:
            return dict(out, reason="Lease %s is released (no holder)" % self.where())
        record = (holder, spec.get("renewTime"), (lease.get("metadata") or {}).get("resourceVersion"))
        now = self.monotonic()
        if record != self._record:
            self._record, self._since = record, now
        if ago is not None and ago > duration:
            return dict(out, reason="%s last renewed Lease %s %s s ago, for %s s" % (holder, self.where(), ago, duration))
        if now - self._since > duration:
            return dict(out, reason="%s has not renewed Lease %s for %.0f s here, for %s s"
                        % (holder, self.where(), now - self._since, duration))
        return dict(out, held=True, reason="%s holds Lease %s (renewed %s s ago, for %s s)"
                    % (holder, self.where(), ago if ago is not None else "?", duration))
