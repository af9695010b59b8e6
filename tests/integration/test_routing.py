"""Policy routing on a real kernel: liqo.fabric.route_table / route_rule in throwaway netns.

Topology: `src` has two possible next hops towards 10.99.0.1 (which only hop `b` owns):
    src va 192.168.10.1 --- 192.168.10.2 eth0 a      (main table: 10.99.0.0/24 via a -> dropped there)
    src vb 192.168.20.1 --- 192.168.20.2 eth0 b lo 10.99.0.1/32
Table 18952 + a rule send 10.99.0.0/24 through b; only then does the ping get an answer.
"""
import os
import sys

import pytest

from tests.ansible_run import ROOT, run_module
from tests.lab import netns

sys.path.insert(0, os.path.join(ROOT, "build", "collections"))
from ansible_collections.liqo.fabric.plugins.module_utils.route.netlink import NetlinkError  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.liqo.fabric.plugins.module_utils.route.policy import sync_route_table  # noqa: E402  pylint: disable=wrong-import-position

pytestmark = pytest.mark.root

TARGET = "10.99.0.1"
VIA_B = {"dst": "10.99.0.0/24", "via": "192.168.20.2", "dev": "vb"}
RULE = {"priority": 100, "to": "10.99.0.0/24"}


@pytest.fixture
def topo(netns_factory):
    src, a, b = netns_factory("src", "a", "b")
    netns.ip_batch([f"link add va netns {src} type veth peer name eth0 netns {a}",
                    f"link add vb netns {src} type veth peer name eth0 netns {b}"])
    netns.ip_batch(["addr add 192.168.10.1/24 dev va", "addr add 192.168.20.1/24 dev vb", "link set va up",
                    "link set vb up", "route add 10.99.0.0/24 via 192.168.10.2 dev va"], netns=src)
    netns.ip_batch(["addr add 192.168.10.2/24 dev eth0", "link set eth0 up"], netns=a)
    netns.ip_batch(["addr add 192.168.20.2/24 dev eth0", "link set eth0 up", f"addr add {TARGET}/32 dev lo"], netns=b)
    return src, a, b


def table(ns, tid=18952):
    proc = netns.run(["ip", "-n", ns, "route", "show", "table", str(tid)], check=False)
    if proc.returncode and "table does not exist" in proc.stderr:
        return ""
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def rules(ns):
    return netns.run(["ip", "-n", ns, "rule", "show"]).stdout


def route_get(ns):
    return netns.run(["ip", "-n", ns, "route", "get", TARGET]).stdout


def pings(ns):
    return netns.exec_in(ns, ["ping", "-c", "1", "-W", "1", TARGET], check=False).returncode == 0


def ok(result):
    assert result["rc"] == 0 and not result.get("failed"), result.get("msg") or result["stderr"]
    return result


def test_table_and_rule_steer_traffic(topo):
    src, _a, _b = topo
    assert "via 192.168.10.2 dev va" in route_get(src) and not pings(src), "baseline: main table goes to a"

    # Check mode predicts the change and writes nothing.
    r = ok(run_module("liqo.fabric.route_table", {"routes": [VIA_B]}, netns=src, check=True))
    assert r["changed"] and r["added"] == ["10.99.0.0/24 via 192.168.20.2 dev vb metric 0"] and r["writes"] == 0
    assert table(src) == ""
    r = ok(run_module("liqo.fabric.route_rule", {"rules": [RULE]}, netns=src, check=True))
    assert r["changed"] and "lookup 18952" not in rules(src)

    r = ok(run_module("liqo.fabric.route_table", {"routes": [VIA_B]}, netns=src, diff=True))
    assert r["changed"] and r["writes"] == 1
    assert r["diff"]["before"] == "" and "10.99.0.0/24 via 192.168.20.2 dev vb" in r["diff"]["after"]
    assert "10.99.0.0/24 via 192.168.20.2 dev vb" in table(src)
    assert "via 192.168.10.2 dev va" in route_get(src) and not pings(src), "a table without a rule is not used"

    r = ok(run_module("liqo.fabric.route_rule", {"rules": [RULE]}, netns=src))
    assert r["changed"] and r["added"] == ["100: from all to 10.99.0.0/24 lookup 18952"]
    assert "100:\tfrom all to 10.99.0.0/24 lookup 18952" in rules(src)
    got = route_get(src)
    assert "via 192.168.20.2 dev vb" in got and "table 18952" in got
    assert pings(src), "traffic follows table 18952 to b, which answers"

    # Idempotent reruns: changed false, zero writes.
    for module, args in (("liqo.fabric.route_table", {"routes": [VIA_B]}), ("liqo.fabric.route_rule", {"rules": [RULE]})):
        r = ok(run_module(module, args, netns=src))
        assert not r["changed"] and r["writes"] == 0, module

    # Removing the route from the input removes it from the kernel; traffic falls back to main (a).
    r = ok(run_module("liqo.fabric.route_table", {"routes": []}, netns=src, check=True))
    assert r["changed"] and r["removed"] and "10.99.0.0/24" in table(src)
    r = ok(run_module("liqo.fabric.route_table", {"routes": []}, netns=src))
    assert r["changed"] and r["removed"] == ["10.99.0.0/24 via 192.168.20.2 dev vb metric 0"]
    assert table(src) == ""
    assert "via 192.168.10.2 dev va" in route_get(src) and not pings(src)

    r = ok(run_module("liqo.fabric.route_rule", {"state": "absent"}, netns=src))
    assert r["changed"] and "lookup 18952" not in rules(src)
    for kernel_rule in ("lookup local", "lookup main", "lookup default"):
        assert kernel_rule in rules(src)


def test_rules_only_touch_owned_tables(topo):
    src = topo[0]
    netns.ip_batch(["rule add priority 200 lookup 100", "rule add priority 300 lookup 18952 fwmark 7",
                    "rule add priority 301 lookup 18952 suppress_prefixlength 0"], netns=src)
    r = ok(run_module("liqo.fabric.route_rule", {"rules": [RULE, {"priority": 110, "fwmark": "0x10/0xff", "iif": "va"}]},
                      netns=src, diff=True))
    assert r["changed"] and len(r["removed"]) == 2 and len(r["added"]) == 2
    assert "300: from all fwmark 0x7 lookup 18952" in r["diff"]["before"]
    now = rules(src)
    assert "200:\tfrom all lookup 100" in now, "a rule of another table is never touched"
    assert "300:" not in now and "301:" not in now
    assert "110:\tfrom all fwmark 0x10/0xff iif va lookup 18952" in now
    assert all(k in now for k in ("lookup local", "lookup main", "lookup default"))
    r = ok(run_module("liqo.fabric.route_rule", {"rules": [RULE, {"priority": 110, "fwmark": "0x10/0xff", "iif": "va"}]},
                      netns=src))
    assert not r["changed"]


def test_bad_input_fails_before_any_change(topo):
    src = topo[0]
    r = run_module("liqo.fabric.route_table", {"routes": [VIA_B, {"dst": "10.98.0.0/24", "dev": "nosuch0"}]}, netns=src)
    assert r.get("failed") and "routes[1].dev: 'nosuch0' is not a device of this host" in r["msg"]
    assert table(src) == ""
    r = run_module("liqo.fabric.route_table", {"routes": [{"dst": "10.0.0.300/24", "dev": "vb"}]}, netns=src)
    assert r.get("failed") and "routes[0].dst: '10.0.0.300/24' is not a valid CIDR" in r["msg"]
    r = run_module("liqo.fabric.route_table", {"table": 254, "routes": []}, netns=src)
    assert r.get("failed") and "table: 254 is the kernel's 'main' table" in r["msg"]
    assert "10.99.0.0/24 via 192.168.10.2" in netns.run(["ip", "-n", src, "route"]).stdout, "main table untouched"


def test_kernel_refusal_names_the_route_and_onlink_fixes_it(topo):
    src = topo[0]
    bad = {"dst": "10.97.0.0/24", "via": "172.16.0.1", "dev": "vb"}
    with pytest.raises(NetlinkError, match=r"add 10.97.0.0/24 via 172.16.0.1 dev vb table 18952 .*unreachable"):
        sync_route_table([VIA_B, bad], netns=src)
    r = sync_route_table([VIA_B, dict(bad, onlink=True)], netns=src)
    assert r["changed"] and "10.97.0.0/24 via 172.16.0.1 dev vb proto static onlink" in table(src)
    assert not sync_route_table([VIA_B, dict(bad, onlink=True)], netns=src)["changed"]


def test_route_kinds_and_replace(topo):
    src = topo[0]
    routes = [VIA_B, {"dst": "10.96.0.0/16", "type": "blackhole"}, {"dst": "10.95.0.0/16", "dev": "va", "metric": 5},
              {"dst": "default", "type": "unreachable", "metric": 4000}, {"dst": "fd00:99::/64", "dev": "vb"},
              {"dst": "10.94.0.0/16", "via": "192.168.20.2", "src": "192.168.20.1"}]
    r = sync_route_table(routes, netns=src)
    assert len(r["added"]) == 6
    got = table(src)
    assert "blackhole 10.96.0.0/16" in got and "10.95.0.0/16 dev va proto static scope link metric 5" in got
    assert "unreachable default" in got and "10.94.0.0/16 via 192.168.20.2 dev vb proto static src 192.168.20.1" in got
    assert "fd00:99::/64 dev vb" in netns.run(["ip", "-n", src, "-6", "route", "show", "table", "18952"]).stdout
    assert not sync_route_table(routes, netns=src)["changed"]
    # A changed next hop is replaced in place (same key), not added twice.
    routes[0] = dict(VIA_B, via="192.168.10.2", dev="va")
    r = sync_route_table(routes, netns=src)
    assert r["replaced"] == ["10.99.0.0/24 via 192.168.10.2 dev va metric 0"] and not r["added"] and not r["removed"]
    assert "10.99.0.0/24 via 192.168.10.2 dev va" in table(src) and "192.168.20.2 dev vb proto static \n" not in table(src)
    # Routes someone else put into our table are removed.
    netns.ip_batch(["route add 10.93.0.0/16 dev va table 18952"], netns=src)
    r = sync_route_table(routes, netns=src)
    assert r["removed"] == ["10.93.0.0/16 dev va metric 0"]


def test_thousands_of_routes_in_one_call(topo):
    src = topo[0]
    routes = [{"dst": f"10.{64 + i // 256}.{i % 256}.0/24", "via": "192.168.20.2", "dev": "vb"} for i in range(3000)]
    r = sync_route_table(routes, netns=src, want_lines=False)
    assert r["writes"] == 3000 and len(table(src).splitlines()) == 3000
    r = sync_route_table(routes[:1000], netns=src, want_lines=False)
    assert len(r["removed"]) == 2000 and len(table(src).splitlines()) == 1000
    assert sync_route_table(routes[:1000], netns=src, want_lines=False)["writes"] == 0
    r = sync_route_table([], state="absent", netns=src)
    assert table(src) == ""
