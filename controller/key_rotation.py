"""Scheduled WireGuard key rotation: a gateway annotated ``networking.liqo.io/key-rotation-period``
gets its connection's keys rotated by ``rotate_keys.yml`` when the period since the last rotation (its key
Secret's ``networking.liqo.io/keys-rotated-at``, else the Secret's creation) has passed.

The rotation needs both clusters (each side's next public key goes to the other's PublicKey), so the
controller runs it when it serves the peer cluster too (``--cluster a=… --cluster b=…``, with an inventory
whose gateway groups are ``cluster_<name>_gateway``). A due rotation is a work item of the gateway's cluster,
locked with that cluster's gateway host; the schedule logic is module_utils/gateway/key_rotation.py."""
from __future__ import annotations

import datetime
import logging
import os
from typing import Dict, List, Optional

from controller.engine.feature import Feature
from controller.library import gateway_key_rotation as kr
from controller.library import gateway_plan
from controller.peer_clusters import PeerClusters
from controller.watchmap import RESOURCES
from controller.workqueue import PRIO_RESYNC

log = logging.getLogger("controller.key_rotation")
PREFIX = "rotate:"
PLAYBOOK = "rotate_keys.yml"  # an entry point: at the top of playbooks/, never in playbooks/internal/
INTERNAL_DIR = "internal"
KINDS = ("GatewayServer", "GatewayClient")


def _f(**kw) -> dict:
    return {"fields": kw}


def work_key(cluster: str, kind: str, namespace: str, name: str) -> str:
    return f"{PREFIX}{cluster}/{kind}/{namespace}/{name}"


def parse_key(key: str) -> tuple:
    cluster, kind, namespace, name = key[len(PREFIX):].split("/", 3)
    return cluster, kind, namespace, name


class KeyRotation(Feature):
    """The controller mode's feature: every `period` seconds it finds the gateways whose keys are due and enqueues
    their rotation (a work item of its own, `rotate:<cluster>/<kind>/<namespace>/<name>`), which it runs."""

    name = "key rotation"
    key_prefix = PREFIX

    def __init__(self, engine, playbook_dir: str, period: float = 10.0, peers: Optional[PeerClusters] = None):
        """playbook_dir: where the gateway kinds' playbook is; an internal one's (in-cluster) is playbooks/internal/.
        peers: the served clusters by cluster id (shared with the mode's other features)."""
        self.engine = engine
        self.peers = peers or PeerClusters(engine)
        playbook_dir = os.path.normpath(playbook_dir)
        if os.path.basename(playbook_dir) == INTERNAL_DIR:
            playbook_dir = os.path.dirname(playbook_dir)
        self.playbook = os.path.join(playbook_dir, PLAYBOOK)
        self.period = period               # seconds between checks of the rotation schedules
        self._warned: Dict[str, str] = {}  # gateway -> the bad annotation value already logged

    def enabled(self) -> bool:
        return (self.engine.mode == "controller" and self.engine.runner.inventory is not None
                and len(self.engine.clusters) > 1 and os.path.isfile(self.playbook))

    def tick_period(self) -> float:
        return self.period if self.enabled() else 0.0

    def tick(self) -> None:
        self.check()

    def process(self, cs, item) -> None:
        self.run(cs, item.key)

    def peer_of(self, gateway: dict) -> Optional[str]:
        """The name of the controller's cluster whose id the gateway's remote-cluster-id label names."""
        return self.peers.peer_of(gateway)

    def due(self, cs, gateway: dict, now: datetime.datetime) -> dict:
        meta = gateway.get("metadata") or {}
        if kr.PERIOD_ANNOTATION not in (meta.get("annotations") or {}):
            return {"due": False}
        secret = cs.api.get(RESOURCES["Secret"], meta.get("namespace"), gateway_plan.secret_name(gateway["kind"], meta.get("name")))
        return kr.schedule(gateway, secret, now)

    def check(self, now: Optional[datetime.datetime] = None) -> List[str]:
        """Enqueues a rotation for every due gateway of the clusters this controller leads; returns the keys."""
        now = now or datetime.datetime.now(datetime.timezone.utc)
        out = []
        for cs in self.engine.clusters.values():
            if not cs.acting():
                continue
            for kind in KINDS:
                inf = cs.informers.get(kind)
                for gw in list(inf.cache.values()) if inf else []:
                    gw = dict(gw, kind=kind)
                    meta = gw.get("metadata") or {}
                    if meta.get("deletionTimestamp"):
                        continue
                    try:
                        sched = self.due(cs, gw, now)
                    except Exception as exc:  # pylint: disable=broad-except
                        log.warning("key rotation schedule unreadable", extra=_f(cluster=cs.name, error=str(exc)))
                        continue
                    where = f"{cs.name}/{kind}/{meta.get('namespace')}/{meta.get('name')}"
                    if sched.get("error") and self._warned.get(where) != sched["error"]:
                        self._warned[where] = sched["error"]
                        log.warning("key rotation period ignored", extra=_f(gateway=where, error=sched["error"]))
                    if not sched.get("due"):
                        continue
                    key = work_key(cs.name, kind, meta.get("namespace"), meta.get("name"))
                    self.engine.queue.add(key, lock=f"{cs.name}/gateway-host", cluster=cs.name, priority=PRIO_RESYNC,
                                          reason="key rotation due")
                    out.append(key)
        return out

    def run(self, cs, key: str) -> Optional[bool]:
        """Runs the rotation of the key's gateway if it is still due; True/False for the run's outcome, None when
        nothing ran (not due any more, gone, or its peer cluster is not served here)."""
        dummy, kind, namespace, name = parse_key(key)
        gw = cs.obj(kind, f"{namespace}/{name}")
        if gw is None:
            return None
        gw = dict(gw, kind=kind)
        if not self.due(cs, gw, datetime.datetime.now(datetime.timezone.utc)).get("due"):
            return None
        peer = self.peer_of(gw)
        if peer is None:
            log.warning("key rotation due but the peer cluster is not served by this controller",
                        extra=_f(cluster=cs.name, gateway=f"{namespace}/{name}"))
            return None
        extravars = {"kubeconfig": cs.kubeconfig, "remote_kubeconfig": self.engine.clusters[peer].kubeconfig,
                     "gateway_group": f"cluster_{cs.name}_gateway", "remote_gateway_group": f"cluster_{peer}_gateway",
                     "fabric_cluster": cs.name, "fabric_key": key}
        log.info("key rotation", extra=_f(cluster=cs.name, peer=peer, gateway=f"{kind} {namespace}/{name}"))
        ident = "".join(ch if ch.isalnum() else "-" for ch in key)[-60:]
        res = self.engine.runner.run(self.playbook, extravars, 600, ident, cancel=self.engine.stop.is_set)
        self.engine.metrics.runs.labels(cs.name, kind, PLAYBOOK).inc()
        log.info("key rotation done", extra=_f(cluster=cs.name, gateway=f"{namespace}/{name}",
                                               result="ok" if res.ok else "failed", seconds=round(res.duration, 3),
                                               message=res.message if not res.ok else ""))
        return res.ok
