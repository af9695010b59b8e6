# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The `kernel` backend: the Linux wireguard module, configured over generic netlink (pyroute2 `WireGuard`).

pyroute2 for the wireguard generic netlink family: a few messages with nested attributes; route tables take route/'s
own stack (route/__init__.py)."""
from __future__ import absolute_import, division, print_function

import base64
import contextlib
import ipaddress
import os

from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.keys import ZERO_KEY, encode_key
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.link import HAS_PYROUTE2
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.model import DeviceState, PeerState
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.validation import format_endpoint, split_endpoint

BACKEND_KERNEL = "kernel"


def kernel_has_wireguard():
    """True when the kernel module is loaded/built in (its generic netlink family is registered)."""
    if os.path.isdir("/sys/module/wireguard"):
        return True
    if not HAS_PYROUTE2:
        return False
    try:
        from pyroute2.netlink.generic import GenericNetlinkSocket
        s = GenericNetlinkSocket()
        try:
            s.bind("wireguard", None)
            return True
        finally:
            s.close()
    except Exception:  # family lookup fails with a netlink error when the module is absent
        return False


class KernelBackend(object):
    """The Linux module over generic netlink (pyroute2). One netlink socket per apply; pyroute2 sends one
    message per changed peer. Not exercised on kernels without the module."""

    name = BACKEND_KERNEL

    def __init__(self, ifname):
        self.ifname = ifname

    def running(self, link):
        return link is not None and link.kind == "wireguard"

    def config_lock(self):
        """No cross-process lock for the kernel module (not exercised here); see UserspaceBackend.config_lock."""
        return contextlib.ExitStack()

    def start(self, ipr):
        ipr.link("add", ifname=self.ifname, kind="wireguard")
        return None

    def stop(self, ipr):
        idx = ipr.link_lookup(ifname=self.ifname)
        if idx:
            ipr.link("del", index=idx[0])
        return None

    def read(self):
        from pyroute2 import WireGuard
        dev = DeviceState()
        wg = WireGuard()
        try:
            msgs = wg.info(self.ifname)
        finally:
            wg.close()
        for msg in msgs:
            k = msg.get_attr("WGDEVICE_A_PRIVATE_KEY")
            if k is not None:
                raw = base64.b64decode(k["value"] if isinstance(k, dict) else k)
                dev.private_key = None if raw == ZERO_KEY else raw
            dev.listen_port = msg.get_attr("WGDEVICE_A_LISTEN_PORT") or dev.listen_port
            dev.fwmark = msg.get_attr("WGDEVICE_A_FWMARK") or dev.fwmark
            for p in msg.get_attr("WGDEVICE_A_PEERS") or []:
                pk = p.get_attr("WGPEER_A_PUBLIC_KEY")
                pub = (pk["value"] if isinstance(pk, dict) else pk)
                pub = pub.decode("ascii") if isinstance(pub, bytes) else pub
                peer = dev.peers.get(pub) or PeerState(pub)
                dev.peers[pub] = peer
                psk = p.get_attr("WGPEER_A_PRESHARED_KEY")
                if psk is not None:
                    raw = base64.b64decode(psk["value"] if isinstance(psk, dict) else psk)
                    peer.preshared_key = None if raw == ZERO_KEY else raw
                ep = p.get_attr("WGPEER_A_ENDPOINT")
                if ep is not None and ep.get("port"):
                    peer.endpoint = format_endpoint(ep["addr"], ep["port"])
                peer.persistent_keepalive = p.get_attr("WGPEER_A_PERSISTENT_KEEPALIVE_INTERVAL") or 0
                hs = p.get_attr("WGPEER_A_LAST_HANDSHAKE_TIME")
                if hs is not None and (hs.get("tv_sec") or hs.get("tv_nsec")):
                    peer.last_handshake = hs["tv_sec"] + hs["tv_nsec"] / 1e9
                peer.rx_bytes = p.get_attr("WGPEER_A_RX_BYTES") or 0
                peer.tx_bytes = p.get_attr("WGPEER_A_TX_BYTES") or 0
                for a in p.get_attr("WGPEER_A_ALLOWEDIPS") or []:
                    if a.get("addr"):
                        peer.allowed_ips.append(str(ipaddress.ip_network(a["addr"], strict=False)))
        return dev

    def apply(self, change):
        if change.empty():
            return False
        from pyroute2 import WireGuard
        wg = WireGuard()
        try:
            dev = {}
            if change.private_key is not None:
                dev["private_key"] = encode_key(change.private_key)
            if change.listen_port is not None:
                dev["listen_port"] = change.listen_port
            if change.fwmark is not None:
                dev["fwmark"] = change.fwmark
            if dev:
                wg.set(self.ifname, **dev)
            for pc in sorted(change.peers, key=lambda x: not x.remove):
                peer = {"public_key": pc.public_key}
                if pc.remove:
                    peer["remove"] = True
                else:
                    if pc.preshared_key is not None:
                        peer["preshared_key"] = encode_key(pc.preshared_key)
                    if pc.endpoint is not None:
                        host, port = split_endpoint(pc.endpoint, "endpoint")
                        peer["endpoint_addr"], peer["endpoint_port"] = host, port
                    if pc.persistent_keepalive is not None:
                        peer["persistent_keepalive"] = pc.persistent_keepalive
                    if pc.allowed_ips is not None:
                        peer["replace_allowed_ips"] = True
                        peer["allowed_ips"] = list(pc.allowed_ips)
                wg.set(self.ifname, peer=peer)
        finally:
            wg.close()
        return True
