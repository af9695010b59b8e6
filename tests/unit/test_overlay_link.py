"""Pure logic of plugins/module_utils/overlay/link.py: validation and the action plan."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "build", "collections"))
from ansible_collections.liqo.fabric.plugins.module_utils.overlay import link as O  # noqa: E402  pylint: disable=wrong-import-position

BASE = {"name": "ov0", "type": "vxlan", "vni": 100, "remotes": ["192.168.77.2"], "local": "192.168.77.1",
        "addresses": ["10.80.0.1/24"], "mtu": 1340, "dev": "eth0"}


@pytest.mark.parametrize("change, message", [
    ({"name": ""}, "name: '' is not a valid interface name"),
    ({"name": "a-very-long-name0"}, "name: 'a-very-long-name0' is not a valid interface name"),
    ({"type": "gre"}, "type: 'gre' is not one of geneve, vxlan, auto"),
    ({"vni": 0}, "vni: 0 is out of range (1..16777215)"),
    ({"vni": 2 ** 24}, "vni: 16777216 is out of range"),
    ({"vni": None}, "vni: None is out of range"),
    ({"remotes": ["192.168.77.300"]}, "remotes[0]: '192.168.77.300' is not a valid IP address"),
    ({"remotes": ["10.0.0.1", "10.0.0.1"]}, "remotes: ['10.0.0.1', '10.0.0.1'] lists an address twice"),
    ({"remotes": ["fd00::2"]}, "remotes/local: mixes IPv4 and IPv6"),
    ({"local": "nope"}, "local: 'nope' is not a valid IP address"),
    ({"dst_port": 70000}, "dst_port: 70000 is out of range (1..65535)"),
    ({"mtu": 20}, "mtu: 20 is out of range (68..65535)"),
    ({"addresses": ["10.80.0.1"]}, "addresses[0]: '10.80.0.1' needs a prefix length"),
    ({"addresses": ["10.80.0.x/24"]}, "addresses[0]: '10.80.0.x/24' is not a valid address/prefix"),
    ({"dev": "e th0"}, "dev: 'e th0' is not a valid interface name"),
    ({"type": "geneve", "remotes": ["10.0.0.1", "10.0.0.2"]}, "remotes: a geneve link has exactly one remote"),
    ({"type": "geneve", "remotes": []}, "remotes: a geneve link has exactly one remote"),
])
def test_validation_names_field_and_value(change, message):
    with pytest.raises(O.ValidationError) as e:
        O.normalize(dict(BASE, **change))
    assert message in str(e.value)


def test_normalize_canonicalizes():
    want = O.normalize(dict(BASE, addresses=["10.80.0.9/24", "fd00::0001/64"], remotes=["192.168.77.2"]))
    assert want.addresses == ("10.80.0.9/24", "fd00::1/64")
    assert want.dst_port is None  # filled in by the type
    assert O.normalize(dict(BASE, type="auto", remotes=[])).remotes == ()  # auto may still become vxlan


def resolved(**change):
    want = O.normalize(dict(BASE, **change))
    return want._replace(dst_port=want.dst_port or O.DEFAULT_PORT[want.type])


def current_of(want, **change):
    state = O.desired_state(want)
    state.update(change)
    return state


@pytest.mark.parametrize("change, current_change, expected", [
    ({}, None, [("create",), ("addr_add", "10.80.0.1/24"), ("fdb_add", "192.168.77.2"), ("up",)]),
    ({}, {}, []),
    ({}, {"mtu": 1500}, [("mtu", 1340)]),
    ({"mtu": None}, {"mtu": 1500}, []),  # MTU not managed
    ({}, {"up": False}, [("up",)]),
    ({}, {"addresses": ["10.80.0.1/24", "10.80.0.7/24"]}, [("addr_del", "10.80.0.7/24")]),
    ({}, {"fdb": ["192.168.77.2", "192.168.77.9"]}, [("fdb_del", "192.168.77.9")]),
    ({"remotes": ["192.168.77.3"]}, {}, "fdb"),
    ({}, {"vni": 101}, "recreate"),
    ({}, {"dst_port": 8472}, "recreate"),
    ({}, {"local": "192.168.77.5"}, "recreate"),
    ({}, {"dev": "eth1"}, "recreate"),
    ({}, {"learning": True}, "recreate"),
    ({}, {"kind": "geneve"}, "recreate"),
])
def test_plan_vxlan(change, current_change, expected):
    want = resolved(**change)
    current = None if current_change is None else current_of(resolved(), **current_change)
    if current is not None:
        current["mtu"] = current["mtu"] or 1500
    actions = O.plan(want, current)
    if expected == "recreate":
        assert actions[:2] == [("delete",), ("create",)]
        assert ("up",) in actions and ("fdb_add", "192.168.77.2") in actions
    elif expected == "fdb":
        assert actions == [("fdb_del", "192.168.77.2"), ("fdb_add", "192.168.77.3")]
    else:
        assert actions == expected


def test_plan_geneve_and_absent():
    want = resolved(type="geneve")
    state = O.desired_state(want)
    assert state["kind"] == "geneve" and state["remote"] == "192.168.77.2" and state["fdb"] == []
    assert state["dst_port"] == 6081 and state["local"] is None and state["dev"] is None
    assert O.plan(want, state) == []
    assert O.plan(want, dict(state, remote="192.168.77.9"))[:2] == [("delete",), ("create",)]
    assert O.plan(want, state, "absent") == [("delete",)]
    assert O.plan(want, None, "absent") == []


def test_describe():
    assert O.describe([("create",), ("fdb_add", "10.0.0.2")], "ov0") == [
        "ov0: create link", "ov0: add fdb 00:00:00:00:00:00 dst 10.0.0.2"]
