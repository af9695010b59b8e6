# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The minimal change from a device's state to its spec, the state it leads to (check mode), and the public
views of both for a diff (keys are public only: a preshared key shows as whether one is set)."""
from __future__ import absolute_import, division, print_function

import time

from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.keys import ZERO_KEY, encode_key, public_key_bytes
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.model import (
    DeviceChange, DeviceState, PeerChange, PeerState, _cidr_sort_key)


def compute_change(spec, current):
    """Minimal change that turns `current` (DeviceState, or None for a new device) into `spec`."""
    cur = current or DeviceState()
    ch = DeviceChange()
    if cur.private_key != spec.private_key:
        ch.private_key = spec.private_key
    if spec.listen_port is not None and spec.listen_port != cur.listen_port:
        ch.listen_port = spec.listen_port
    if spec.fwmark is not None and spec.fwmark != cur.fwmark:
        ch.fwmark = spec.fwmark
    wanted = set(p.public_key for p in spec.peers)
    if spec.exclusive:
        for pub in cur.peers:
            if pub not in wanted:
                ch.peers.append(PeerChange(pub, remove=True))
    inherited = replaced_peer_endpoint(spec, cur)
    for p in spec.peers:
        c = cur.peers.get(p.public_key)
        if c is None:
            ch.peers.append(PeerChange(p.public_key, new=True, preshared_key=p.preshared_key,
                                       endpoint=p.endpoint if p.endpoint is not None else inherited,
                                       persistent_keepalive=p.persistent_keepalive or None,
                                       allowed_ips=list(p.allowed_ips)))
            continue
        pc = PeerChange(p.public_key)
        if (p.preshared_key or ZERO_KEY) != (c.preshared_key or ZERO_KEY):
            pc.preshared_key = p.preshared_key or ZERO_KEY
        if p.endpoint is not None and p.endpoint != c.endpoint:
            pc.endpoint = p.endpoint
        if p.persistent_keepalive != (c.persistent_keepalive or 0):
            pc.persistent_keepalive = p.persistent_keepalive
        if sorted(p.allowed_ips, key=_cidr_sort_key) != sorted(c.allowed_ips, key=_cidr_sort_key):
            pc.allowed_ips = list(p.allowed_ips)
        if (pc.preshared_key is not None or pc.endpoint is not None or pc.persistent_keepalive is not None
                or pc.allowed_ips is not None):
            ch.peers.append(pc)
    return ch


def replaced_peer_endpoint(spec, current):
    """A key rotation of the remote side replaces an exclusive interface's only peer by one with a new public
    key. A peer without a configured endpoint (a server's) would start without one and could not handshake
    until the remote does; it gets the endpoint WireGuard learned for the peer it replaces, so this side
    handshakes at once (docs/key-rotation.md). Returns that endpoint, or None when not such a replacement."""
    if not spec.exclusive or len(spec.peers) != 1 or spec.peers[0].endpoint is not None:
        return None
    removed = [p for pub, p in current.peers.items() if pub != spec.peers[0].public_key]
    if len(removed) != 1 or spec.peers[0].public_key in current.peers:
        return None
    return removed[0].endpoint


def peer_view(p, now=None):
    """A peer as returned to users: never the preshared key itself, only whether one is set."""
    view = {
        "public_key": p.public_key,
        "endpoint": p.endpoint,
        "allowed_ips": list(p.allowed_ips),
        "persistent_keepalive": p.persistent_keepalive or 0,
        "preshared_key_set": bool(p.preshared_key),
    }
    if isinstance(p, PeerState):
        now = time.time() if now is None else now
        view["latest_handshake"] = int(p.last_handshake) if p.last_handshake else None
        view["latest_handshake_age"] = round(max(0.0, now - p.last_handshake), 3) if p.last_handshake else None
        view["rx_bytes"] = p.rx_bytes
        view["tx_bytes"] = p.tx_bytes
    return view


def config_view(name, dev, link, with_stats=False):
    """Comparable view of an interface (diff before/after): keys are public only."""
    if dev is None:
        return {"name": name, "state": "absent"}
    peers = []
    for p in dev.peers.values():
        v = peer_view(p)
        if not with_stats:
            for k in ("latest_handshake", "latest_handshake_age", "rx_bytes", "tx_bytes"):
                v.pop(k, None)
        v["allowed_ips"] = sorted(v["allowed_ips"], key=_cidr_sort_key)
        peers.append(v)
    return {
        "name": name,
        "state": "present",
        "public_key": encode_key(public_key_bytes(dev.private_key)) if dev.private_key else None,
        "listen_port": dev.listen_port,
        "fwmark": dev.fwmark,
        "mtu": link.mtu if link else None,
        "addresses": sorted(link.addresses) if link else [],
        "up": link.up if link else False,
        "peers": sorted(peers, key=lambda v: v["public_key"]),
    }


def apply_change_to_state(spec, current):
    """The DeviceState the device will have after `compute_change(spec, current)` is applied (check mode)."""
    cur = current or DeviceState()
    new = DeviceState(spec.private_key,
                      spec.listen_port if spec.listen_port is not None else cur.listen_port,
                      spec.fwmark if spec.fwmark is not None else cur.fwmark)
    if not spec.exclusive:
        wanted = set(p.public_key for p in spec.peers)
        claimed = set(a for p in spec.peers for a in p.allowed_ips)
        for pub, p in cur.peers.items():
            if pub not in wanted:  # kept, minus allowed IPs a listed peer takes over
                new.peers[pub] = PeerState(pub, p.endpoint, [a for a in p.allowed_ips if a not in claimed],
                                           p.persistent_keepalive, p.preshared_key, p.last_handshake,
                                           p.rx_bytes, p.tx_bytes)
    inherited = replaced_peer_endpoint(spec, cur)
    for p in spec.peers:
        c = cur.peers.get(p.public_key)
        new.peers[p.public_key] = PeerState(
            p.public_key, p.endpoint if p.endpoint is not None else (c.endpoint if c else inherited),
            list(p.allowed_ips), p.persistent_keepalive, p.preshared_key)
    return new
