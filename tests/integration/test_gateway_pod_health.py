"""The gateway pod's live peer health (controller/peer_health.py, started by the engine in gateway mode when the
pod is the active one): the thread probes a real UDP responder over loopback, writes Connected with a latency
to the Connection, Error after 3 lost probes once the responder stops, Connected again when it answers, and
feeds the pod's /metrics (Metrics.live_peers) with Liqo's names and labels. The API is a recorder of the requests (the
writes are what is asserted); the sockets are real."""
import socket
import threading
import time

import pytest
from controller import peer_health
from controller.metrics import Metrics
from ansible_collections.liqo.fabric.plugins.module_utils.health import prober as ph

pytestmark = pytest.mark.root
PORT = 23456
GATEWAY = {"kind": "GatewayServer", "metadata": {"name": "server", "namespace": "liqo-tenant-b",
                                                 "labels": {"liqo.io/remote-cluster-id": "cluster-b"}}}


class Api:
    """GET returns the Connection with the last patched status; PATCH is recorded."""

    def __init__(self):
        self.status, self.patches, self.lock = {}, [], threading.Lock()

    def request(self, method, path, query=None, body=None, content_type="application/json", timeout=None):
        with self.lock:
            if method == "GET" and "configmaps" in path:
                return {"data": {"CLUSTER_ID": "cluster-a"}}
            if method == "GET":
                return {"metadata": {"name": "server"}, "status": dict(self.status)}
            assert method == "PATCH" and path.endswith("/connections/server/status"), (method, path)
            assert content_type == "application/merge-patch+json"
            self.status = {k: v for k, v in body["status"].items() if v is not None}
            self.patches.append(body["status"])
            return {}


class Responder(threading.Thread):
    """The peer's end: answers probe pings sent to 127.0.0.2 (not while muted: the peer gone)."""

    def __init__(self, port=PORT):
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.setsockopt(socket.SOL_SOCKET, ph.SO_BINDTODEVICE, b"lo")  # the best match for 127.0.0.2
        self.sock.bind(("127.0.0.2", port))
        self.sock.settimeout(0.2)
        self.halt = threading.Event()
        self.mute = threading.Event()  # stays bound while mute (else the prober's own socket gets its pings)

    def run(self):
        while not self.halt.is_set():
            try:
                data, peer = self.sock.recvfrom(64)
            except OSError:
                continue
            pkt = ph.decode(data)
            if pkt and pkt[0] == ph.PING and not self.mute.is_set():
                self.sock.sendto(ph.encode(ph.PONG, pkt[1], pkt[2]), peer)
        self.sock.close()


def wait(fn, deadline=10):
    start = time.monotonic()
    while time.monotonic() - start < deadline:
        if fn():
            return time.monotonic() - start
        time.sleep(0.05)
    raise AssertionError("not reached")


def test_active_pod_thread_follows_the_peer(monkeypatch):
    gateway = GATEWAY
    target = peer_health.target_of(gateway, "cluster-a")
    assert target["address"] == "169.254.18.2" and target["interface"].startswith("lwg")
    assert target["remote_cluster_id"] == "cluster-b" and target["connection_name"] == "server"
    # probe loopback instead of the tunnel: same thread, same prober, a real socket
    monkeypatch.setattr(peer_health, "target_of", lambda gw, cid: dict(target, interface="lo", address="127.0.0.2"))
    api = Api()
    responder = Responder()
    responder.start()
    h = peer_health.GatewayHealth(api, lambda: gateway, lambda: peer_health.read_cluster_id(api), port=PORT,
                                  interval=0.2, threshold=3)
    collector = peer_health.HealthCollector()
    metrics = Metrics()  # as the engine wires it in gateway mode
    metrics.live_peers = collector.samples
    metrics.connection("c", {"metadata": {"name": "server", "namespace": "liqo-tenant-b"},
                             "status": {"value": "Connected"}})  # the watched Connection: not the pod's source
    collector.health = h
    h.start()
    try:
        wait(lambda: api.status.get("value") == "Connected")
        assert api.status["latency"]["value"].endswith("ms")
        cond = api.status["conditions"][0]
        assert (cond["type"], cond["status"], cond["reason"]) == ("Established", "True", "Established")
        text = metrics.render().decode()
        assert text.count("# TYPE liqo_peer_is_connected gauge") == 1 and 'cluster="c"' not in text
        assert 'liqo_peer_is_connected{cluster_id="cluster-b",driver="wireguard"} 1.0' in text
        assert 'liqo_peer_latency_us{cluster_id="cluster-b",driver="wireguard"}' in text

        responder.mute.set()
        wait(lambda: api.status.get("value") == "Error")
        assert "latency" not in api.status and api.status["conditions"][0]["reason"] == "PeerUnreachable"
        assert 'liqo_peer_is_connected{cluster_id="cluster-b",driver="wireguard"} 0.0' in metrics.render().decode()

        responder.mute.clear()
        wait(lambda: api.status.get("value") == "Connected")
        writes = len(api.patches)
        time.sleep(1.0)  # Connected and unchanged: no write before the 10 s latency refresh
        assert len(api.patches) == writes
    finally:
        h.stop()
        responder.halt.set()
    assert not h.is_alive()


def test_the_thread_outlives_failing_ticks(monkeypatch):
    """An unexpected failure of a tick (here the informer's lookup raising, as a bug or a broken cache would) is
    logged and counted; the thread lives on, so the peer going silent is still reported, and the pod's /healthz
    (Engine.healthy) would see a dead probe thread."""
    gateway = GATEWAY
    target = peer_health.target_of(gateway, "cluster-a")
    monkeypatch.setattr(peer_health, "target_of", lambda gw, cid: dict(target, interface="lo", address="127.0.0.2"))
    broken = {"left": 3}

    def lookup():
        if broken["left"]:
            broken["left"] -= 1
            raise RuntimeError("informer cache broken")
        return gateway

    api = Api()
    responder = Responder()
    responder.start()
    h = peer_health.GatewayHealth(api, lookup, lambda: "cluster-a", port=PORT, interval=0.2, threshold=3)
    h.start()
    try:
        wait(lambda: api.status.get("value") == "Connected")
        assert h.failures == 3 and h.is_alive()
        responder.mute.set()
        wait(lambda: api.status.get("value") == "Error")
        assert h.is_alive() and h.probes >= 4
    finally:
        h.stop()
        responder.halt.set()
    assert not h.is_alive()
