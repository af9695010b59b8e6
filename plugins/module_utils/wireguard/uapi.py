# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cross-platform WireGuard text protocol (UAPI) that wireguard-go serves on its socket: a `DeviceChange`
rendered as one `set=1` request, a `get=1` response parsed into a `DeviceState`. Keys travel as hex."""
from __future__ import absolute_import, division, print_function

import base64

from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.errors import WireGuardError
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.keys import ZERO_KEY, encode_key
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.model import DeviceState, PeerState


def render_uapi_set(change):
    """DeviceChange -> the UAPI `set=1` request text, or '' when there is nothing to write."""
    if change.empty():
        return ""
    out = ["set=1"]
    if change.private_key is not None:
        out.append("private_key=" + change.private_key.hex())
    if change.listen_port is not None:
        out.append("listen_port=%d" % change.listen_port)
    if change.fwmark is not None:
        out.append("fwmark=%d" % change.fwmark)
    # removals first: an allowed IP that moves to another peer is then never briefly owned twice
    for pc in sorted(change.peers, key=lambda x: not x.remove):
        out.append("public_key=" + base64.b64decode(pc.public_key).hex())
        if pc.remove:
            out.append("remove=true")
            continue
        if pc.preshared_key is not None:
            out.append("preshared_key=" + pc.preshared_key.hex())
        if pc.endpoint is not None:
            out.append("endpoint=" + pc.endpoint)
        if pc.persistent_keepalive is not None:
            out.append("persistent_keepalive_interval=%d" % pc.persistent_keepalive)
        if pc.allowed_ips is not None:
            out.append("replace_allowed_ips=true")
            out.extend("allowed_ip=" + a for a in pc.allowed_ips)
    return "\n".join(out) + "\n\n"


def parse_uapi_get(text):
    """Response of `get=1` -> DeviceState. Raises WireGuardError on a non-zero errno."""
    dev = DeviceState()
    peer = None
    hs_sec = {}
    for line in text.split("\n"):
        if not line:
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise WireGuardError("UAPI: unexpected line %r" % line[:60])
        if key == "errno":
            if int(value) != 0:
                raise WireGuardError("UAPI get failed: errno %s" % value)
        elif key == "public_key":
            peer = PeerState(encode_key(bytes.fromhex(value)))
            dev.peers[peer.public_key] = peer
        elif peer is None:
            if key == "private_key":
                raw = bytes.fromhex(value)
                dev.private_key = None if raw == ZERO_KEY else raw
            elif key == "listen_port":
                dev.listen_port = int(value)
            elif key == "fwmark":
                dev.fwmark = int(value)
        elif key == "preshared_key":
            raw = bytes.fromhex(value)
            peer.preshared_key = None if raw == ZERO_KEY else raw
        elif key == "endpoint":
            peer.endpoint = value
        elif key == "allowed_ip":
            peer.allowed_ips.append(value)
        elif key == "persistent_keepalive_interval":
            peer.persistent_keepalive = int(value)
        elif key == "rx_bytes":
            peer.rx_bytes = int(value)
        elif key == "tx_bytes":
            peer.tx_bytes = int(value)
        elif key == "last_handshake_time_sec":
            hs_sec[peer.public_key] = int(value)
        elif key == "last_handshake_time_nsec":
            sec = hs_sec.get(peer.public_key, 0)
            if sec or int(value):
                peer.last_handshake = sec + int(value) / 1e9
    for pub, sec in hs_sec.items():
        p = dev.peers[pub]
        if p.last_handshake is None and sec:
            p.last_handshake = float(sec)
    return dev
