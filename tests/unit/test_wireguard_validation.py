"""Validation of wireguard_interface input: every error names its field, secrets are never echoed."""
import base64
import os
import socket
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "build", "collections"))
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.errors import (  # noqa: E402
    ValidationError, WireGuardError)
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.interface import choose_backend  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.keys import (  # noqa: E402
    encode_key, generate_keypair, write_private_key_file)
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.link import LinkState  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.validation import validate_interface  # noqa: E402

PRIV, PUB = generate_keypair()
PEER = generate_keypair()[1]


def params(**kw):
    base = {"name": "lfab00wg0", "private_key": PRIV, "peers": [{"public_key": PEER, "allowed_ips": ["10.0.0.0/24"]}]}
    base.update(kw)
    return base


def fake_resolver(host, port, *a):
    if host == "gw.example":
        return [(socket.AF_INET, socket.SOCK_DGRAM, 0, "", ("192.168.77.2", port))]
    raise socket.gaierror(-2, "Name or service not known")


@pytest.mark.parametrize("overrides, fragment", [
    ({"name": "x" * 16}, "name: 'xxxxxxxxxxxxxxxx' is longer than 15"),
    ({"name": "a/b"}, "name: 'a/b' is not a valid interface name"),
    ({"private_key": None}, "private_key: one of private_key or private_key_file is required"),
    ({"private_key": "short"}, "private_key: is not a WireGuard key"),
    ({"listen_port": 70000}, "listen_port: 70000 is not a port"),
    ({"fwmark": -1}, "fwmark: -1 is not a 32-bit fwmark"),
    ({"mtu": 100}, "mtu: 100 is not an MTU"),
    ({"addresses": ["10.80.0.1"]}, "addresses[0]: '10.80.0.1' needs a prefix length"),
    ({"addresses": ["10.80.0.300/30"]}, "addresses[0]: '10.80.0.300/30' is not a valid address"),
    ({"peers": [{"public_key": "nope"}]}, "peers[0].public_key: 'nope' is not a WireGuard key"),
    ({"peers": [{}]}, "peers[0].public_key: is required"),
    ({"peers": [{"public_key": PEER, "allowed_ips": ["10.0.0.300/24"]}]},
     "peers[0].allowed_ips[0]: '10.0.0.300/24' is not a valid CIDR"),
    ({"peers": [{"public_key": PEER, "allowed_ips": ["10.0.0.0/33"]}]}, "peers[0].allowed_ips[0]: '10.0.0.0/33'"),
    ({"peers": [{"public_key": PEER, "endpoint": "192.168.77.2"}]}, "peers[0].endpoint: '192.168.77.2' is not an endpoint"),
    ({"peers": [{"public_key": PEER, "endpoint": "192.168.77.2:0"}]}, "peers[0].endpoint: '192.168.77.2:0' has no valid port"),
    ({"peers": [{"public_key": PEER, "endpoint": "fd00::1:51820"}]}, "peers[0].endpoint: 'fd00::1:51820' is not an endpoint"),
    ({"peers": [{"public_key": PEER, "endpoint": "[fd00::1]51820"}]}, "peers[0].endpoint"),
    ({"peers": [{"public_key": PEER, "endpoint": "nxdomain.invalid:51820"}]}, "peers[0].endpoint: cannot resolve host"),
    ({"peers": [{"public_key": PEER, "persistent_keepalive": 70000}]}, "peers[0].persistent_keepalive: 70000"),
    ({"peers": [{"public_key": PEER, "preshared_key": "zz"}]}, "peers[0].preshared_key: is not a WireGuard key"),
    ({"peers": [{"public_key": PEER}, {"public_key": PEER}]}, "peers[1].public_key: %r is already used by peers[0]" % PEER),
    ({"peers": [{"public_key": PUB}]}, "peers[0].public_key: %r is the interface's own public key" % PUB),
    ({"peers": [{"public_key": PEER, "allowed_ips": ["10.0.0.0/24"]},
                {"public_key": generate_keypair()[1], "allowed_ips": ["10.0.0.1/24"]}]},
     "peers[1].allowed_ips[0]: '10.0.0.1/24' is already routed to peers[0]"),
])
def test_bad_input_names_the_field(overrides, fragment):
    with pytest.raises(ValidationError) as e:
        validate_interface(params(**overrides), resolver=fake_resolver)
    assert fragment in str(e.value)
    assert PRIV not in str(e.value)


def test_all_errors_are_reported_together():
    with pytest.raises(ValidationError) as e:
        validate_interface(params(listen_port=-1, peers=[{"public_key": PEER, "allowed_ips": ["x"], "endpoint": "y"}]),
                           resolver=fake_resolver)
    msg = str(e.value)
    assert "listen_port" in msg and "peers[0].allowed_ips[0]" in msg and "peers[0].endpoint" in msg


def test_bad_preshared_key_is_not_echoed():
    psk = base64.b64encode(bytes(31)).decode()   # 44 characters, 31 bytes
    with pytest.raises(ValidationError) as e:
        validate_interface(params(peers=[{"public_key": PEER, "preshared_key": psk}]))
    assert psk not in str(e.value)


@pytest.mark.parametrize("endpoint, expected", [
    ("192.168.77.2:51820", "192.168.77.2:51820"),
    ("[fd00::0001]:51820", "[fd00::1]:51820"),
    ("gw.example:4500", "192.168.77.2:4500"),
])
def test_endpoints_are_canonical(endpoint, expected):
    s = validate_interface(params(peers=[{"public_key": PEER, "endpoint": endpoint}]), resolver=fake_resolver)
    assert s.peers[0].endpoint == expected


def test_normalization():
    s = validate_interface(params(addresses=["10.80.0.1/30", "fd00::1/64"], mtu=None, peers=[
        {"public_key": " " + PEER + "\n", "allowed_ips": ["10.71.0.5/16", "10.80.0.2", "fd00::/64"]}]))
    assert s.mtu == 1340 and s.addresses == ["10.80.0.1/30", "fd00::1/64"]
    assert s.peers[0].public_key == PEER
    assert s.peers[0].allowed_ips == ["10.71.0.0/16", "10.80.0.2/32", "fd00::/64"]
    assert s.peers[0].persistent_keepalive == 0 and s.peers[0].endpoint is None


def test_private_key_file_is_used(tmp_path):
    path = tmp_path / "k"
    assert write_private_key_file(str(path), PRIV)
    s = validate_interface(params(private_key=None, private_key_file=str(path)))
    assert encode_key(s.private_key) == PRIV


def test_choose_backend():
    assert choose_backend("x", None, "auto", kernel_available=True).name == "kernel"
    assert choose_backend("x", None, "auto", kernel_available=False).name == "wireguard-go"
    assert choose_backend("x", LinkState(3, "wireguard", 1420, True, []), "wireguard-go").name == "kernel"
    with pytest.raises(WireGuardError, match="not a WireGuard interface"):
        choose_backend("x", LinkState(3, "veth", 1500, True, []), "auto", run_dir="/nonexistent")
    with pytest.raises(ValidationError, match="backend"):
        choose_backend("x", None, "bogus")
