# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The peer metrics of a gateway, with Liqo's names and label names (`driver`, `cluster_id`):
liqo_peer_is_connected, liqo_peer_latency_us (from the health probe), liqo_peer_receive_bytes_total and
liqo_peer_transmit_bytes_total (WireGuard's counters of the tunnel's peer). Rendered in the Prometheus
text format without a client library (the agentless probe process has none)."""

from __future__ import annotations

from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.interface import read_interface

DRIVER = "wireguard"
LABELS = ("driver", "cluster_id")
FAMILIES = (
    ("liqo_peer_is_connected", "gauge", "1 while the health probe through the tunnel to the peer is answered"),
    ("liqo_peer_latency_us", "gauge", "Round-trip time of the health probe through the tunnel (microseconds)"),
    ("liqo_peer_receive_bytes_total", "counter", "Bytes received from the peer (WireGuard)"),
    ("liqo_peer_transmit_bytes_total", "counter", "Bytes sent to the peer (WireGuard)"),
    ("liqo_fabric_tunnel_mtu", "gauge", "MTU of the tunnel interface (with spec.mtu auto: what the path carries)"),
)


def transfer(interface, public_key=None, run_dir=None):
    """(rx_bytes, tx_bytes) of the interface's peer (`public_key`, else all peers summed); None when the
    interface is gone."""
    kwargs = {"run_dir": run_dir} if run_dir else {}
    try:
        view = read_interface(interface, **kwargs)
    except Exception:  # pylint: disable=broad-except
        return None
    if view.get("state") != "present":
        return None
    peers = [p for p in view.get("peers") or [] if public_key is None or p.get("public_key") == public_key]
    return sum(p.get("rx_bytes") or 0 for p in peers), sum(p.get("tx_bytes") or 0 for p in peers)


class Counters(object):
    """WireGuard's byte counters of a peer kept monotonic: they restart from 0 when the peer is re-added (a
    session restart) or wireguard-go restarts; what was counted before is carried over, so the exported
    *_total counters never go back."""

    def __init__(self, interface, public_key=None, run_dir=None):
        self.interface, self.public_key, self.run_dir = interface, public_key, run_dir
        self.base = [0, 0]
        self.last = None

    def add(self, raw):
        """Folds one reading (rx, tx) in; returns the monotonic (rx, tx), None when the reading is None (the
        interface is gone: no counters exported, what was counted is kept for when it is back)."""
        if raw is None:
            return None
        if self.last is not None:
            for i in (0, 1):
                if raw[i] < self.last[i]:
                    self.base[i] += self.last[i]
        self.last = tuple(raw)
        return self.base[0] + self.last[0], self.base[1] + self.last[1]

    def read(self):
        return self.add(transfer(self.interface, self.public_key, self.run_dir))


def sample(cluster_id, connected, latency_us, counters, mtu=None):
    """One peer's values, keyed by metric name (the counters and the MTU are absent while the interface is gone)."""
    out = {"liqo_peer_is_connected": 1 if connected else 0,
           "liqo_peer_latency_us": round(latency_us) if connected and latency_us is not None else 0}
    if mtu:
        out["liqo_fabric_tunnel_mtu"] = mtu
    if counters is not None:
        out["liqo_peer_receive_bytes_total"], out["liqo_peer_transmit_bytes_total"] = counters
    return {"labels": {"driver": DRIVER, "cluster_id": cluster_id or ""}, "values": out}


def _escape(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render(samples):
    """Prometheus text exposition of the samples."""
    lines = []
    for name, mtype, text in FAMILIES:
        lines += ["# HELP %s %s" % (name, text), "# TYPE %s %s" % (name, mtype)]
        for s in samples:
            if name in s["values"]:
                labels = ",".join('%s="%s"' % (k, _escape(s["labels"][k])) for k in LABELS)
                lines.append("%s{%s} %s" % (name, labels, s["values"][name]))
    return "\n".join(lines) + "\n"
