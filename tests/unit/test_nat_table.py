"""Pure logic of liqo.fabric.nat_table: validation, rendering, canonicalisation of the kernel's JSON."""
import json
import os
import sys

import pytest
from hypothesis import given, settings, strategies as st

_COLLECTIONS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "build", "collections")
if _COLLECTIONS not in sys.path:  # `make collection` links the checkout there
    sys.path.insert(0, _COLLECTIONS)

from ansible_collections.liqo.fabric.plugins.module_utils import nat_table as nt  # noqa: E402


def rules_text(table):
    return {c.name: [nt.render_rule(r).replace("\n", " ").replace("\t", "") for r in c.rules] for c in table.chains}


# ------------------------------------------------------------------------------------------- rendering
RENDER_CASES = [
    ("single remap with interfaces",
     {"remaps": [{"original": "10.243.0.0/16", "remapped": "10.71.0.0/16", "iifname": "wg0", "oifname": "wg0"}]},
     {"prerouting": ['iifname "wg0" ip daddr 10.71.0.0/16 dnat ip prefix to 10.243.0.0/16'],
      "postrouting": ['oifname "wg0" ip saddr 10.243.0.0/16 snat ip prefix to 10.71.0.0/16']}),
    ("remap, destination only, no interface",
     {"remaps": [{"original": "10.243.0.0/16", "remapped": "10.71.0.0/16", "translate": "destination"}]},
     {"prerouting": ["ip daddr 10.71.0.0/16 dnat ip prefix to 10.243.0.0/16"]}),
    ("remap, source only",
     {"remaps": [{"original": "10.243.0.0/16", "remapped": "10.71.0.0/16", "translate": "source", "iifname": "x"}]},
     {"postrouting": ["ip saddr 10.243.0.0/16 snat ip prefix to 10.71.0.0/16"]}),
    ("two remaps on one interface become one map rule, sorted by key",
     {"remaps": [{"original": "10.9.0.0/24", "remapped": "10.72.0.0/24", "translate": "destination", "iifname": "wg0"},
                 {"original": "10.8.0.0/24", "remapped": "10.71.0.0/24", "translate": "destination", "iifname": "wg0"}]},
     {"prerouting": ['iifname "wg0" dnat ip prefix to ip daddr map { 10.71.0.0/24 : 10.8.0.0/24, 10.72.0.0/24 : 10.9.0.0/24 }']}),
    ("remaps on different interfaces stay separate",
     {"remaps": [{"original": "10.243.0.0/16", "remapped": "10.71.0.0/16", "translate": "source", "oifname": "wgb"},
                 {"original": "10.243.0.0/16", "remapped": "10.81.0.0/16", "translate": "source", "oifname": "wgc"}]},
     {"postrouting": ['oifname "wgb" ip saddr 10.243.0.0/16 snat ip prefix to 10.71.0.0/16',
                      'oifname "wgc" ip saddr 10.243.0.0/16 snat ip prefix to 10.81.0.0/16']}),
    ("single-address dnat and snat",
     {"dnat": [{"daddr": "10.70.0.5", "to": "10.243.0.9", "saddr": "10.1.0.0/16", "iifname": "wg0"}],
      "snat": [{"saddr": "10.243.0.9", "to": "10.70.0.5", "oifname": "wg0", "daddr": "10.72.0.0/16"}]},
     {"prerouting": ['iifname "wg0" ip saddr 10.1.0.0/16 ip daddr 10.70.0.5 dnat ip to 10.243.0.9'],
      "postrouting": ['oifname "wg0" ip saddr 10.243.0.9 ip daddr 10.72.0.0/16 snat ip to 10.70.0.5']}),
    ("bypass is an identity prefix snat, after remaps",
     {"bypass": [{"saddr": "10.243.0.0/16", "daddr": "10.72.0.0/16", "oifname": "eth0"}],
      "remaps": [{"original": "10.244.0.0/16", "remapped": "10.73.0.0/16", "translate": "source"}]},
     {"postrouting": ["ip saddr 10.244.0.0/16 snat ip prefix to 10.73.0.0/16",
                      'oifname "eth0" ip saddr 10.243.0.0/16 ip daddr 10.72.0.0/16 snat ip prefix to 10.243.0.0/16']}),
    ("mss clamp to route mtu and fixed size",
     {"mss": [{"oifname": "wg0"}, {"iifname": "wg0", "size": 1300}]},
     {"forward": ['oifname "wg0" tcp flags syn tcp option maxseg size set rt mtu',
                  'iifname "wg0" tcp flags syn tcp option maxseg size set 1300']}),
    ("ipv6 in an inet table",
     {"family": "inet", "remaps": [{"original": "fd00:1::/64", "remapped": "fd00:2::/64"}]},
     {"prerouting": ["ip6 daddr fd00:2::/64 dnat ip6 prefix to fd00:1::/64"],
      "postrouting": ["ip6 saddr fd00:1::/64 snat ip6 prefix to fd00:2::/64"]}),
    ("host /32 remap keeps an explicit prefix on the target",
     {"remaps": [{"original": "10.245.0.7/32", "remapped": "10.75.0.7/32", "translate": "destination"}]},
     {"prerouting": ["ip daddr 10.75.0.7 dnat ip prefix to 10.245.0.7/32"]}),
    ("nothing at all: a table without chains", {}, {}),
]


@pytest.mark.parametrize("spec,expected", [c[1:] for c in RENDER_CASES], ids=[c[0] for c in RENDER_CASES])
def test_rendering(spec, expected):
    assert rules_text(nt.build_table(spec)) == expected


def test_chain_headers_and_priorities():
    t = nt.build_table({"remaps": [{"original": "10.243.0.0/16", "remapped": "10.71.0.0/16"}], "mss": [{"oifname": "wg0"}]})
    text = nt.render(t)
    assert "type nat hook prerouting priority dstnat - 10; policy accept;" in text
    assert "type nat hook postrouting priority srcnat - 10; policy accept;" in text
    assert "type filter hook forward priority mangle; policy accept;" in text
    assert [c.priority for c in t.chains] == [-110, 90, -150]


def test_replace_buffer_names_only_its_table():
    t = nt.build_table({"name": "mine", "family": "inet", "remaps": [{"original": "10.243.0.0/16", "remapped": "10.71.0.0/16"}]})
    buf = nt.replace_commands(t)
    assert buf.startswith("add table inet mine\ndelete table inet mine\ntable inet mine {\n")
    heads = [line for line in buf.splitlines() if line.startswith(("add", "delete", "flush", "table"))]
    assert all(" mine" in line for line in heads)
    assert nt.delete_commands("inet", "mine") == "delete table inet mine\n"


def test_input_order_of_map_entries_does_not_matter():
    entries = [{"original": f"10.{i}.0.0/16", "remapped": f"10.{100 + i}.0.0/16", "iifname": "wg0"} for i in range(5)]
    assert nt.build_table({"remaps": entries}) == nt.build_table({"remaps": list(reversed(entries))})


# ------------------------------------------------------------------------------------------- validation
VALIDATION_CASES = [
    ({"remaps": [{"original": "10.243.0.300/16", "remapped": "10.71.0.0/16"}]},
     "remaps[0].original: '10.243.0.300/16' is not a valid CIDR"),
    ({"remaps": [{"original": "10.243.0.0/16", "remapped": "10.71.0.0/33"}]},
     "remaps[0].remapped: '10.71.0.0/33' is not a valid CIDR"),
    ({"remaps": [{"original": "10.243.0.5/16", "remapped": "10.71.0.0/16"}]},
     "remaps[0].original: '10.243.0.5/16' has host bits set (the network is 10.243.0.0/16)"),
    ({"remaps": [{"original": "10.243.0.0/16", "remapped": "10.71.0.0/24"}]},
     "remaps[0].remapped: prefix length /24 of '10.71.0.0/24' differs from /16 of original '10.243.0.0/16'"),
    ({"remaps": [{"original": "10.243.0.0/16", "remapped": None}]}, "remaps[0].remapped: is required"),
    ({"remaps": [{"original": "10.243.0.0/16", "remapped": "10.71.0.0/16", "iifname": "wg 0"}]},
     "remaps[0].iifname: 'wg 0' is not a valid interface name"),
    ({"remaps": [{"original": "10.243.0.0/16", "remapped": "10.71.0.0/16", "oifname": "a-very-long-name0"}]},
     "remaps[0].oifname: 'a-very-long-name0' is not a valid interface name (1-15 characters"),
    ({"remaps": [{"original": "10.243.0.0/16", "remapped": "10.71.0.0/16", "oifname": "eth0;drop"}]},
     "remaps[0].oifname: 'eth0;drop' is not a valid interface name"),
    ({"remaps": [{"original": "10.243.0.0/16", "remapped": "10.71.0.0/16", "translate": "sideways"}]},
     "remaps[0].translate: 'sideways' is not one of both, source, destination"),
    ({"remaps": [{"original": "fd00::/64", "remapped": "fd01::/64"}]},
     "remaps[0].original: 'fd00::/64' is IPv6, which needs family inet"),
    ({"family": "inet", "remaps": [{"original": "fd00::/64", "remapped": "10.71.0.0/16"}]},
     "remaps[0]: mixes IPv4 and IPv6"),
    ({"remaps": [{"original": "10.1.0.0/16", "remapped": "10.71.0.0/16"},
                 {"original": "10.2.0.0/24", "remapped": "10.71.5.0/24"}]},
     "remaps[1].remapped: remapped CIDR '10.71.5.0/24' overlaps '10.71.0.0/16' of remaps[0].remapped"),
    ({"remaps": [{"original": "10.1.0.0/16", "remapped": "10.71.0.0/16", "oifname": "wg0"},
                 {"original": "10.1.0.0/16", "remapped": "10.72.0.0/16", "oifname": "wg0"}]},
     "remaps[1].original: original CIDR '10.1.0.0/16' overlaps '10.1.0.0/16' of remaps[0].original"),
    ({"dnat": [{"daddr": "10.70.0.5/32", "to": "10.243.0.9"}]}, "dnat[0].daddr: '10.70.0.5/32' is not a valid IP address"),
    ({"dnat": [{"daddr": "10.70.0.5", "to": "nowhere"}]}, "dnat[0].to: 'nowhere' is not a valid IP address"),
    ({"snat": [{"saddr": "10.243.0.0/16", "to": "10.70.0.5", "oifname": ""}]}, "snat[0].oifname: '' is not a valid interface name"),
    ({"bypass": [{"daddr": "10.72.0.0/16"}]}, "bypass[0].saddr: is required"),
    ({"mss": [{"size": 1300}]}, "mss[0]: needs oifname (the tunnel interface) or iifname"),
    ({"mss": [{"oifname": "wg0", "size": 100}]}, "mss[0].size: 100 is outside 536-65495"),
    ({"family": "bridge"}, "family: 'bridge' is not one of ip, inet"),
    ({"name": "bad name"}, "name: 'bad name' is not a valid table name"),
    ({"remaps": "10.0.0.0/8"}, "remaps: must be a list, got str"),
    ({"remap": []}, "remap: unknown field"),
]


@pytest.mark.parametrize("spec,message", VALIDATION_CASES, ids=[c[1][:60] for c in VALIDATION_CASES])
def test_validation_messages_name_field_and_value(spec, message):
    with pytest.raises(nt.NatTableError) as exc:
        nt.build_table(spec)
    assert any(e.startswith(message) for e in exc.value.errors), exc.value.errors


def test_every_error_is_reported_at_once():
    with pytest.raises(nt.NatTableError) as exc:
        nt.build_table({"remaps": [{"original": "x", "remapped": "10.71.0.0/16"}],
                        "dnat": [{"daddr": "y", "to": "10.0.0.1"}], "mss": [{"oifname": "way-too-long-name"}]})
    fields = [e.split(":")[0] for e in exc.value.errors]
    assert fields == ["dnat[0].daddr", "remaps[0].original", "mss[0].oifname"]


def test_wildcard_interface_names_are_accepted():
    t = nt.build_table({"mss": [{"oifname": "liqo*"}]})
    assert rules_text(t) == {"forward": ['oifname "liqo*" tcp flags syn tcp option maxseg size set rt mtu']}


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["original", "remapped", "translate", "iifname", "oifname"]),
                       st.one_of(st.none(), st.text(max_size=20), st.integers())))
def test_arbitrary_input_is_either_a_table_or_a_validation_error(entry):
    try:
        nt.build_table({"remaps": [entry]})
    except nt.NatTableError as e:
        assert all(msg.startswith("remaps[0]") for msg in e.errors)


# ------------------------------------------------------------------------------------------- kernel JSON
# `nft -j list table inet liqo_fabric_nat` from nftables 1.0.6 after applying INET_SPEC.
INET_SPEC = {
    "family": "inet", "name": "liqo_fabric_nat",
    "remaps": [{"original": "10.243.0.0/16", "remapped": "10.71.0.0/16", "iifname": "wg0", "oifname": "wg0"},
               {"original": "10.244.0.0/16", "remapped": "10.73.0.0/16", "translate": "destination"},
               {"original": "10.245.0.7/32", "remapped": "10.75.0.7/32", "translate": "destination"},
               {"original": "fd00:1::/64", "remapped": "fd00:2::/64", "translate": "source"}],
    "dnat": [{"daddr": "10.70.0.5", "to": "10.243.0.9", "saddr": "10.1.0.0/16", "iifname": "wg0"}],
    "snat": [{"saddr": "10.243.0.9", "to": "10.70.0.5", "oifname": "wg0"}],
    "bypass": [{"saddr": "10.243.0.0/16", "daddr": "10.72.0.0/16", "oifname": "eth0"}],
    "mss": [{"oifname": "wg0"}, {"iifname": "wg0", "size": 1300}],
}
INET_JSON = (
    '{"nftables":[{"metainfo":{"version":"1.0.6","release_name":"Lester Gooch #5","json_schema_version":1}},{"table'
    '":{"family":"inet","name":"liqo_fabric_nat","handle":10}},{"chain":{"family":"inet","table":"liqo_fabric_nat",'
    '"name":"prerouting","handle":1,"type":"nat","hook":"prerouting","prio":-110,"policy":"accept"}},{"chain":{"fam'
    'ily":"inet","table":"liqo_fabric_nat","name":"postrouting","handle":2,"type":"nat","hook":"postrouting","prio"'
    ':90,"policy":"accept"}},{"chain":{"family":"inet","table":"liqo_fabric_nat","name":"forward","handle":3,"type"'
    ':"filter","hook":"forward","prio":-150,"policy":"accept"}},{"rule":{"family":"inet","table":"liqo_fabric_nat",'
    '"chain":"prerouting","handle":4,"expr":[{"match":{"op":"==","left":{"meta":{"key":"iifname"}},"right":"wg0"}},'
    '{"match":{"op":"==","left":{"payload":{"protocol":"ip","field":"saddr"}},"right":{"prefix":{"addr":"10.1.0.0",'
    '"len":16}}}},{"match":{"op":"==","left":{"payload":{"protocol":"ip","field":"daddr"}},"right":"10.70.0.5"}},{"'
    'dnat":{"family":"ip","addr":"10.243.0.9"}}]}},{"rule":{"family":"inet","table":"liqo_fabric_nat","chain":"prer'
    'outing","handle":5,"expr":[{"match":{"op":"==","left":{"meta":{"key":"iifname"}},"right":"wg0"}},{"match":{"op'
    '":"==","left":{"payload":{"protocol":"ip","field":"daddr"}},"right":{"prefix":{"addr":"10.71.0.0","len":16}}}}'
    ',{"dnat":{"family":"ip","addr":{"prefix":{"addr":"10.243.0.0","len":16}},"flags":"netmap","type_flags":"prefix'
    '"}}]}},{"rule":{"family":"inet","table":"liqo_fabric_nat","chain":"prerouting","handle":7,"expr":[{"dnat":{"fa'
    'mily":"ip","addr":{"map":{"key":{"payload":{"protocol":"ip","field":"daddr"}},"data":{"set":[[{"prefix":{"addr'
    '":"10.73.0.0","len":16}},{"prefix":{"addr":"10.244.0.0","len":16}}],["10.75.0.7",{"prefix":{"addr":"10.245.0.7'
    '","len":32}}]]}}},"flags":"netmap","type_flags":"prefix"}}]}},{"rule":{"family":"inet","table":"liqo_fabric_na'
    't","chain":"postrouting","handle":8,"expr":[{"match":{"op":"==","left":{"meta":{"key":"oifname"}},"right":"wg0'
    '"}},{"match":{"op":"==","left":{"payload":{"protocol":"ip","field":"saddr"}},"right":"10.243.0.9"}},{"snat":{"'
    'family":"ip","addr":"10.70.0.5"}}]}},{"rule":{"family":"inet","table":"liqo_fabric_nat","chain":"postrouting",'
    '"handle":9,"expr":[{"match":{"op":"==","left":{"meta":{"key":"oifname"}},"right":"wg0"}},{"match":{"op":"==","'
    'left":{"payload":{"protocol":"ip","field":"saddr"}},"right":{"prefix":{"addr":"10.243.0.0","len":16}}}},{"snat'
    '":{"family":"ip","addr":{"prefix":{"addr":"10.71.0.0","len":16}},"flags":"netmap","type_flags":"prefix"}}]}},{'
    '"rule":{"family":"inet","table":"liqo_fabric_nat","chain":"postrouting","handle":10,"expr":[{"match":{"op":"=='
    '","left":{"payload":{"protocol":"ip6","field":"saddr"}},"right":{"prefix":{"addr":"fd00:1::","len":64}}}},{"sn'
    'at":{"family":"ip6","addr":{"prefix":{"addr":"fd00:2::","len":64}},"flags":"netmap","type_flags":"prefix"}}]}}'
    ',{"rule":{"family":"inet","table":"liqo_fabric_nat","chain":"postrouting","handle":11,"expr":[{"match":{"op":"'
    '==","left":{"meta":{"key":"oifname"}},"right":"eth0"}},{"match":{"op":"==","left":{"payload":{"protocol":"ip",'
    '"field":"saddr"}},"right":{"prefix":{"addr":"10.243.0.0","len":16}}}},{"match":{"op":"==","left":{"payload":{"'
    'protocol":"ip","field":"daddr"}},"right":{"prefix":{"addr":"10.72.0.0","len":16}}}},{"snat":{"family":"ip","ad'
    'dr":{"prefix":{"addr":"10.243.0.0","len":16}},"flags":"netmap","type_flags":"prefix"}}]}},{"rule":{"family":"i'
    'net","table":"liqo_fabric_nat","chain":"forward","handle":12,"expr":[{"match":{"op":"==","left":{"meta":{"key"'
    ':"oifname"}},"right":"wg0"}},{"match":{"op":"in","left":{"payload":{"protocol":"tcp","field":"flags"}},"right"'
    ':"syn"}},{"mangle":{"key":{"tcp option":{"name":"maxseg","field":"size"}},"value":{"rt":{"key":"mtu"}}}}]}},{"'
    'rule":{"family":"inet","table":"liqo_fabric_nat","chain":"forward","handle":13,"expr":[{"match":{"op":"==","le'
    'ft":{"meta":{"key":"iifname"}},"right":"wg0"}},{"match":{"op":"in","left":{"payload":{"protocol":"tcp","field"'
    ':"flags"}},"right":"syn"}},{"mangle":{"key":{"tcp '
    'option":{"name":"maxseg","field":"size"}},"value":1300}}]}}]}'
)


def kernel_json():
    return json.loads(INET_JSON)


def test_kernel_json_canonicalises_to_the_desired_table():
    assert nt.parse_table(kernel_json(), "inet", "liqo_fabric_nat") == nt.build_table(INET_SPEC)


def test_kernel_map_with_host_key_parses_as_networks():
    table = nt.parse_table(kernel_json(), "inet", "liqo_fabric_nat")
    maps = [t for c in table.chains for r in c.rules for t in r if t[0] == "natmap"]
    assert maps == [("natmap", "dnat", "daddr", 4, (("10.73.0.0/16", "10.244.0.0/16"), ("10.75.0.7/32", "10.245.0.7/32")))]


def test_absent_table_is_none():
    assert nt.parse_table(None, "ip", "x") is None
    assert nt.parse_table({"nftables": [{"metainfo": {}}]}, "ip", "x") is None


def _mutate(fn):
    data = kernel_json()
    fn(data["nftables"])
    return nt.parse_table(data, "inet", "liqo_fabric_nat")


def _rules(objs):
    return [o["rule"] for o in objs if "rule" in o]


DRIFT_CASES = [
    ("rule deleted", lambda objs: objs.remove(next(o for o in objs if "rule" in o))),
    ("map element changed", lambda objs: _rules(objs)[2]["expr"][0]["dnat"]["addr"]["map"]["data"]["set"][0][1]["prefix"].update(addr="10.99.0.0")),
    ("interface changed", lambda objs: _rules(objs)[0]["expr"][0]["match"].update(right="wg1")),
    ("chain priority changed", lambda objs: next(o for o in objs if "chain" in o)["chain"].update(prio=0)),
    ("foreign statement added", lambda objs: _rules(objs)[0]["expr"].insert(0, {"counter": {"packets": 0, "bytes": 0}})),
    ("named set added", lambda objs: objs.append({"set": {"family": "inet", "name": "s", "table": "liqo_fabric_nat", "type": "ipv4_addr", "handle": 9}})),
    ("extra chain", lambda objs: objs.append({"chain": {"family": "inet", "table": "liqo_fabric_nat", "name": "x", "handle": 20}})),
]


@pytest.mark.parametrize("mutation", [c[1] for c in DRIFT_CASES], ids=[c[0] for c in DRIFT_CASES])
def test_drift_in_the_kernel_is_detected(mutation):
    assert _mutate(mutation) != nt.build_table(INET_SPEC)


def test_handles_do_not_matter():
    def renumber(objs):
        for o in objs:
            for body in o.values():
                if isinstance(body, dict) and "handle" in body:
                    body["handle"] += 100
    assert _mutate(renumber) == nt.build_table(INET_SPEC)


def test_unparsed_expressions_show_in_the_diff_text():
    table = _mutate(lambda objs: _rules(objs)[0]["expr"].insert(0, {"counter": {"packets": 0, "bytes": 0}}))
    assert '# unparsed: {"counter": {"bytes": 0, "packets": 0}}' in nt.render(table)


@pytest.mark.parametrize("flags_match", [
    {"match": {"op": "in", "left": {"payload": {"protocol": "tcp", "field": "flags"}}, "right": "syn"}},
    {"match": {"op": "==", "left": {"&": [{"payload": {"protocol": "tcp", "field": "flags"}}, "syn"]}, "right": "syn"}},
])
def test_both_spellings_of_the_syn_match(flags_match):
    assert nt._term(flags_match) == ("tcp_syn",)  # pylint: disable=protected-access


def test_diff_text_shows_rule_change():
    before = nt.render(nt.build_table({"remaps": [{"original": "10.243.0.0/16", "remapped": "10.71.0.0/16"}]}))
    after = nt.render(nt.build_table({"remaps": [{"original": "10.243.0.0/16", "remapped": "10.72.0.0/16"}]}))
    assert "\t\tip daddr 10.71.0.0/16 dnat ip prefix to 10.243.0.0/16\n" in before
    assert "\t\tip daddr 10.72.0.0/16 dnat ip prefix to 10.243.0.0/16\n" in after
    assert nt.render(None) == ""


def test_map_diff_lists_one_element_per_line():
    spec = {"remaps": [{"original": f"10.{i}.0.0/16", "remapped": f"10.{100 + i}.0.0/16", "translate": "destination"} for i in range(3)]}
    text = nt.render(nt.build_table(spec))
    assert "\t\t\t10.101.0.0/16 : 10.1.0.0/16,\n" in text


def test_below_the_map_threshold_every_remap_is_its_own_rule(monkeypatch):
    monkeypatch.setattr(nt, "MAP_MIN_ENTRIES", 10)
    spec = {"remaps": [{"original": f"10.{i}.0.0/16", "remapped": f"10.{100 + i}.0.0/16", "translate": "source"} for i in range(3)]}
    assert rules_text(nt.build_table(spec)) == {"postrouting": [f"ip saddr 10.{i}.0.0/16 snat ip prefix to 10.{100 + i}.0.0/16" for i in range(3)]}


def test_nft_falls_back_to_the_command_without_the_library(monkeypatch):
    from ansible_collections.liqo.fabric.plugins.module_utils import nftables
    monkeypatch.setattr(nftables, "library", lambda: None)
    monkeypatch.setattr(nftables.shutil, "which", lambda name, path=None: "/usr/sbin/nft")
    with nftables.Nft() as nft:
        assert nft.backend == "nft"
    with pytest.raises(nftables.NftError, match="libnftables.so.1 is not installed"):
        nftables.Nft("libnftables")
