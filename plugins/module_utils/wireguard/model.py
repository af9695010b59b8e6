# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one model every WireGuard operation goes through: `InterfaceSpec` and `PeerSpec` (desired, validated),
`DeviceState` and `PeerState` (read back from a device), `DeviceChange` and `PeerChange` (what to write; empty when
nothing differs)."""
from __future__ import absolute_import, division, print_function

import ipaddress

DEFAULT_MTU = 1340


class PeerSpec(object):
    __slots__ = ("public_key", "endpoint", "allowed_ips", "persistent_keepalive", "preshared_key")

    def __init__(self, public_key, endpoint=None, allowed_ips=(), persistent_keepalive=0, preshared_key=None):
        self.public_key = public_key              # base64
        self.endpoint = endpoint                  # "ip:port" / "[ip6]:port" or None (not managed)
        self.allowed_ips = list(allowed_ips)      # normalized CIDRs, sorted
        self.persistent_keepalive = persistent_keepalive
        self.preshared_key = preshared_key        # 32 bytes or None


class InterfaceSpec(object):
    __slots__ = ("name", "private_key", "listen_port", "fwmark", "mtu", "addresses", "peers", "exclusive")

    def __init__(self, name, private_key, listen_port=None, fwmark=None, mtu=DEFAULT_MTU, addresses=None,
                 peers=(), exclusive=False):
        self.name = name
        self.private_key = private_key            # 32 bytes
        self.listen_port = listen_port            # None: not managed
        self.fwmark = fwmark                      # None: not managed; 0 removes
        self.mtu = mtu
        self.addresses = addresses                # None: not managed; list of "ip/prefix"
        self.peers = list(peers)
        self.exclusive = exclusive


class PeerState(object):
    __slots__ = ("public_key", "endpoint", "allowed_ips", "persistent_keepalive", "preshared_key",
                 "last_handshake", "rx_bytes", "tx_bytes")

    def __init__(self, public_key, endpoint=None, allowed_ips=None, persistent_keepalive=0, preshared_key=None,
                 last_handshake=None, rx_bytes=0, tx_bytes=0):
        self.public_key = public_key
        self.endpoint = endpoint
        self.allowed_ips = allowed_ips if allowed_ips is not None else []
        self.persistent_keepalive = persistent_keepalive
        self.preshared_key = preshared_key        # bytes or None
        self.last_handshake = last_handshake      # epoch seconds (float) or None
        self.rx_bytes = rx_bytes
        self.tx_bytes = tx_bytes


class DeviceState(object):
    __slots__ = ("private_key", "listen_port", "fwmark", "peers")

    def __init__(self, private_key=None, listen_port=0, fwmark=0, peers=None):
        self.private_key = private_key            # bytes or None
        self.listen_port = listen_port
        self.fwmark = fwmark
        self.peers = peers if peers is not None else {}   # base64 public key -> PeerState, in device order


class PeerChange(object):
    __slots__ = ("public_key", "remove", "new", "preshared_key", "endpoint", "persistent_keepalive", "allowed_ips")

    def __init__(self, public_key, remove=False, new=False, preshared_key=None, endpoint=None,
                 persistent_keepalive=None, allowed_ips=None):
        self.public_key = public_key
        self.remove = remove
        self.new = new
        self.preshared_key = preshared_key        # None: unchanged; ZERO_KEY: removed
        self.endpoint = endpoint                  # None: unchanged
        self.persistent_keepalive = persistent_keepalive  # None: unchanged
        self.allowed_ips = allowed_ips            # None: unchanged; list: replaces


class DeviceChange(object):
    __slots__ = ("private_key", "listen_port", "fwmark", "peers")

    def __init__(self):
        self.private_key = None
        self.listen_port = None
        self.fwmark = None
        self.peers = []

    def empty(self):
        return self.private_key is None and self.listen_port is None and self.fwmark is None and not self.peers


def _cidr_sort_key(cidr):
    n = ipaddress.ip_network(cidr)
    return (n.version, n.network_address.packed, n.prefixlen)
