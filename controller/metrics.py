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
        self.peer_connected = Gauge("liqo_peer_is_connected", "1 when the Connection to the peer is Connected",
                                    ["cluster", "namespace", "name", "remote_cluster_id"], registry=r)
        self.peer_latency = Gauge("liqo_peer_latency_us", "Round-trip latency to the peer through the tunnel (us)",
                                  ["cluster", "namespace", "name", "remote_cluster_id"], registry=r)

    def connection(self, cluster: str, obj: dict, deleted: bool = False) -> None:
        meta = obj.get("metadata") or {}
        labels = (cluster, meta.get("namespace") or "", meta.get("name") or "",
                  (meta.get("labels") or {}).get("liqo.io/remote-cluster-id", ""))
        if deleted:
            for g in (self.peer_connected, self.peer_latency):
                try:
                    g.remove(*labels)
                except KeyError:
                    pass
            return
        status = obj.get("status") or {}
        self.peer_connected.labels(*labels).set(1 if status.get("value") == "Connected" else 0)
        lat = parse_duration_us(((status.get("latency") or {}).get("value")))
        if lat is not None:
            self.peer_latency.labels(*labels).set(lat)

    def render(self) -> bytes:
        return generate_latest(self.registry)


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
        self.server.serve_forever(poll_interval=0.5)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
