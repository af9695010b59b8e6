# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Status conditions (Ready, Reconciling, Degraded) and Kubernetes Events.

Playbooks write other status fields and other condition types (the IPAM's NetworkCIDRsConfigured), so
the controller read-modify-writes only its three condition types with the object's resourceVersion and
retries on 409; a merge patch would replace the whole conditions list.
"""
from __future__ import annotations

import datetime
import logging
import re
import socket
import uuid
from typing import List, Optional

from controller.kubeapi import ApiError, ClusterAPI
from controller.watchmap import RESOURCES, Resource

log = logging.getLogger("controller.status")

OWN_TYPES = ("Ready", "Reconciling", "Degraded")
_REASON_RE = re.compile(r"[^A-Za-z0-9_,:]")
MAX_MESSAGE = 4000


def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def reason_word(text: str) -> str:
    """A valid condition reason (CamelCase, [A-Za-z][A-Za-z0-9_,:]*)."""
    word = "".join(p[:1].upper() + p[1:] for p in re.split(r"[\s\-./]+", text or "") if p)
    word = _REASON_RE.sub("", word).lstrip("0123456789_,:").rstrip(",:")
    return word[:1024] or "Unknown"


def desired_conditions(phase: str, generation: Optional[int], message: str = "", reason: str = "") -> dict:
    """{type: (status, reason, message)} for a phase: reconciling | ready | degraded."""
    msg = (message or "")[:MAX_MESSAGE]
    if phase == "reconciling":
        return {"Reconciling": ("True", reason or "Progressing", msg or "a playbook run is in progress")}
    if phase == "ready":
        return {"Ready": ("True", reason or "Applied", msg or "applied"),
                "Reconciling": ("False", "Idle", "no run in progress"),
                "Degraded": ("False", "Applied", "the last run succeeded")}
    if phase == "degraded":
        return {"Ready": ("False", reason or "ReconcileFailed", msg),
                "Reconciling": ("False", "Idle", "no run in progress"),
                "Degraded": ("True", reason or "ReconcileFailed", msg)}
    raise ValueError(f"phase: {phase!r}")


def merge_conditions(current: Optional[List[dict]], want: dict, generation: Optional[int],
                     now: Optional[str] = None) -> tuple[list, bool, list]:
    """Returns (conditions, changed, transitions). Only types in `want` change; the others (and their
    order) are kept as they are. lastTransitionTime moves only when a status flips.
    transitions: [(type, old_status, new_status)]."""
    now = now or now_rfc3339()
    out = [dict(c) for c in (current or []) if isinstance(c, dict)]
    index = {c.get("type"): i for i, c in enumerate(out)}
    changed = False
    transitions = []
    for ctype, (status, reason, message) in want.items():
        new = {"type": ctype, "status": status, "reason": reason_word(reason), "message": message}
        if generation is not None:
            new["observedGeneration"] = generation
        i = index.get(ctype)
        if i is None:
            new["lastTransitionTime"] = now
            out.append(new)
            changed = True
            transitions.append((ctype, None, status))
            continue
        cur = out[i]
        if cur.get("status") != status:
            new["lastTransitionTime"] = now
            transitions.append((ctype, cur.get("status"), status))
        else:
            new["lastTransitionTime"] = cur.get("lastTransitionTime") or now
        if any(cur.get(k) != v for k, v in new.items()):
            out[i] = new
            changed = True
    return out, changed, transitions


class StatusWriter:
    def __init__(self, api: ClusterAPI, component: str = "liqo-fabric-controller", retries: int = 8):
        self.api = api
        self.component = component
        self.retries = retries
        self.host = socket.gethostname()
        self.writes = 0
        self.conflicts = 0

    def set_phase(self, res: Resource, namespace: str, name: str, phase: str, generation: Optional[int] = None,
                  message: str = "", reason: str = "", obj: Optional[dict] = None) -> list:
        """Read-modify-write of the conditions; returns the transitions made. `obj` (a cached copy) saves
        the first read; a stale one costs a 409 and a fresh read."""
        want = desired_conditions(phase, generation, message, reason)
        for attempt in range(self.retries):
            if obj is None or attempt > 0:
                obj = self.api.get(res, namespace, name)
                if obj is None:
                    return []
            if (obj.get("metadata") or {}).get("deletionTimestamp") and phase == "reconciling":
                return []
            gen = generation if generation is not None else (obj.get("metadata") or {}).get("generation")
            status = dict(obj.get("status") or {})
            conds, changed, transitions = merge_conditions(status.get("conditions"), want, gen)
            if not changed:
                return []
            status["conditions"] = conds
            body = {"apiVersion": obj.get("apiVersion") or res.api_version, "kind": obj.get("kind") or res.kind,
                    "metadata": {"name": name, "namespace": namespace,
                                 "resourceVersion": obj["metadata"]["resourceVersion"]},
                    "status": status}
            try:
                self.api.request("PUT", res.path(namespace, name, "status"), body=body)
                self.writes += 1
                return transitions
            except ApiError as exc:
                if exc.status == 409:
                    self.conflicts += 1
                    continue
                if exc.status == 404:
                    return []
                raise
        raise ApiError(409, f"status of {res.kind} {namespace}/{name}: gave up after {self.retries} conflicts")

    def event(self, obj: dict, etype: str, reason: str, message: str) -> None:
        """A core/v1 Event about obj (best effort)."""
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace") or "default"
        ts = now_rfc3339()
        body = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta.get('name', 'x')}.{uuid.uuid4().hex[:16]}", "namespace": ns},
            "involvedObject": {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "name": meta.get("name"),
                               "namespace": meta.get("namespace"), "uid": meta.get("uid"),
                               "resourceVersion": meta.get("resourceVersion")},
            "reason": reason_word(reason), "message": message[:1024], "type": etype,
            "firstTimestamp": ts, "lastTimestamp": ts, "count": 1,
            "source": {"component": self.component, "host": self.host},
            "reportingComponent": self.component, "reportingInstance": self.host,
        }
        try:
            self.api.request("POST", RESOURCES["Event"].path(ns), body=body)
        except ApiError as exc:
            log.warning("event not recorded", extra={"fields": {"cluster": self.api.name, "error": str(exc)}})
