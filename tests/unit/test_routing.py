"""Pure logic of plugins/module_utils/route/policy.py: validation, diff, message encoding/decoding."""
import os
import socket
import struct
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "build", "collections"))
from ansible_collections.liqo.fabric.plugins.module_utils.route.netlink import (  # noqa: E402  pylint: disable=wrong-import-position
    IFLA_IFNAME, RTM_GETLINK, RTM_GETROUTE, _U32, _attr, read_links)
from ansible_collections.liqo.fabric.plugins.module_utils.route.policy import (  # noqa: E402  pylint: disable=wrong-import-position
    RTA_METRICS, Route, Rule, SCOPES, ValidationError, _route_msg, _rule_msg, normalize_routes, normalize_rules,
    plan_routes, plan_rules, read_routes, read_rules, route_line, validate_table)

V4, V6 = socket.AF_INET, socket.AF_INET6


@pytest.mark.parametrize("spec, message", [
    ({"dst": "10.0.0.300/24", "dev": "eth0"}, "routes[0].dst: '10.0.0.300/24' is not a valid CIDR"),
    ({"dst": "10.0.0.1/24", "dev": "eth0"}, "routes[0].dst: '10.0.0.1/24' has host bits set"),
    ({"dev": "eth0"}, "routes[0].dst: is required"),
    ({"dst": "10.0.0.0/24"}, "routes[0]: a unicast route needs via or dev"),
    ({"dst": "10.0.0.0/24", "via": "10.0.0.256"}, "routes[0].via: '10.0.0.256' is not a valid IP address"),
    ({"dst": "10.0.0.0/24", "via": "fd00::1"}, "routes[0].via: 'fd00::1' is not an ipv4 address"),
    ({"dst": "10.0.0.0/24", "dev": "a/b"}, "routes[0].dev: 'a/b' is not a valid interface name"),
    ({"dst": "10.0.0.0/24", "dev": "x" * 16}, "is not a valid interface name"),
    ({"dst": "10.0.0.0/24", "dev": "eth0", "scope": "galaxy"}, "routes[0].scope: 'galaxy' is not one of"),
    ({"dst": "10.0.0.0/24", "dev": "eth0", "metric": -1}, "routes[0].metric: -1 is out of range"),
    ({"dst": "10.0.0.0/24", "dev": "eth0", "type": "local"}, "routes[0].type: 'local' is not one of"),
    ({"dst": "10.0.0.0/24", "dev": "eth0", "type": "blackhole"}, "routes[0].type: a blackhole route takes no via"),
    ({"dst": "10.0.0.0/24", "via": "10.1.1.1", "onlink": True}, "routes[0].onlink: needs both via and dev"),
    ({"dst": "10.0.0.0/24", "dev": "eth0", "colour": "red"}, "routes[0]: unknown key(s) colour"),
    ({"dst": "10.0.0.0/24", "via": "10.1.1.1", "src": "fd00::1"}, "routes[0].src: 'fd00::1' is not an ipv4 address"),
])
def test_route_validation_names_field_and_value(spec, message):
    with pytest.raises(ValidationError) as e:
        normalize_routes([spec])
    assert message in str(e.value)


def test_route_validation_reports_index_and_duplicates():
    ok = {"dst": "10.0.0.0/24", "dev": "eth0"}
    with pytest.raises(ValidationError, match=r"routes\[2\]\.dst: '10.0.0.0/24' with metric 0 is listed twice"):
        normalize_routes([ok, {"dst": "10.1.0.0/24", "dev": "eth0"}, dict(ok, via="10.0.0.1")])
    # same dst, different metric: two distinct routes
    assert len(normalize_routes([ok, dict(ok, metric=5)])[V4]) == 2


@pytest.mark.parametrize("table, message", [
    (254, "table: 254 is the kernel's 'main' table"),
    (255, "'local' table"),
    (253, "'default' table"),
    (0, "'unspec' table"),
    (2 ** 32, "table: 4294967296 is out of range"),
    (-3, "table: -3 is out of range"),
    ("abc", "table: 'abc' is not an integer"),
])
def test_table_validation(table, message):
    with pytest.raises(ValidationError) as e:
        validate_table(table)
    assert message in str(e.value)
    assert validate_table(18952) == 18952


@pytest.mark.parametrize("spec, expected", [
    ({"dst": "10.1.0.0/16", "dev": "eth0"},
     Route(V4, "10.1.0.0/16", None, "eth0", None, False, SCOPES["link"], 0, 1)),
    ({"dst": "default", "via": "192.168.1.1"},
     Route(V4, "0.0.0.0/0", "192.168.1.1", None, None, False, 0, 0, 1)),
    ({"dst": "10.2.0.0/16", "gateway": "10.0.0.1", "dev": "eth0", "onlink": True, "metric": 7, "src": "10.0.0.2"},
     Route(V4, "10.2.0.0/16", "10.0.0.1", "eth0", "10.0.0.2", True, 0, 7, 1)),
    ({"dst": "10.3.0.0/16", "type": "unreachable"},
     Route(V4, "10.3.0.0/16", None, None, None, False, 0, 0, 7)),
    ({"dst": "FD00:0:0::/64", "via": "fd00::0001"},  # canonical spelling, IPv6 default metric
     Route(V6, "fd00::/64", "fd00::1", None, None, False, 0, 1024, 1)),
    ({"dst": "fd00:1::/64", "dev": "eth0", "scope": "link"},  # IPv6 routes have no scope
     Route(V6, "fd00:1::/64", None, "eth0", None, False, 0, 1024, 1)),
    ({"dst": "default", "via": "fe80::1", "dev": "eth0"},
     Route(V6, "::/0", "fe80::1", "eth0", None, False, 0, 1024, 1)),
])
def test_route_normalization(spec, expected):
    got = normalize_routes([spec])
    assert list(got[expected.family].values()) == [expected]


def r4(dst, **kw):
    base = dict(family=V4, dst=dst, gateway=None, dev="eth0", src=None, onlink=False, scope=253, metric=0, type=1)
    base.update(kw)
    return Route(**base)


def keyed(*routes):
    out = {V4: {}, V6: {}}
    for r in routes:
        out[r.family][r.key] = r
    return out


@pytest.mark.parametrize("desired, current, add, replace, delete", [
    ([], [], [], [], []),
    ([r4("10.0.0.0/8")], [], ["10.0.0.0/8"], [], []),
    ([], [r4("10.0.0.0/8")], [], [], ["10.0.0.0/8"]),
    ([r4("10.0.0.0/8")], [r4("10.0.0.0/8")], [], [], []),
    ([r4("10.0.0.0/8", dev="eth1")], [r4("10.0.0.0/8")], [], ["10.0.0.0/8"], []),
    ([r4("10.0.0.0/8", gateway="1.1.1.1", scope=0)], [r4("10.0.0.0/8")], [], ["10.0.0.0/8"], []),
    ([r4("10.0.0.0/8")], [r4("10.0.0.0/8", extra="attr8")], [], ["10.0.0.0/8"], []),  # kernel-side metrics
    # via without dev: the kernel picks the device, any is fine; with dev given, it must match
    ([r4("10.0.0.0/8", dev=None, gateway="1.1.1.1", scope=0)], [r4("10.0.0.0/8", gateway="1.1.1.1", scope=0)], [], [], []),
    ([r4("10.0.0.0/8", dev="eth1", gateway="1.1.1.1", scope=0)], [r4("10.0.0.0/8", gateway="1.1.1.1", scope=0)],
     [], ["10.0.0.0/8"], []),
    ([r4("10.0.0.0/8", metric=5)], [r4("10.0.0.0/8")], ["10.0.0.0/8"], [], ["10.0.0.0/8"]),  # metric is identity
    ([r4("10.0.0.0/8")], [r4("10.0.0.0/8", tos=8)], ["10.0.0.0/8"], [], ["10.0.0.0/8"]),
])
def test_plan_routes(desired, current, add, replace, delete):
    plan = plan_routes(keyed(*desired), keyed(*current))
    assert [r.dst for r in plan.add] == add
    assert [new.dst for _old, new in plan.replace] == replace
    assert [r.dst for r in plan.delete] == delete
    assert plan.changed == bool(add or replace or delete)


@given(st.sets(st.integers(0, 2 ** 16 - 1), max_size=40), st.sets(st.integers(0, 2 ** 16 - 1), max_size=40))
def test_plan_routes_reaches_desired(want_ids, have_ids):
    """Applying the plan to `current` yields exactly `desired`, and re-planning yields nothing."""
    def mk(i, dev):
        return r4(f"10.{i >> 8}.{i & 255}.0/24", dev=dev)
    desired = keyed(*(mk(i, "eth0") for i in want_ids))
    current = keyed(*(mk(i, "eth1" if i % 3 else "eth0") for i in have_ids))
    plan = plan_routes(desired, current)
    state = {f: dict(v) for f, v in current.items()}
    for r in plan.delete:
        del state[r.family][r.key]
    for _old, r in plan.replace:
        state[r.family][r.key] = r
    for r in plan.add:
        assert r.key not in state[r.family]
        state[r.family][r.key] = r
    assert state == desired
    assert not plan_routes(desired, state).changed


def test_route_line():
    r = normalize_routes([{"dst": "10.1.0.0/16", "via": "10.80.0.1", "dev": "ov0", "onlink": True}])[V4]
    assert route_line(next(iter(r.values()))) == "10.1.0.0/16 via 10.80.0.1 dev ov0 metric 0 onlink"
    r = normalize_routes([{"dst": "default", "type": "blackhole", "metric": 9}])[V4]
    assert route_line(next(iter(r.values())), table=18952) == "blackhole default table 18952 metric 9"


@pytest.mark.parametrize("spec, message", [
    ({"to": "10.0.0.0/8"}, "rules[0].priority: is required"),
    ({"priority": 0}, "rules[0].priority: 0 is out of range (1..32765)"),
    ({"priority": 32766}, "rules[0].priority: 32766 is out of range"),
    ({"priority": 5, "from": "10.0.0.0/33"}, "rules[0].from: '10.0.0.0/33' is not a valid CIDR"),
    ({"priority": 5, "to": "bogus"}, "rules[0].to: 'bogus' is not a valid CIDR"),
    ({"priority": 5, "from": "10.0.0.0/8", "to": "fd00::/8"}, "rules[0].to: 'fd00::/8' is not an ipv4 network"),
    ({"priority": 5, "table": 254}, "rules[0].table: 254 is the kernel's 'main' table"),
    ({"priority": 5, "table": 100}, "rules[0].table: 100 is not one of the owned tables [18952]"),
    ({"priority": 5, "fwmark": "0xzz"}, "rules[0].fwmark: '0xzz' is not an integer"),
    ({"priority": 5, "fwmask": 255}, "rules[0].fwmask: needs fwmark"),
    ({"priority": 5, "iif": "a b"}, "rules[0].iif: 'a b' is not a valid interface name"),
    ({"priority": 5, "family": "ipx"}, "rules[0].family: 'ipx' is not one of ipv4, ipv6"),
    ({"priority": 5, "lookup": 5}, "rules[0]: unknown key(s) lookup"),
])
def test_rule_validation_names_field_and_value(spec, message):
    with pytest.raises(ValidationError) as e:
        normalize_rules([spec], [18952])
    assert message in str(e.value)


@pytest.mark.parametrize("spec, expected", [
    ({"priority": 10}, Rule(V4, 10, None, None, None, None, None, None, 18952)),
    ({"priority": 10, "from": "all", "to": "0.0.0.0/0"}, Rule(V4, 10, None, None, None, None, None, None, 18952)),
    ({"priority": 10, "from": "10.0.0.0/8", "fwmark": "0x10/0xff"},
     Rule(V4, 10, "10.0.0.0/8", None, None, None, 16, 255, 18952)),
    ({"priority": 10, "fwmark": 3}, Rule(V4, 10, None, None, None, None, 3, 0xFFFFFFFF, 18952)),
    ({"priority": 10, "fwmark": "7", "fwmask": 15}, Rule(V4, 10, None, None, None, None, 7, 15, 18952)),
    ({"priority": 10, "to": "fd00::/64", "iif": "eth0", "oif": "ov0"},
     Rule(V6, 10, None, "fd00::/64", "eth0", "ov0", None, None, 18952)),
    ({"priority": 10, "family": "ipv6"}, Rule(V6, 10, None, None, None, None, None, None, 18952)),
])
def test_rule_normalization(spec, expected):
    got = normalize_rules([spec], [18952])
    assert list(got[expected.family]) == [expected]


def test_rule_duplicates_and_plan():
    a = {"priority": 10, "to": "10.1.0.0/16"}
    with pytest.raises(ValidationError, match=r"rules\[1\]: the same rule is listed twice"):
        normalize_rules([a, a], [18952])
    want = normalize_rules([a, {"priority": 11, "fwmark": 1}], [18952])
    have = normalize_rules([a, {"priority": 12, "fwmark": 1}], [18952])
    plan = plan_rules(want, have)
    assert [r.priority for r in plan.add] == [11]
    assert [r.priority for r in plan.delete] == [12]
    assert not plan_rules(want, want).changed


class FakeSock:
    """Answers dumps with payloads built by the module's own writers: encode/decode round trip."""

    def __init__(self, routes=(), rules=(), links=None):
        self.routes, self.rules, self.links = list(routes), list(rules), links or {}

    def dump(self, msg_type, body, attrs=b""):
        if msg_type == RTM_GETLINK:
            return [struct.pack("=BxHiII", 0, 0, i, 0, 0) + _attr(IFLA_IFNAME, n.encode() + b"\0")
                    for i, n in self.links.items()]
        if msg_type == RTM_GETROUTE:
            return self.routes
        fam = body[0]
        return [p for p in self.rules if p[0] == fam]


def test_route_encoding_round_trip():
    specs = [{"dst": "10.1.0.0/16", "via": "10.80.0.1", "dev": "ov0", "onlink": True, "metric": 3, "src": "10.80.0.2"},
             {"dst": "default", "dev": "ov0"}, {"dst": "10.9.0.0/16", "type": "prohibit"},
             {"dst": "fd00:1::/64", "via": "fd00::1", "dev": "ov0"}]
    desired = normalize_routes(specs)
    ifindex = {"ov0": 7}
    payloads = [_route_msg(r, 18952, ifindex) for fam in desired.values() for r in fam.values()]
    # A route of another table in the reply (no strict check on old kernels) is ignored.
    other = _route_msg(next(iter(desired[V4].values())), 100, ifindex)
    got = read_routes(FakeSock(routes=payloads + [other]), 18952, {7: "ov0"})
    assert got == desired


def test_route_decoding_marks_unmodeled_attributes():
    r = next(iter(normalize_routes([{"dst": "10.1.0.0/16", "dev": "ov0"}])[V4].values()))
    payload = _route_msg(r, 18952, {"ov0": 7}) + _attr(RTA_METRICS, _attr(2, _U32.pack(1400)))
    got = next(iter(read_routes(FakeSock(routes=[payload]), 18952, {7: "ov0"})[V4].values()))
    assert got.extra and got != r


def test_rule_encoding_round_trip_and_ownership():
    specs = [{"priority": 100, "from": "10.0.0.0/8", "fwmark": "0x10/0xff"}, {"priority": 101, "to": "10.1.0.0/16", "iif": "eth0"},
             {"priority": 102, "oif": "ov0", "family": "ipv6"}, {"priority": 103, "from": "fd00::/64", "table": 7}]
    desired = normalize_rules(specs, [18952, 7])
    payloads = [_rule_msg(r) for fam in desired.values() for r in fam]
    foreign = _rule_msg(Rule(V4, 32766, None, None, None, None, None, None, 254))
    other = _rule_msg(Rule(V4, 50, None, None, None, None, None, None, 300))
    got = read_rules(FakeSock(rules=payloads + [foreign, other]), [18952, 7])
    assert {f: set(v) for f, v in got.items()} == {f: set(v) for f, v in desired.items()}


def test_read_links():
    assert read_links(FakeSock(links={1: "lo", 5: "eth0"})) == {1: "lo", 5: "eth0"}
