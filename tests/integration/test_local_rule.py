"""module_utils/route/local_rule.py on a real kernel: a namespace's own address stops shadowing a marked route once
the `lookup local` rule sits after the marked packets' rule (the gateway pod whose IP the remote cluster's pod
also has), and goes back to 0 intact.

One netns: 10.243.0.3 on eth0 (its own address), two veths towards a peer (eth0, tun0); rule 100 `fwmark 0x1 lookup 100`,
table 100 sending everything into the veth (the tunnel's place)."""
import os
import sys

import pytest

from tests.ansible_run import ROOT
from tests.lab import netns

sys.path.insert(0, os.path.join(ROOT, "build", "collections"))
from ansible_collections.liqo.fabric.plugins.module_utils.route import local_rule  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.liqo.fabric.plugins.module_utils.route.policy import ValidationError  # noqa: E402  pylint: disable=wrong-import-position

pytestmark = pytest.mark.root
OWN = "10.243.0.3"


@pytest.fixture
def gw(netns_factory):
    gw, peer = netns_factory("gw", "peer")
    netns.ip_batch([f"link add tun0 netns {gw} type veth peer name eth0 netns {peer}",
                    f"link add eth0 netns {gw} type veth peer name eth1 netns {peer}"])
    netns.ip_batch(["link set eth1 up", "link set eth0 up"], netns=peer)
    netns.ip_batch([f"addr add {OWN}/24 dev eth0", "link set eth0 up",
                    "addr add 169.254.18.2/30 dev tun0", "link set tun0 up", "link set lo up",
                    "route add default dev tun0 table 100", "rule add pref 100 fwmark 0x1 lookup 100"], netns=gw)
    return gw


def route_get(ns, *args):
    return netns.run(["ip", "-n", ns, "route", "get", OWN, *args]).stdout


def local_prefs(ns):
    return [int(line.split(":")[0]) for line in netns.run(["ip", "-n", ns, "-4", "rule"]).stdout.splitlines()
            if "lookup local" in line]


def test_the_local_rule_moves_after_the_marked_route_and_back(gw):
    assert route_get(gw, "mark", "1").startswith("local "), "the kernel's rule 0 shadows the marked route"
    # check mode: the plan, nothing written
    res = local_rule.sync(110, check=True, netns=gw)
    assert res["changed"] and res["before"] == [0] and res["after"] == [110] and local_prefs(gw) == [0]
    res = local_rule.sync(110, netns=gw)
    assert res["changed"] and res["writes"] == 2 and local_prefs(gw) == [110]
    # a marked packet for the namespace's own address now takes table 100 (the tunnel); unmarked, still local
    assert "dev tun0 table 100" in route_get(gw, "mark", "1"), route_get(gw, "mark", "1")
    assert route_get(gw).startswith("local ")
    assert netns.run(["ip", "netns", "exec", gw, "ping", "-c1", "-W1", OWN]).returncode == 0
    assert local_rule.sync(110, netns=gw)["changed"] is False   # idempotent
    # back to the kernel's place (the IPv6 rule was never touched)
    assert local_rule.sync(0, netns=gw)["changed"] and local_prefs(gw) == [0]
    assert route_get(gw, "mark", "1").startswith("local ")
    assert "0:\tfrom all lookup local" in netns.run(["ip", "-n", gw, "-6", "rule"]).stdout


@pytest.mark.parametrize("value,message", [("x", "local_rule_priority: 'x' is not an integer"),
                                           (40000, "local_rule_priority: 40000 is out of range")])
def test_a_bad_priority_is_refused_before_the_kernel_is_touched(gw, value, message):
    with pytest.raises(ValidationError, match=message):
        local_rule.sync(value, netns=gw)
    assert local_prefs(gw) == [0]


def in_ns(ns, *argv, **kw):
    return netns.run(["ip", "netns", "exec", ns, *argv], **kw)


def input_count(ns):
    return int(in_ns(ns, "nft", "list", "ruleset").stdout.split("counter packets ")[1].split()[0])


def accept_local(ns, check=False):
    code = ("import sys; sys.path.insert(0, %r)\n"
            "from ansible_collections.liqo.fabric.plugins.module_utils.route import local_rule\n"
            "print(local_rule.accept_local('tun0', check=%r))" % (os.path.join(ROOT, "build", "collections"), check))
    return in_ns(ns, sys.executable, "-c", code).stdout.strip()


def test_accept_local_lets_a_tunnel_packet_with_the_namespaces_own_source_in(gw):
    """The peer sends from the gateway namespace's own address over tun0 (the remote pod that has the gateway
    pod's IP): dropped as martian until accept_local is set on tun0."""
    peer = gw[:-len("gw")] + "peer"
    netns.ip_batch(["addr add 169.254.18.1/30 dev eth0", f"addr add {OWN}/32 dev lo",
                    "route add 10.99.0.0/24 via 169.254.18.2 dev eth0"], netns=peer)
    netns.ip_batch(["addr add 10.99.0.1/32 dev lo"], netns=gw)
    in_ns(gw, "nft", "-f", "-", input=f"table ip t {{\n chain input {{\n  type filter hook input priority 0;\n"
          f"  ip saddr {OWN} ip daddr 10.99.0.1 counter\n }}\n}}\n")
    ping = ["ping", "-c2", "-i", "0.2", "-W1", "-I", OWN, "10.99.0.1"]
    in_ns(peer, *ping, check=False)
    assert input_count(gw) == 0, "the kernel takes a local source arriving from outside as martian"
    assert accept_local(gw, check=True) == "True"
    assert in_ns(gw, "cat", "/proc/sys/net/ipv4/conf/tun0/accept_local").stdout.strip() == "0"   # check mode
    assert accept_local(gw) == "True"
    in_ns(peer, *ping, check=False)
    # in now (the answer stays here: without the gateway's NAT and fwmark rule, 10.243.0.3 is local)
    assert input_count(gw) >= 2
    assert accept_local(gw) == "False"   # idempotent
