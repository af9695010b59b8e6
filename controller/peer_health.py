"""The live peer health inside the active gateway pod (docs/health.md): a thread running the same prober as the
agentless probe process (plugins/module_utils/health/prober.py), writing the gateway's Connection and feeding
the pod's /metrics with Liqo's peer metrics (labels driver, cluster_id).

The engine starts it when the pod becomes the active one and stops it when the pod stops or loses the Lease:
a standby has no tunnel to probe. What it probes comes from the gateway's CR as the informer sees it (the
tunnel's interface name is the plan's, derived from the cluster id, namespace, kind and name).

With ``spec.mtu: auto`` it also runs the path's live watch, in a thread of its own (the agentless probe process's,
module_utils/gateway/path_mtu.py Live): the first probe when the pod takes over (a failover: maybe another path),
then every 10 s, at once when the peer's endpoint changes, a "fragmentation needed" arrives or the peer answers
again after an Error; the tunnel's MTU set through the hysteresis and written to status.mtu of the gateway and the
Connection, the interface's MTU on the pod's /metrics (liqo_fabric_tunnel_mtu).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Dict, List, Optional

from controller.engine.feature import Feature

from controller.library import gateway_path_mtu as pmtu
from controller.library import gateway_plan as gwplan
from controller.library import health_metrics as phm
from controller.library import health_prober as ph
from controller.library import health_status as phs
from controller.library import kube_client
from controller.library import wireguard_session as wgs

log = logging.getLogger(__name__)
STATUS_INTERVAL = 10.0


def target_of(gateway: dict, cluster_id: str) -> Optional[dict]:
    """The probe spec of a gateway CR in this cluster: interface, peer's transit address, Connection."""
    meta = gateway.get("metadata") or {}
    kind = gateway.get("kind")
    if kind not in gwplan.KINDS or not cluster_id:
        return None
    gid = gwplan.gateway_id(cluster_id, meta.get("namespace"), meta.get("name"), kind)
    return {"interface": gwplan.interface_name(gid), "address": gwplan.TRANSIT[gwplan.KINDS[kind]][1],
            "namespace": meta.get("namespace"), "connection_name": meta.get("name"), "kind": kind,
            "remote_cluster_id": (meta.get("labels") or {}).get(kube_client.REMOTE_CLUSTER_ID_LABEL, ""),
            "client": kind == "GatewayClient", "mtu_auto": gwplan.mtu_auto(gateway)}


def peer_mtu_cap(gateway: Optional[dict], public_keys: List[dict], cluster_id: str) -> Optional[int]:
    """The tunnel MTU the peer announces (its PublicKey's networking.liqo.io/mtu, its own probe's): the cap of this
    side's probe (both sides run the smaller value), None while unknown."""
    if not gateway:
        return None
    pk, _ambiguous = gwplan.peer_public_key(public_keys, gateway, cluster_id)
    return gwplan.announced_mtu(pk) if pk else None


def read_cluster_id(api) -> str:
    cm = api.request("GET", "/api/v1/namespaces/%s/configmaps/%s" % (kube_client.LIQO_NAMESPACE, kube_client.CLUSTER_ID_CONFIGMAP))
    return ((cm or {}).get("data") or {}).get("CLUSTER_ID", "")


class GatewayHealth(threading.Thread):
    """Probes the peer of the gateway `gateway()` returns (the CR, or None while unknown) until stop()."""

    def __init__(self, api, gateway: Callable[[], Optional[dict]], cluster_id: Callable[[], str],
                 port: int = ph.PORT, interval: float = ph.INTERVAL, threshold: int = ph.THRESHOLD,
                 mtu_cap: Optional[Callable[[], Optional[int]]] = None, mtu_watch=pmtu.Watch):
        super().__init__(name="peer-health", daemon=True)
        self.api, self.gateway, self.cluster_id = api, gateway, cluster_id
        self.mtu_cap = mtu_cap or (lambda: None)
        self.mtu_watch = mtu_watch          # the path's watch (module_utils/gateway/path_mtu.py Watch)
        self.mtu_live = None                # spec.mtu auto: the running pmtu.Live
        self._mtu_stop: Optional[threading.Event] = None
        self.port, self.interval, self.threshold = port, interval, threshold
        self.halt = threading.Event()
        self.spec: Optional[dict] = None
        self.state: Optional[ph.HealthState] = None
        self.written: Optional[float] = None
        self.writes = 0
        self.counter: Optional[phm.Counters] = None
        self.counter_lock = threading.Lock()
        self.sessions_restarted = 0
        self.probes = 0      # pings sent (a tick that ran to its end)
        self.failures = 0    # ticks that failed unexpectedly

    def stop(self, timeout: float = 5.0) -> None:
        self.halt.set()
        if self.is_alive():
            self.join(timeout)
        self._stop_path_mtu()

    def _start_path_mtu(self, spec: Optional[dict]) -> None:
        """spec.mtu auto: the path's watch of a new target in its own thread (a probe of a black hole waits out its
        timeouts: the pings go on meanwhile); its first probe runs at once, this pod having just taken over."""
        self._stop_path_mtu()
        if not (spec and spec.get("mtu_auto")):
            return
        watch = self.mtu_watch(spec["interface"], spec["address"], cap=self.mtu_cap())
        self.mtu_live = pmtu.Live(watch, self.api, spec["kind"], spec["namespace"], spec["connection_name"],
                                  on_change=_log_mtu_change(spec["interface"]))
        self._mtu_stop = threading.Event()
        threading.Thread(target=self.mtu_live.run, args=(self._mtu_stop,), name="path-mtu", daemon=True).start()
        log.info("path MTU watch started", extra={"fields": {"interface": spec["interface"]}})

    def _stop_path_mtu(self) -> None:
        if self._mtu_stop:
            self._mtu_stop.set()
        self.mtu_live, self._mtu_stop = None, None

    def _resolve(self) -> Optional[dict]:
        gw = self.gateway()
        cid = self.cluster_id() if gw else ""
        return target_of(gw, cid) if gw else None

    def run(self) -> None:
        prober = None
        try:
            while not self.halt.is_set():
                try:
                    prober = self._tick(prober)
                except Exception as exc:  # pylint: disable=broad-except
                    # nothing restarts this thread: a bug or an unexpected failure (the API, the CR) is logged and
                    # the next tick opens a new prober (the state kept), so the peer's health is never silently frozen
                    self.failures += 1
                    log.warning("health probe tick failed", extra={"fields": {"error": str(exc)[:300]}})
                    if prober:
                        prober.close()
                    prober = None
                    self.halt.wait(self.interval)
        finally:
            if prober:
                prober.close()

    def _tick(self, prober):
        """One probe interval: the target looked up again, one ping, the state and the Connection updated."""
        spec = self._resolve()
        if spec != self.spec:
            if prober:
                prober.close()
            prober = None
            self.state = ph.HealthState(self.threshold, "%s:%d via %s" % (
                spec["address"], self.port, spec["interface"])) if spec else None
            self.spec, self.written = spec, None
            with self.counter_lock:
                self.counter = phm.Counters(spec["interface"]) if spec else None
            self._start_path_mtu(spec)
        live = self.mtu_live
        if live:
            live.watch.cap = self.mtu_cap()   # the peer announces what its own probe found
        if spec and prober is None:   # a new target, or the last tick failed: the state is kept
            prober = ph.Prober(spec["interface"], spec["address"], self.port, self.interval)
        if prober is None:
            self.halt.wait(self.interval)
            return None
        try:
            answered, rtt, why = prober.step()
        except Exception as exc:  # pylint: disable=broad-except
            # an unexpected failure of the socket is a lost probe
            log.warning("health probe failed", extra={"fields": {"error": str(exc)[:300]}})
            prober.close()
            self.halt.wait(self.interval)
            answered, rtt, why = False, None, "probe failed: %s" % exc
        self.probes += 1
        before = self.state.value
        changed = self.state.observe(answered, rtt, why=why)
        if live and changed and before == ph.ERROR and self.state.value == ph.CONNECTED:
            live.watch.kick("reconnected")  # the peer back after a failure (its failover, a restart): maybe another path
        due = self.state.value == ph.CONNECTED and (
            self.written is None or time.monotonic() - self.written >= STATUS_INTERVAL)
        if (changed and self.state.value != ph.CONNECTING) or due:
            self._write()
        if ph.restart_due(self.state, changed, self.spec.get("client")):  # an answer resets the losses: never due
            # after the Error is written: the restart talks to wireguard-go under the interface's lock, which a
            # reconcile may hold for a moment, and the Connection must not wait for it
            self._restart_session()
        return prober

    def _restart_session(self) -> None:
        """The peer went silent: restart the tunnel's WireGuard session, so a peer that came back (a new gateway
        pod) is reached at the next handshake instead of after WireGuard's 15 s (module_utils/wireguard/session)."""
        with self.counter_lock:
            if self.counter:
                self.counter.read()  # the re-added peer's counters start from 0: keep what was counted
            try:
                start = time.monotonic()
                # a client also takes a new source port: a new flow through the server's NodePort (wireguard_session)
                if wgs.restart_session(self.spec["interface"], rebind=bool(self.spec.get("client"))):
                    self.sessions_restarted += 1
                    # a client restarts at every lost ping of an outage: its first restart and the Error's are told
                    log.log(logging.INFO if self.state.losses in (1, self.threshold) else logging.DEBUG,
                            "WireGuard session restarted", extra={"fields": {
                                "interface": self.spec["interface"], "lost_pings": self.state.losses,
                                "seconds": round(time.monotonic() - start, 3)}})
            except Exception as exc:  # pylint: disable=broad-except
                log.warning("WireGuard session not restarted", extra={"fields": {"error": str(exc)[:300]}})

    def _write(self) -> None:
        s, spec = self.state, self.spec
        try:
            phs.write(self.api, spec["namespace"], spec["connection_name"], s.value, s.reason, s.message, s.latency_us)
            self.written = time.monotonic()
            self.writes += 1
        except Exception as exc:  # pylint: disable=broad-except
            log.warning("Connection not written", extra={"fields": {"error": str(exc)[:300]}})

    # --- metrics (the engine's registry renders them: Metrics.live_peers)
    def samples(self) -> list:
        spec, s = self.spec, self.state
        if not spec or not s:
            return []
        with self.counter_lock:
            counters = self.counter.read() if self.counter else phm.transfer(spec["interface"])
        live = self.mtu_live
        return [phm.sample(spec.get("remote_cluster_id"), s.value == ph.CONNECTED, s.latency_us, counters,
                           _link_mtu(spec["interface"], live.watch if live else None))]

    def path_mtu(self) -> Optional[dict]:
        """The path watch's view (spec.mtu auto), else None."""
        live = self.mtu_live
        return live.snapshot() if live else None


def _log_mtu_change(interface: str) -> Callable:
    def changed(old: Optional[int], status: dict, why: Optional[str]) -> None:
        if "error" in status:
            log.warning("path MTU not probed", extra={"fields": {"interface": interface, "error": status["error"]}})
            return
        log.info("tunnel MTU changed", extra={"fields": {
            "interface": interface, "from": old, "to": status.get("value"), "path_mtu": status.get("pathMTU"),
            "why": why}})
    return changed


def _link_mtu(interface: str, watch=None) -> Optional[int]:
    """The tunnel's MTU for the metric (not the size a probe of the path raised it to for a moment)."""
    try:
        return watch.interface_mtu() if watch else pmtu.link_mtu(interface)
    except (OSError, ValueError):
        return None


class HealthCollector:
    """The running GatewayHealth's samples, if any (Metrics.live_peers of a gateway pod)."""

    def __init__(self):
        self.health: Optional[GatewayHealth] = None

    def samples(self) -> list:
        h = self.health
        return h.samples() if h else []


class PeerHealthFeature(Feature):
    """The gateway mode's live peer health: a GatewayHealth thread while this pod holds its gateway's Lease (a
    standby has no tunnel to probe). Its samples, not the Connection the pod watches, are the pod's liqo_peer_*."""

    name = "live peer health"

    def __init__(self, engine, gateway: dict, cluster_id: Callable[[object], str]):
        self.gateway = gateway
        self.cluster_id = cluster_id   # (cluster) -> this cluster's id, "" while unknown
        self.collector = HealthCollector()
        self._health: Dict[str, GatewayHealth] = {}
        engine.metrics.live_peers = self.collector.samples

    def leading(self, cs, leading: bool) -> None:
        if leading:
            self._start(cs)
        else:
            self._stop(cs.name)

    def stop(self) -> None:
        for name in list(self._health):
            self._stop(name)

    def threads(self) -> List[threading.Thread]:
        return list(self._health.values())

    def _start(self, cs) -> None:
        self._stop(cs.name)
        kind, key = self.gateway["kind"], f"{self.gateway['namespace']}/{self.gateway['name']}"

        def gateway() -> Optional[dict]:
            obj = cs.obj(kind, key)
            return dict(obj, kind=kind) if obj else None

        def mtu_cap() -> Optional[int]:
            return peer_mtu_cap(gateway(), _cached(cs, "PublicKey"), self.cluster_id(cs))

        h = GatewayHealth(cs.api, gateway, lambda: self.cluster_id(cs), mtu_cap=mtu_cap)
        self._health[cs.name] = h
        self.collector.health = h
        h.start()

    def _stop(self, cluster: str) -> None:
        h = self._health.pop(cluster, None)
        if h:
            if self.collector.health is h:
                self.collector.health = None
            h.stop()


def _cached(cs, kind: str) -> List[dict]:
    """The objects of `kind` in the cluster's informer cache (a copy: the informer's thread replaces them)."""
    inf = cs.informers.get(kind)
    for _attempt in range(3):
        try:
            return list(inf.cache.values()) if inf else []
        except RuntimeError:   # the cache changed size while copied
            continue
    return []
