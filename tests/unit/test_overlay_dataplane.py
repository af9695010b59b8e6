"""Pure parts of plugins/module_utils/overlay_dataplane.py: validation of a node plan (all of it before any
write), the route device check and the diff lines. The kernel side is tests/integration/test_overlay_dataplane.py."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "build", "collections"))
from ansible_collections.liqo.fabric.plugins.module_utils import overlay_dataplane as D  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.liqo.fabric.plugins.module_utils import overlay_plan as P  # noqa: E402  pylint: disable=wrong-import-position

LINK = {"name": "lovg0a1b2c3d", "type": "vxlan", "vni": 65539, "remotes": ["172.30.0.2"], "local": "172.30.0.3",
        "mtu": 1450, "addresses": ["10.80.0.3/32"]}


def plan(**over):
    node = {"links": [dict(LINK)],
            "routes": [{"dst": "10.80.0.2/32", "dev": LINK["name"], "scope": "link"},
                       {"dst": "10.72.0.0/16", "via": "10.80.0.2", "dev": LINK["name"], "onlink": True}],
            "rules": [{"priority": 1650, "to": "10.80.0.0/16", "table": 18952},
                      {"priority": 1900, "to": "10.72.0.0/16", "table": 18952}],
            "bypass": [{"saddr": "10.243.0.0/16", "daddr": "10.72.0.0/16"}],
            "internal_ip": "10.80.0.3", "role": "node"}
    node.update(over)
    return node


def cluster(n_nodes, gateways):
    nodes = [{"metadata": {"name": f"n{i}", "annotations": {}}, "spec": {"podCIDR": f"10.243.{i}.0/24"},
              "status": {"addresses": [{"type": "InternalIP", "address": f"172.30.0.{i + 2}"}]}}
             for i in range(n_nodes)]
    pods = [{"spec": {"nodeName": f"n{i}"},
             "status": {"podIP": f"10.243.{i}.9", "hostIP": f"172.30.0.{i + 2}", "phase": "Running"}}
            for i in range(n_nodes)]
    return P.plan(nodes, pods, gateways, gateways[0], ["10.72.0.0/16", "10.73.0.0/16"], ["liqo-tun0"],
                  "10.80.0.0/16", "vxlan", 1450, True, ["10.243.0.0/16"]).to_result()


@pytest.mark.parametrize("n_nodes, gateways", [(2, ["n0"]), (5, ["n0", "n1"]), (1, ["n0"])])
def test_every_planned_host_validates(n_nodes, gateways):
    """The plan's own output (with its informative keys) is valid input, for nodes and gateway hosts."""
    for name, host in cluster(n_nodes, gateways)["hosts"].items():
        v = D.validate(host, 18952, "present")
        assert v["link_names"] == [l["name"] for l in host["links"]], name
        assert all(n.startswith(D.OWNED_PREFIXES) for n in v["link_names"])
        D.check_devices(host["routes"], v["link_names"], {1: "lo"})  # every route goes through a planned link


@pytest.mark.parametrize("node, message", [
    (plan(routes=[{"dst": "10.72.0.300/16", "dev": LINK["name"]}]), "routes[0].dst: '10.72.0.300/16' is not a valid CIDR"),
    (plan(routes=[{"dst": "10.72.0.1/16", "dev": LINK["name"]}]), "routes[0].dst: '10.72.0.1/16' has host bits set"),
    (plan(links=[dict(LINK, vni=2 ** 24)]), "links[0].vni: 16777216 is out of range"),
    (plan(links=[dict(LINK, vni="7")]), "links[0].vni: '7' is out of range"),
    (plan(links=[dict(LINK, remotes=["172.30.0.300"])]), "links[0].remotes[0]: '172.30.0.300' is not a valid IP address"),
    (plan(links=[dict(LINK, name="vx0")]), "links[0].name: 'vx0' does not start with lovg or lovn"),
    (plan(links=[dict(LINK), dict(LINK, vni=7)]), "links: duplicate names lovg0a1b2c3d"),
    (plan(rules=[{"priority": 1650, "to": "10.80.0.0/16", "table": 254}]), "rules[0].table: 254 is the kernel's 'main' table"),
    (plan(rules=[{"priority": 1650, "to": "10.80.0.0/16", "table": 100}]), "rules[0].table: 100 is not one of the owned tables"),
    (plan(rules=[{"to": "10.80.0.0/16"}]), "rules[0].priority: is required"),
    (plan(bypass=[{"saddr": "10.243.0.0/33"}]), "bypass[0].saddr: '10.243.0.0/33' is not a valid CIDR"),
    (plan(bypass=[{"daddr": "10.72.0.0/16"}]), "bypass[0].saddr: is required"),
    (plan(routes="10.72.0.0/16"), "routes: '10.72.0.0/16' is not a list"),
    (plan(links=["lovg0"]), "links[0]: 'lovg0' is not a dict"),
    (dict(plan(), gateway=True), "node: unknown key(s) gateway"),
    ("lovg0", "node: 'lovg0' is not a dict"),
])
def test_bad_input_names_field_and_value(node, message):
    with pytest.raises(D.ValidationError) as e:
        D.validate(node, 18952, "present")
    assert str(e.value).startswith(message), str(e.value)


@pytest.mark.parametrize("table, state, message", [
    (254, "present", "table: 254 is the kernel's 'main' table"),
    ("x", "present", "table: 'x' is not an integer"),
    (0, "absent", "table: 0 is the kernel's 'unspec' table"),
    (18952, "gone", "state: 'gone' is not one of present, absent"),
])
def test_bad_table_or_state(table, state, message):
    with pytest.raises(D.ValidationError) as e:
        D.validate(plan(), table, state)
    assert str(e.value).startswith(message)


def test_absent_ignores_the_plan():
    v = D.validate({"links": "garbage"}, 18952, "absent")
    assert v["links"] == v["routes"] == v["rules"] == v["bypass"] == [] and v["table"] == 18952


def test_empty_plan_is_valid():
    v = D.validate({}, 18952, "present")
    assert v["links"] == [] and v["bypass"] == []
    assert D.validate(None, "18952", "present")["table"] == 18952


def test_route_devices_must_exist_or_be_planned():
    routes = plan()["routes"] + [{"dst": "10.90.0.0/16", "dev": "eth0", "via": "172.30.0.1"}]
    D.check_devices(routes, [LINK["name"]], {1: "lo", 2: "eth0"})
    with pytest.raises(D.ValidationError) as e:
        D.check_devices(routes, [LINK["name"]], {1: "lo"})
    assert str(e.value).startswith("routes[2].dev: 'eth0' is neither a device of this host")
    with pytest.raises(D.ValidationError) as e:
        D.check_devices(plan()["routes"], [], {1: "lo"})
    assert str(e.value).startswith(f"routes[0].dev: '{LINK['name']}'")


def test_link_line():
    st = {"kind": "vxlan", "vni": 65539, "dst_port": 4789, "local": "172.30.0.3", "dev": None, "remote": None,
          "fdb": ["172.30.0.2"], "mtu": 1450, "addresses": ["10.80.0.3/32"], "up": True}
    assert D.link_line("lovg0", st) == ("lovg0 vxlan vni 65539 dstport 4789 local 172.30.0.3 fdb 172.30.0.2 mtu 1450 "
                                        "addr 10.80.0.3/32 up")
    geneve = dict(st, kind="geneve", local=None, remote="172.30.0.2", fdb=[], mtu=None, up=False)
    assert D.link_line("lovn1", geneve) == "lovn1 geneve vni 65539 dstport 4789 remote 172.30.0.2 addr 10.80.0.3/32 down"


def test_host_digest_is_stable_and_follows_every_part_of_the_state():
    from ansible_collections.liqo.fabric.plugins.module_utils.overlay_plan import host_digest
    host = {"links": [{"name": "lovg1", "vni": 7, "remotes": ["172.30.0.2"]}], "routes": [{"dst": "10.0.0.0/16"}],
            "rules": [{"priority": 1900, "table": 18952}], "bypass": ["10.0.0.0/16"], "role": "node"}
    reordered = dict(reversed(list(host.items())))
    assert host_digest(host) == host_digest(reordered) and len(host_digest(host)) == 20
    assert host_digest(host) != host_digest(host, table=18953)
    moved = dict(host, routes=[{"dst": "10.0.0.0/16", "gateway": "10.80.0.3"}])
    assert host_digest(host) != host_digest(moved)
