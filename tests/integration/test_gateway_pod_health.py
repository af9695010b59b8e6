"""The gateway pod's live peer health (controller/peer_health.py, started by the engine in gateway mode when the
pod is the active one): the thread probes a real UDP responder over loopback, writes Connected with a latency
to the Connection, Error after 3 lost probes once the responder stops, Connected again when it answers, and
feeds the pod's /metrics (Metrics.live_peers) with Liqo's names and labels. The API is a recorder of the requests (the
writes are what is asserted); the sockets are real."""
import socket
import subprocess
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


class MtuApi(Api):
    """Api, and the status.mtu merge patches of the gateway and its Connection recorded by path."""

    def __init__(self):
        super().__init__()
        self.mtu = []   # (gateway | connection, status.mtu)

    def request(self, method, path, query=None, body=None, content_type="application/json", timeout=None):
        if method == "PATCH" and "mtu" in (body or {}).get("status", {}):
            with self.lock:
                assert content_type == "application/merge-patch+json"
                assert path in ("/apis/networking.liqo.io/v1beta1/namespaces/liqo-tenant-b/gatewayservers/server/status",
                                "/apis/networking.liqo.io/v1beta1/namespaces/liqo-tenant-b/connections/server/status"), path
                self.mtu.append(("gateway" if "/gatewayservers/" in path else "connection", body["status"]["mtu"]))
                return {}
        return super().request(method, path, query, body, content_type, timeout)


class Path:
    """The tunnel's path as the watch sees it: `ip route get` towards the peer's endpoint (no "fragmentation needed"
    recorded) and the echo requests of the probe crossing when their outer datagram fits `mtu` (a black hole above);
    the interface's MTU as `ip link set` leaves it."""

    def __init__(self, mtu, interface_mtu=1340):
        self.mtu, self.interface_mtu, self.sets, self.lock = mtu, interface_mtu, [], threading.Lock()

    def run(self, argv, **_kw):
        if argv[:3] == ["ip", "route", "get"]:
            return subprocess.CompletedProcess(argv, 0, "192.0.2.2 dev wan0 src 192.0.2.1 uid 0\n    cache", "")
        assert argv[:5] == ["ip", "link", "set", "dev", "lwgtest"], argv
        with self.lock:
            self.interface_mtu = int(argv[-1])
            self.sets.append(self.interface_mtu)
        return subprocess.CompletedProcess(argv, 0, "", "")

    def send(self, inner):
        return inner + 60 <= self.mtu


def test_auto_runs_the_path_watch_in_the_active_pod(monkeypatch):
    """spec.mtu auto: the active pod's peer health runs the path's watch (module_utils/gateway/path_mtu.py): its first
    probe at once (a pod that takes over), the tunnel set to what crosses a 1380-byte path, status.mtu written to the
    gateway and the Connection, the MTU on /metrics; a path lowered to 1300 is followed; the peer answering again
    after an Error (a failover) is probed at once, not at the next period; the peer's announced MTU caps it. The
    interface and the path are the recorded `ip` commands and the probes' sizes; the pings are real."""
    gateway = dict(GATEWAY, spec={"mtu": "auto"})
    target = peer_health.target_of(gateway, "cluster-a")
    assert target["mtu_auto"] and target["kind"] == "GatewayServer"
    assert not peer_health.target_of(GATEWAY, "cluster-a")["mtu_auto"]
    monkeypatch.setattr(peer_health, "target_of", lambda gw, cid: dict(target, interface="lo", address="127.0.0.2"))
    path = Path(1380)
    pm = peer_health.pmtu
    monkeypatch.setattr(pm, "peer_endpoint_ip", lambda interface, key=None: "192.0.2.2")
    monkeypatch.setattr(pm, "link_mtu", lambda dev: path.interface_mtu if dev == "lwgtest" else 1500)
    cap = {"value": None}

    def watch(interface, address, cap=None):
        assert (interface, address) == ("lo", "127.0.0.2")
        return pm.Watch("lwgtest", address, cap=cap, period=0.5, run=path.run, send=path.send)

    api = MtuApi()
    responder = Responder()
    responder.start()
    h = peer_health.GatewayHealth(api, lambda: gateway, lambda: "cluster-a", port=PORT, interval=0.2, threshold=3,
                                  mtu_cap=lambda: cap["value"], mtu_watch=watch)
    collector = peer_health.HealthCollector()
    metrics = Metrics()
    metrics.live_peers = collector.samples
    collector.health = h
    h.start()
    try:
        probed = {"value": 1312, "source": "probed", "probed": 1312, "pathMTU": 1372}
        wait(lambda: ("connection", {"value": 1312, "source": "probed"}) in api.mtu)
        assert ("gateway", probed) in api.mtu and path.interface_mtu == 1312
        assert 'liqo_fabric_tunnel_mtu{cluster_id="cluster-b",driver="wireguard"} 1312.0' in metrics.render().decode()
        assert h.path_mtu()["status"] == probed and h.path_mtu()["written"] == probed

        path.mtu = 1300                          # the path shrinks while connected: the next probe lowers at once
        wait(lambda: path.interface_mtu == 1232)
        wait(lambda: ("connection", {"value": 1232, "source": "probed"}) in api.mtu)
        assert h.path_mtu()["changes"] == {"lower": 1, "raise": 0}

        h.mtu_live.watch.period = 3600           # no periodic probe from now on: what follows is the reconnection's
        probes = h.path_mtu()["probes"]
        responder.mute.set()
        wait(lambda: api.status.get("value") == "Error")
        path.mtu = 1500
        responder.mute.clear()
        wait(lambda: api.status.get("value") == "Connected")
        wait(lambda: h.path_mtu()["probes"] > probes)
        assert h.path_mtu()["last_probe"]["reason"] == "reconnected"
        assert path.interface_mtu == 1232        # a larger size is confirmed before the tunnel grows

        cap["value"] = 1200                      # the peer announces a smaller MTU: the next probe takes it
        h.mtu_live.watch.kick("test")
        wait(lambda: path.interface_mtu == 1200)
        wait(lambda: ("gateway", {"value": 1200, "source": "probed", "probed": 1440, "pathMTU": 1500}) in api.mtu)
    finally:
        h.stop()
        responder.halt.set()
    assert not h.is_alive() and h.mtu_live is None
