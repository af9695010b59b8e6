# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prometheus metrics and the /metrics, /healthz, /readyz endpoints."""
from __future__ import annotations

import http.server
import json
import logging
import re
import threading
from typing import Callable, Optional

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import CONTENT_TYPE_LATEST, ProcessCollector, PlatformCollector
from prometheus_client.metrics_core import Metric

log = logging.getLogger("controller.metrics")

_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 1.5, 2, 3, 5, 10, 30, 60, 120, 300)


class Metrics:
    def __init__(self):
        r = self.registry = CollectorRegistry()
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        self.reconcile = Histogram("liqo_fabric_reconcile_duration_seconds", "Playbook reconcile duration",
                                   ["cluster", "kind", "result"], buckets=_BUCKETS, registry=r)
        self.queue_depth = Gauge("liqo_fabric_queue_depth", "Work items waiting", registry=r)
        self.queue_running = Gauge("liqo_fabric_queue_running", "Work items running", registry=r)
        self.queue_wait = Histogram("liqo_fabric_queue_wait_seconds", "First event to dispatch", ["kind"],
                                    buckets=(0.01, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60), registry=r)
        self.skipped = Counter("liqo_fabric_reconcile_skipped_total", "Reconciles skipped without Ansible",
                               ["cluster", "kind", "reason"], registry=r)
        self.runs = Counter("liqo_fabric_playbook_runs_total", "Playbook runs started",
                            ["cluster", "kind", "playbook"], registry=r)
        self.spawn = Histogram("liqo_fabric_runner_spawn_seconds", "ansible_runner start to first playbook event",
                               ["mode"], buckets=(0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 5), registry=r)
        self.runner_starts = Counter("liqo_fabric_runner_starts_total",
                                     "Playbook runs by start: warm (forked from the zygote) or cold", ["mode"], registry=r)
        self.changed_tasks = Counter("liqo_fabric_changed_tasks_total", "Changed tasks reported by runs",
                                     ["cluster", "kind"], registry=r)
        self.drift = Counter("liqo_fabric_drift_detected_total", "Drift checks that found a difference",
                             ["cluster", "kind"], registry=r)
        self.drift_checks = Counter("liqo_fabric_drift_checks_total", "Drift checks run", ["cluster", "kind"], registry=r)
        self.drift_failed = Counter("liqo_fabric_drift_check_failures_total",
                                    "Drift checks that could not read a dataplane (the key is Degraded, DriftCheckFailed)",
                                    ["cluster", "kind"], registry=r)
        self.events = Counter("liqo_fabric_watch_events_total", "Watch events received", ["cluster", "kind"], registry=r)
        self.leader = Gauge("liqo_fabric_leader", "1 while this replica holds the cluster's Lease", ["cluster"], registry=r)
        # liqo_peer_* (Liqo's names and label names driver, cluster_id; the controller adds cluster, namespace and
        # name: it serves several clusters). From the Connections' status, which the gateways' live health probe
        # keeps current; a gateway pod reports its own probe instead (live_peers).
        self.peers: dict = {}
        self.live_peers: Optional[Callable[[], list]] = None
        r.register(_PeerCollector(self))

    def connection(self, cluster: str, obj: dict, deleted: bool = False) -> None:
        meta = obj.get("metadata") or {}
        key = (cluster, meta.get("namespace") or "", meta.get("name") or "")
        if deleted:
            self.peers.pop(key, None)
            return
        status = obj.get("status") or {}
        connected = status.get("value") == "Connected"
        lat = parse_duration_us(((status.get("latency") or {}).get("value"))) if connected else None
        self.peers[key] = {"labels": {"driver": DRIVER,
                                      "cluster_id": (meta.get("labels") or {}).get("liqo.io/remote-cluster-id", ""),
                                      "cluster": key[0], "namespace": key[1], "name": key[2]},
                           "values": {"liqo_peer_is_connected": 1 if connected else 0,
                                      "liqo_peer_latency_us": lat or 0}}

    def render(self) -> bytes:
        return generate_latest(self.registry)


DRIVER = "wireguard"
_PEER_FAMILIES = (
    ("liqo_peer_is_connected", "gauge", "1 while the peer answers the health probe through the tunnel"),
    ("liqo_peer_latency_us", "gauge", "Round-trip time of the health probe through the tunnel (microseconds)"),
    ("liqo_peer_receive_bytes_total", "counter", "Bytes received from the peer (WireGuard)"),
    ("liqo_peer_transmit_bytes_total", "counter", "Bytes sent to the peer (WireGuard)"),
    # a gateway pod's own tunnel (live_peers): with spec.mtu auto, what its path watch set
    ("liqo_fabric_tunnel_mtu", "gauge", "MTU of the tunnel interface (with spec.mtu auto: what the path carries)"),
)


class _PeerCollector:
    """The liqo_peer_* families: one family per name, whatever the source of its samples."""

    def __init__(self, metrics: "Metrics"):
        self.metrics = metrics

    def collect(self):
        live = self.metrics.live_peers
        samples = live() if live else list(self.metrics.peers.values())
        for name, mtype, text in _PEER_FAMILIES:
            rows = [(s["labels"], s["values"][name]) for s in samples if name in s["values"]]
            if not rows:
                continue
            fam = Metric(name[:-len("_total")] if mtype == "counter" else name, text, mtype)
            for labels, value in rows:
                fam.add_sample(name, labels, value)
            yield fam


_DUR = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_US = {"ns": 1e-3, "us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6, "m": 60e6, "h": 3600e6}


def parse_duration_us(text) -> Optional[float]:
    """Go duration string ('1.2ms', '850µs', '1m2.5s') -> microseconds; None if absent or invalid."""
    if not isinstance(text, str) or not text.strip():
        return None
    s = text.strip()
    pos, total = 0, 0.0
    for m in _DUR.finditer(s):
        if m.start() != pos:
            return None
        total += float(m.group(1)) * _UNIT_US[m.group(2)]
        pos = m.end()
    return total if pos == len(s) and pos > 0 else None


class HealthServer(threading.Thread):
    """GET /metrics, /healthz (the process loop is alive), /readyz (caches synced)."""

    def __init__(self, address: str, port: int, metrics: Metrics, healthy: Callable[[], tuple],
                 ready: Callable[[], tuple]):
        super().__init__(name="http", daemon=True)
        metrics_ref, healthy_ref, ready_ref = metrics, healthy, ready

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server API)
                path = self.path.split("?")[0]
                if path == "/metrics":
                    self._send(200, metrics_ref.render(), CONTENT_TYPE_LATEST)
                elif path in ("/healthz", "/readyz"):
                    ok, detail = (healthy_ref if path == "/healthz" else ready_ref)()
                    self._send(200 if ok else 503, (json.dumps(detail) + "\n").encode(), "application/json")
                else:
                    self._send(404, b"not found\n", "text/plain")

            def _send(self, code, body, ctype):
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):  # keep the JSON log clean
                pass

        self.server = http.server.ThreadingHTTPServer((address, port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]

    def run(self) -> None:
        # stop() returns once this loop sees its request, which it looks for every poll_interval
        self.server.serve_forever(poll_interval=0.1)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
