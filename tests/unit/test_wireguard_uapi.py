"""UAPI text protocol and diff logic: parse `get=1`, render minimal `set=1`, idempotence as a property.

A small independent interpreter of `set=1` (device semantics from the cross-platform protocol) checks that
applying the rendered change reaches the desired state and that a second diff is empty.
"""
import base64
import os
import sys

import pytest
from hypothesis import given, settings, strategies as st

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "build", "collections"))
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.diff import (  # noqa: E402
    apply_change_to_state, compute_change, config_view, peer_view)
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.errors import WireGuardError  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.keys import (  # noqa: E402
    encode_key, public_key_bytes)
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.model import (  # noqa: E402
    DeviceState, InterfaceSpec, PeerSpec, PeerState, _cidr_sort_key)
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.uapi import (  # noqa: E402
    parse_uapi_get, render_uapi_set)


def key(i):
    return base64.b64encode(bytes([i]) * 32).decode()


PRIV = bytes([200]) * 32
GET_TEXT = (
    "private_key=" + PRIV.hex() + "\n"
    "listen_port=51820\n"
    "fwmark=7\n"
    "public_key=" + (bytes([1]) * 32).hex() + "\n"
    "preshared_key=" + "00" * 32 + "\n"
    "protocol_version=1\n"
    "endpoint=192.168.77.2:51820\n"
    "last_handshake_time_sec=1700000000\n"
    "last_handshake_time_nsec=500000000\n"
    "tx_bytes=100\n"
    "rx_bytes=200\n"
    "persistent_keepalive_interval=25\n"
    "allowed_ip=10.80.0.2/32\n"
    "allowed_ip=10.71.0.0/16\n"
    "public_key=" + (bytes([2]) * 32).hex() + "\n"
    "preshared_key=" + "ab" * 32 + "\n"
    "protocol_version=1\n"
    "endpoint=[fd00::2]:51821\n"
    "last_handshake_time_sec=0\n"
    "last_handshake_time_nsec=0\n"
    "tx_bytes=0\n"
    "rx_bytes=0\n"
    "persistent_keepalive_interval=0\n"
    "errno=0\n\n"
)


def test_parse_get():
    dev = parse_uapi_get(GET_TEXT)
    assert dev.private_key == PRIV and dev.listen_port == 51820 and dev.fwmark == 7
    assert list(dev.peers) == [key(1), key(2)]
    p1, p2 = dev.peers[key(1)], dev.peers[key(2)]
    assert (p1.endpoint, p1.allowed_ips, p1.persistent_keepalive) == ("192.168.77.2:51820", ["10.80.0.2/32", "10.71.0.0/16"], 25)
    assert p1.preshared_key is None and p1.last_handshake == 1700000000.5 and (p1.rx_bytes, p1.tx_bytes) == (200, 100)
    assert p2.preshared_key == bytes([0xab]) * 32 and p2.last_handshake is None and p2.endpoint == "[fd00::2]:51821"
    assert p2.allowed_ips == []


def test_parse_get_error_and_garbage():
    with pytest.raises(WireGuardError):
        parse_uapi_get("errno=-22\n\n")
    with pytest.raises(WireGuardError):
        parse_uapi_get("garbage\n\n")


def test_peer_view_reports_age_and_hides_psk():
    dev = parse_uapi_get(GET_TEXT)
    v = peer_view(dev.peers[key(1)], now=1700000010.5)
    assert v["latest_handshake_age"] == 10.0 and v["rx_bytes"] == 200 and v["preshared_key_set"] is False
    v2 = peer_view(dev.peers[key(2)], now=1700000010.5)
    assert v2["latest_handshake_age"] is None and v2["preshared_key_set"] is True
    assert all(("ab" * 32) not in str(x) for x in v2.values())


def spec(peers=(), exclusive=False, listen_port=51820, fwmark=None):
    return InterfaceSpec("lfabt0wg", PRIV, listen_port=listen_port, fwmark=fwmark, peers=list(peers), exclusive=exclusive)


P1 = PeerSpec(key(1), "192.168.77.2:51820", ["10.71.0.0/16", "10.80.0.2/32"], 25, None)


@pytest.mark.parametrize("name, desired, expected", [
    ("identical: nothing to write", spec([P1], listen_port=51820, fwmark=7), ""),
    ("order of allowed IPs does not matter", spec([PeerSpec(key(1), None, ["10.80.0.2/32", "10.71.0.0/16"], 25)]), ""),
    ("endpoint omitted is not managed", spec([PeerSpec(key(1), None, P1.allowed_ips, 25)]), ""),
    ("listen_port/fwmark omitted are not managed", spec([P1], listen_port=None), ""),
    ("keepalive change only",
     spec([PeerSpec(key(1), None, P1.allowed_ips, 0)]),
     "set=1\npublic_key=%s\npersistent_keepalive_interval=0\n\n" % (bytes([1]) * 32).hex()),
    ("allowed IPs replaced as a whole",
     spec([PeerSpec(key(1), None, ["10.80.0.2/32"], 25)]),
     "set=1\npublic_key=%s\nreplace_allowed_ips=true\nallowed_ip=10.80.0.2/32\n\n" % (bytes([1]) * 32).hex()),
    ("preshared key removed -> zeros",
     spec([P1, PeerSpec(key(2), None, [], 0, None)]),
     "set=1\npublic_key=%s\npreshared_key=%s\n\n" % ((bytes([2]) * 32).hex(), "00" * 32)),
    ("exclusive removes unlisted peers",
     spec([P1], exclusive=True),
     "set=1\npublic_key=%s\nremove=true\n\n" % (bytes([2]) * 32).hex()),
    ("fwmark 0 removes the mark", spec([P1], fwmark=0), "set=1\nfwmark=0\n\n"),
    ("new peer gets its whole config",
     spec([P1, PeerSpec(key(3), "10.0.0.1:1", ["10.9.0.0/24"], 5, bytes([9]) * 32)]),
     "set=1\npublic_key=%s\npreshared_key=%s\nendpoint=10.0.0.1:1\npersistent_keepalive_interval=5\n"
     "replace_allowed_ips=true\nallowed_ip=10.9.0.0/24\n\n" % ((bytes([3]) * 32).hex(), "09" * 32)),
])
def test_compute_change_and_render(name, desired, expected):
    current = parse_uapi_get(GET_TEXT)
    assert render_uapi_set(compute_change(desired, current)) == expected, name


def test_new_device_sets_key_port_and_peers_and_removals_come_first():
    text = render_uapi_set(compute_change(spec([P1], listen_port=51820), None))
    assert text.startswith("set=1\nprivate_key=" + PRIV.hex() + "\nlisten_port=51820\npublic_key=")
    ch = compute_change(spec([PeerSpec(key(3), None, ["10.71.0.0/16"], 0)], exclusive=True), parse_uapi_get(GET_TEXT))
    lines = render_uapi_set(ch).splitlines()
    assert lines.index("public_key=" + (bytes([3]) * 32).hex()) > lines.index("remove=true")


def test_private_key_change_is_written_but_never_in_views():
    current = parse_uapi_get(GET_TEXT)
    other = bytes([5]) * 32
    desired = InterfaceSpec("x", other, peers=[P1, PeerSpec(key(2), None, [], 0, bytes([0xab]) * 32)])
    assert render_uapi_set(compute_change(desired, current)) == "set=1\nprivate_key=%s\n\n" % other.hex()
    view = config_view("x", apply_change_to_state(desired, current), None)
    assert other.hex() not in str(view) and base64.b64encode(other).decode() not in str(view)
    assert view["public_key"] == encode_key(public_key_bytes(other))


# ---- property: apply(render(diff(spec, state))) == spec and the second diff is empty

def interpret_set(dev, text):
    """Minimal independent model of a device applying a `set=1` request."""
    lines = text.rstrip("\n").split("\n")
    assert lines[0] == "set=1"
    peer = None
    for line in lines[1:]:
        k, _sep, v = line.partition("=")
        if k == "private_key":
            dev.private_key = bytes.fromhex(v)
        elif k == "listen_port":
            dev.listen_port = int(v)
        elif k == "fwmark":
            dev.fwmark = int(v)
        elif k == "public_key":
            pub = base64.b64encode(bytes.fromhex(v)).decode()
            peer = dev.peers.setdefault(pub, PeerState(pub))
        elif k == "remove":
            del dev.peers[peer.public_key]
            peer = None
        elif k == "preshared_key":
            raw = bytes.fromhex(v)
            peer.preshared_key = None if raw == bytes(32) else raw
        elif k == "endpoint":
            peer.endpoint = v
        elif k == "persistent_keepalive_interval":
            peer.persistent_keepalive = int(v)
        elif k == "replace_allowed_ips":
            peer.allowed_ips = []
        elif k == "allowed_ip":
            for other in dev.peers.values():   # an allowed IP belongs to one peer
                if v in other.allowed_ips:
                    other.allowed_ips.remove(v)
            peer.allowed_ips.append(v)
        else:
            raise AssertionError("unexpected key " + k)
    return dev


cidrs = st.sampled_from(["10.%d.0.0/16" % i for i in range(8)] + ["fd00:%d::/64" % i for i in range(4)])
peer_st = st.builds(
    lambda i, ep, ips, ka, psk: PeerSpec(key(i), ep, sorted(ips, key=_cidr_sort_key), ka, psk),
    st.integers(1, 6), st.sampled_from([None, "192.168.77.2:51820", "[fd00::1]:1"]),
    st.lists(cidrs, max_size=3, unique=True), st.sampled_from([0, 25]),
    st.sampled_from([None, bytes([7]) * 32]))


def unique_peers(peers):
    seen_k, seen_ip, out = set(), set(), []
    for p in peers:
        if p.public_key in seen_k:
            continue
        p.allowed_ips = [a for a in p.allowed_ips if a not in seen_ip]
        seen_ip.update(p.allowed_ips)
        seen_k.add(p.public_key)
        out.append(p)
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(peer_st, max_size=5), st.lists(peer_st, max_size=5), st.booleans(), st.sampled_from([None, 0, 9]))
def test_diff_converges_in_one_apply(before_peers, after_peers, exclusive, fwmark):
    dev = DeviceState()
    interpret_set(dev, render_uapi_set(compute_change(spec(unique_peers(before_peers)), None)))
    desired = spec(unique_peers(after_peers), exclusive=exclusive, fwmark=fwmark)
    predicted = config_view("x", apply_change_to_state(desired, dev), None)   # check mode's prediction
    text = render_uapi_set(compute_change(desired, dev))
    if text:
        interpret_set(dev, text)
    assert render_uapi_set(compute_change(desired, dev)) == ""
    for p in desired.peers:
        got = dev.peers[p.public_key]
        assert sorted(got.allowed_ips) == sorted(p.allowed_ips) and got.persistent_keepalive == p.persistent_keepalive
        assert got.preshared_key == p.preshared_key
    if exclusive:
        assert set(dev.peers) == set(p.public_key for p in desired.peers)
    assert predicted == config_view("x", dev, None)
