# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Is a gateway's tunnel up? A fresh WireGuard handshake with the expected peer, then full-size pings
(don't-fragment, at the tunnel MTU) to the peer's transit address through the tunnel interface."""

from __future__ import annotations

import re
import subprocess
import time

from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.interface import read_interface

HANDSHAKE_FRESH = 180  # seconds: WireGuard rekeys every 120 s, a session is dead after 180 s
_RTT = re.compile(r"= [\d.]+/([\d.]+)/[\d.]+/[\d.]+ ms")


def ping(interface, address, size, count=3, timeout=1):
    """(ok, avg rtt ms) of `count` don't-fragment pings of `size` payload bytes bound to `interface`."""
    # 10 ms apart (root may go below ping's 0.2 s floor): three samples cost ~0.03 s, not ~0.1 s
    argv = ["ping", "-n", "-q", "-c", str(count), "-i", "0.01", "-W", str(timeout), "-M", "do", "-s", str(size),
            "-I", interface, address]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    m = _RTT.search(proc.stdout)
    return proc.returncode == 0, (float(m.group(1)) if m else None)


def probe_once(interface, peer_public_key, address, mtu):
    view = read_interface(interface)
    if view.get("state") != "present":
        return {"connected": False, "reason": "NoInterface", "message": "interface %s does not exist" % interface}
    peer = next((p for p in view.get("peers", []) if p["public_key"] == peer_public_key), None)
    if peer is None:
        return {"connected": False, "reason": "NoPeer",
                "message": "interface %s has no peer %s" % (interface, peer_public_key)}
    age = peer.get("latest_handshake_age")
    if age is None or age > HANDSHAKE_FRESH:
        return {"connected": False, "reason": "NoHandshake", "handshake_age": age,
                "message": "no WireGuard handshake with peer %s%s (a wrong public key on either side, or the "
                           "endpoint is unreachable)" % (peer_public_key,
                                                         " at %s" % peer["endpoint"] if peer.get("endpoint") else "")}
    size = mtu - 28  # IPv4 + ICMP headers
    ok, rtt = ping(interface, address, size)
    if not ok:
        small_ok, small_rtt = ping(interface, address, 56, count=1)
        if small_ok:
            return {"connected": False, "reason": "MTUMismatch", "handshake_age": age, "latency_ms": small_rtt,
                    "message": "small probes pass but %d-byte probes to %s do not: the MTU (%d) is not "
                               "the same on both sides or the path is smaller" % (size + 28, address, mtu)}
        return {"connected": False, "reason": "ProbeFailed", "handshake_age": age,
                "message": "handshake done but no reply from %s through %s" % (address, interface)}
    return {"connected": True, "reason": "Established", "handshake_age": age, "latency_ms": rtt,
            "message": "handshake %.0f s ago, %d-byte probes answered in %.3f ms" % (age, size + 28, rtt)}


def probe(interface, peer_public_key, address, mtu, wait=0.0, interval=0.1):
    """Probes until connected or `wait` seconds passed. `final` is set when the probe waited for its full
    budget: only then is a failure an Error rather than still Connecting."""
    deadline = time.monotonic() + wait
    while True:
        result = probe_once(interface, peer_public_key, address, mtu)
        if result["connected"] or time.monotonic() >= deadline:
            result["final"] = wait > 0
            return result
        time.sleep(interval)
