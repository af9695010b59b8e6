"""liqo.fabric.nat_table on a real kernel: 1:1 remap between two clusters with the SAME pod CIDR.

    ca (pod 10.243.3.7) -- ga ==== 192.168.77.0/24 ==== gb -- sb (pod 10.243.0.9)

Both clusters use 10.243.0.0/16. ga's table remaps its pods to 10.71.0.0/16 on the link, gb's remaps
its own to 10.72.0.0/16. A TCP echo server reports the peer address it sees (and the MSS it got).
"""
import json
import os
import subprocess
import sys

import pytest

from tests.ansible_run import run_module
from tests.lab import netns

pytestmark = pytest.mark.root

_COLLECTIONS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "build", "collections")
if _COLLECTIONS not in sys.path:
    sys.path.insert(0, _COLLECTIONS)

MODULE = "liqo.fabric.nat_table"
PORT = 7443

SERVER = r"""
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.listen(16)
print("ready", flush=True)
while True:
    c, peer = s.accept()
    c.sendall(f"{peer[0]} {c.getsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG)}".encode())
    c.close()
"""

CLIENT = r"""
import socket, sys
s = socket.socket()
s.settimeout(float(sys.argv[4]))
s.bind((sys.argv[3], 0))
try:
    s.connect((sys.argv[1], int(sys.argv[2])))
    print(s.recv(100).decode())
except OSError as e:
    print(f"ERROR {e}")
"""


def start_server(ns, servers):
    proc = netns.popen_in(ns, [sys.executable, "-c", SERVER, str(PORT)], stdout=subprocess.PIPE, text=True)
    servers.append(proc)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def ask(ns, dst, src, timeout=3.0):
    """Connects from `src` in `ns` to the echo server at `dst`: (peer address seen by the server, MSS)."""
    out = netns.exec_in(ns, [sys.executable, "-c", CLIENT, dst, str(PORT), src, str(timeout)], timeout=30).stdout.strip()
    if out.startswith("ERROR"):
        return out, None
    peer, mss = out.split()
    return peer, int(mss)


def nft_json(ns, *args):
    proc = netns.exec_in(ns, ["nft", "-j", *args], check=False)
    return json.loads(proc.stdout) if proc.returncode == 0 else None


def tables(ns):
    return [(o["table"]["family"], o["table"]["name"]) for o in nft_json(ns, "list", "tables")["nftables"] if "table" in o]


def strip_handles(data):
    return json.dumps([{k: {f: v for f, v in body.items() if f != "handle"}} for o in data["nftables"] for k, body in o.items()
                       if k != "metainfo"], sort_keys=True)


OTHER_TABLE = """
table ip lfab_cni {
    chain postrouting {
        type nat hook postrouting priority srcnat; policy accept;
        oifname "eth0" masquerade
    }
}
table inet lfab_filter {
    set blocked { type ipv4_addr; elements = { 192.0.2.1, 192.0.2.2 } }
    chain input {
        type filter hook input priority filter; policy accept;
        ip saddr @blocked counter drop
    }
}
"""


@pytest.fixture
def servers():
    procs = []
    yield procs
    for p in procs:
        p.terminate()
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()


@pytest.fixture
def two_clusters(netns_factory):
    ca, ga, gb, sb = netns_factory("ca", "ga", "gb", "sb")
    netns.ip_batch([f"link add eth0 netns {ca} type veth peer name pod0 netns {ga}",
                    f"link add eth0 netns {ga} type veth peer name eth0 netns {gb}",
                    f"link add eth0 netns {sb} type veth peer name pod0 netns {gb}"])
    netns.ip_batch(["addr add 10.243.3.7/16 dev eth0", "link set eth0 up", "route add default via 10.243.0.1"], netns=ca)
    netns.ip_batch(["addr add 10.243.0.9/16 dev eth0", "link set eth0 up", "route add default via 10.243.0.1"], netns=sb)
    for gw, me, peer_remote, peer_ip in ((ga, "192.168.77.1", "10.72.0.0/16", "192.168.77.2"),
                                         (gb, "192.168.77.2", "10.71.0.0/16", "192.168.77.1")):
        netns.ip_batch([f"addr add {me}/24 dev eth0", "link set eth0 up", "addr add 10.243.0.1/16 dev pod0",
                        "link set pod0 up", f"route add {peer_remote} via {peer_ip}"], netns=gw)
        netns.sysctl_in(gw, {"net.ipv4.ip_forward": "1"})
    return ca, ga, gb, sb


def remap_args(remapped, **extra):
    args = {"remaps": [{"original": "10.243.0.0/16", "remapped": remapped, "iifname": "eth0", "oifname": "eth0"}]}
    args.update(extra)
    return args


def test_remap_between_clusters_with_the_same_pod_cidr(two_clusters, servers):
    ca, ga, gb, sb = two_clusters
    netns.exec_in(ga, ["nft", "-f", "-"], input=OTHER_TABLE)
    other_before = strip_handles(nft_json(ga, "list", "ruleset"))
    start_server(sb, servers)
    start_server(ca, servers)

    peer = ask(ca, "10.72.0.9", "10.243.3.7", timeout=1)[0]
    assert peer.startswith("ERROR"), "without the remap the overlapping pods must not reach each other"

    args_a = remap_args("10.71.0.0/16", mss=[{"oifname": "eth0", "size": 1200}])
    args_b = remap_args("10.72.0.0/16")
    for ns, args in ((ga, args_a), (gb, args_b)):
        res = run_module(MODULE, args, netns=ns)
        assert res["changed"] is True and not res.get("failed"), res.get("msg")
        assert res["backend"] == "libnftables"

    # A -> B: B's server sees A's pod 10.243.3.7 as 10.71.3.7 (host part kept), not the gateway (masquerade)
    peer, mss = ask(ca, "10.72.0.9", "10.243.3.7")
    assert peer == "10.71.3.7"
    assert mss <= 1200, "the SYN leaving ga through eth0 is clamped"
    # B -> A: A's server sees B's pod 10.243.0.9 as 10.72.0.9
    peer = ask(sb, "10.71.3.7", "10.243.0.9")[0]
    assert peer == "10.72.0.9"

    for ns, args in ((ga, args_a), (gb, args_b)):
        again = run_module(MODULE, args, netns=ns)
        assert again["changed"] is False and not again.get("failed"), again.get("msg")
    assert strip_handles({"nftables": [o for o in nft_json(ga, "list", "ruleset")["nftables"]
                                       if "liqo_fabric_nat" not in json.dumps(o)]}) == other_before


def test_check_mode_predicts_and_changes_nothing(veth_pair):
    a = veth_pair[0]
    args = remap_args("10.71.0.0/16")
    res = run_module(MODULE, args, netns=a, check=True, diff=True)
    assert res["changed"] is True and not res.get("failed"), res.get("msg")
    assert "ip daddr 10.71.0.0/16 dnat ip prefix to 10.243.0.0/16" in res["diff"]["after"]
    assert ("ip", "liqo_fabric_nat") not in tables(a)

    assert run_module(MODULE, args, netns=a)["changed"] is True
    kernel = strip_handles(nft_json(a, "list", "table", "ip", "liqo_fabric_nat"))
    assert run_module(MODULE, args, netns=a, check=True)["changed"] is False

    changed_args = remap_args("10.72.0.0/16")
    res = run_module(MODULE, changed_args, netns=a, check=True, diff=True)
    assert res["changed"] is True
    assert "ip daddr 10.71.0.0/16" in res["diff"]["before"] and "ip daddr 10.72.0.0/16" in res["diff"]["after"]
    assert strip_handles(nft_json(a, "list", "table", "ip", "liqo_fabric_nat")) == kernel


def test_bad_input_fails_naming_the_field_and_changes_nothing(veth_pair):
    a = veth_pair[0]
    bad = {"remaps": [{"original": "10.243.0.0/16", "remapped": "10.71.0.0/24"}]}
    res = run_module(MODULE, bad, netns=a)
    assert res.get("failed") is True
    assert "remaps[0].remapped" in res["msg"] and "'10.71.0.0/24'" in res["msg"]
    assert ("ip", "liqo_fabric_nat") not in tables(a)

    assert run_module(MODULE, remap_args("10.71.0.0/16"), netns=a)["changed"] is True
    kernel = strip_handles(nft_json(a, "list", "table", "ip", "liqo_fabric_nat"))
    res = run_module(MODULE, remap_args("10.71.0.0/16", mss=[{"oifname": "wg0:bad"}]), netns=a)
    assert res.get("failed") is True and "mss[0].oifname: 'wg0:bad'" in res["msg"]
    assert strip_handles(nft_json(a, "list", "table", "ip", "liqo_fabric_nat")) == kernel


def test_absent_removes_only_this_table(veth_pair):
    a = veth_pair[0]
    netns.exec_in(a, ["nft", "-f", "-"], input=OTHER_TABLE)
    others = strip_handles(nft_json(a, "list", "ruleset"))
    assert run_module(MODULE, {"name": "lfab_nat", "family": "inet", **remap_args("10.71.0.0/16")}, netns=a)["changed"] is True
    assert ("inet", "lfab_nat") in tables(a)
    res = run_module(MODULE, {"name": "lfab_nat", "family": "inet", "state": "absent"}, netns=a, diff=True)
    assert res["changed"] is True and "dnat ip prefix to 10.243.0.0/16" in res["diff"]["before"]
    assert ("inet", "lfab_nat") not in tables(a)
    assert strip_handles(nft_json(a, "list", "ruleset")) == others
    assert run_module(MODULE, {"name": "lfab_nat", "family": "inet", "state": "absent"}, netns=a)["changed"] is False


def test_bypass_keeps_pod_source_despite_cni_masquerade(netns_factory, servers):
    c, g, s = netns_factory("c", "g", "s")
    netns.ip_batch([f"link add eth0 netns {c} type veth peer name pod0 netns {g}",
                    f"link add eth0 netns {g} type veth peer name eth0 netns {s}"])
    netns.ip_batch(["addr add 10.244.0.5/16 dev eth0", "link set eth0 up", "route add default via 10.244.0.1"], netns=c)
    netns.ip_batch(["addr add 10.244.0.1/16 dev pod0", "link set pod0 up", "addr add 192.168.77.1/24 dev eth0",
                    "link set eth0 up"], netns=g)
    netns.ip_batch(["addr add 192.168.77.2/24 dev eth0", "link set eth0 up", "route add 10.244.0.0/16 via 192.168.77.1"], netns=s)
    netns.sysctl_in(g, {"net.ipv4.ip_forward": "1"})
    netns.exec_in(g, ["nft", "-f", "-"], input=OTHER_TABLE)  # the "CNI" masquerades everything leaving eth0
    start_server(s, servers)

    assert ask(c, "192.168.77.2", "10.244.0.5")[0] == "192.168.77.1", "the masquerade is active"
    res = run_module(MODULE, {"bypass": [{"saddr": "10.244.0.0/16", "daddr": "192.168.77.0/24", "oifname": "eth0"}]}, netns=g)
    assert res["changed"] is True and not res.get("failed"), res.get("msg")
    assert ask(c, "192.168.77.2", "10.244.0.5")[0] == "10.244.0.5"


def test_nft_command_backend_and_cross_backend_idempotence(veth_pair):
    a = veth_pair[0]
    args = remap_args("10.71.0.0/16", backend="nft", mss=[{"oifname": "eth0"}])
    res = run_module(MODULE, args, netns=a)
    assert res["changed"] is True and res["backend"] == "nft", res.get("msg")
    res = run_module(MODULE, dict(args, backend="libnftables"), netns=a)
    assert res["changed"] is False and res["backend"] == "libnftables"
    assert run_module(MODULE, args, netns=a)["changed"] is False


# ------------------------------------------------------------------------------------------- tunnels
# Two clusters with the SAME pod CIDR 10.243.0.0/16, joined by a veth "tunnel" standing in for WireGuard:
#
#   podA 10.243.0.2 -- cni0 10.243.0.1 [gwA] tun0 169.254.18.1 ==== 169.254.18.2 tun0 [gwB] cni0 10.243.0.1 -- podB 10.243.0.9
#
# A reaches B's pods as 10.71.0.0/16, B reaches A's as 10.72.0.0/16. After the DNAT 10.71.x -> 10.243.x the
# main table of gwA would deliver to its own pods: the mark (policy routing table 18952) sends it into tun0.
TUN_TABLE = 18952
TUNNEL_SIDES = {  # gateway -> (mark, remote remapped CIDR, peer's tunnel address, own tunnel address)
    "a": (0x12, "10.71.0.0/16", "169.254.18.2", "169.254.18.1"),
    "b": (0x13, "10.72.0.0/16", "169.254.18.1", "169.254.18.2"),
}


def tunnel_args(side):
    mark, remapped, _peer, _me = TUNNEL_SIDES[side]
    return {"tunnels": [{"interface": "tun0", "mark": mark, "remote_original": "10.243.0.0/16", "remote_remapped": remapped}]}


@pytest.fixture
def tunnel_clusters(netns_factory):
    pod_a, gw_a, gw_b, pod_b = netns_factory("pa", "gwa", "gwb", "pb")
    netns.ip_batch([f"link add eth0 netns {pod_a} type veth peer name cni0 netns {gw_a}",
                    f"link add tun0 netns {gw_a} type veth peer name tun0 netns {gw_b}",
                    f"link add eth0 netns {pod_b} type veth peer name cni0 netns {gw_b}"])
    for pod, addr in ((pod_a, "10.243.0.2/24"), (pod_b, "10.243.0.9/24")):
        netns.ip_batch([f"addr add {addr} dev eth0", "link set eth0 up", "route add default via 10.243.0.1"], netns=pod)
    for gw, side in ((gw_a, "a"), (gw_b, "b")):
        mark, remapped, peer, me = TUNNEL_SIDES[side]
        # Both gateways own 10.243.0.1 (the host-output case below sources from it), so on the receiving side
        # (1) a packet from the tunnel with source 10.243.0.1 has a local source: accepted only with accept_local
        # (its SNAT to 10.72.0.1 happens in postrouting, after the routing decision); (2) the reply, de-SNATed
        # to 10.243.0.1, would be delivered locally by the `local` rule (pref 0) before the fwmark rule is
        # consulted: the fwmark rule goes before `local`. Pod-to-pod traffic needs neither.
        netns.sysctl_in(gw, {"net.ipv4.ip_forward": "1", "net.ipv4.conf.all.rp_filter": "2", "net.ipv4.conf.tun0.accept_local": "1"})
        netns.ip_batch(["addr add 10.243.0.1/24 dev cni0", "link set cni0 up", f"addr add {me}/30 dev tun0", "link set tun0 up",
                        # what the role does with route_rule / route_table (a veth needs a gateway for ARP; WireGuard would not)
                        f"rule add pref 50 fwmark {mark} lookup {TUN_TABLE}", "rule add pref 100 lookup local", "rule del pref 0 lookup local",
                        f"route add default via {peer} dev tun0 table {TUN_TABLE}",
                        # the host's own sockets need some route for the remapped CIDR before the mark is set
                        f"route add {remapped} via {peer} dev tun0"], netns=gw)
    return pod_a, gw_a, gw_b, pod_b


def ping(ns, dst, *extra):
    proc = netns.exec_in(ns, ["ping", "-n", "-c", "1", "-W", "2", *extra, dst], check=False)
    return proc.returncode == 0 and f"from {dst}" in proc.stdout


COUNT_TABLE = "lfab_count"


def count_ipv4_out(ns, ifname):
    """Starts counting the IPv4 packets `ns` sends out of `ifname` (an nft counter: the ARP and IPv6 neighbour
    packets the kernel sends on its own, at any moment, are not counted)."""
    netns.exec_in(ns, ["nft", "-f", "-"], input=f"table ip {COUNT_TABLE} {{\n chain out {{\n"
                  f"  type filter hook postrouting priority 0;\n  oifname \"{ifname}\" counter\n }}\n}}\n")


def ipv4_out(ns):
    """The count since count_ipv4_out, and the counter removed."""
    rules = json.loads(netns.exec_in(ns, ["nft", "-j", "list", "table", "ip", COUNT_TABLE]).stdout)["nftables"]
    netns.exec_in(ns, ["nft", "delete", "table", "ip", COUNT_TABLE])
    return next(e["counter"]["packets"] for r in rules if "rule" in r for e in r["rule"]["expr"] if "counter" in e)


def test_tunnel_between_clusters_with_overlapping_pod_cidrs(tunnel_clusters, servers):
    pod_a, gw_a, gw_b, pod_b = tunnel_clusters
    netns.exec_in(gw_a, ["nft", "-f", "-"], input=OTHER_TABLE)
    for ns in (pod_a, pod_b, gw_a):
        start_server(ns, servers)
    assert ask(pod_a, "10.71.0.9", "10.243.0.2", timeout=1)[0].startswith("ERROR"), "no path before the tables exist"

    # check mode predicts the rules and writes nothing
    res = run_module(MODULE, tunnel_args("a"), netns=gw_a, check=True, diff=True)
    assert res["changed"] is True and not res.get("failed"), res.get("msg")
    for line in ('iifname != "tun0" ip daddr 10.71.0.0/16 meta mark set 0x00000012',
                 'iifname != "tun0" ct mark 0x00000012 meta mark set 0x00000012',
                 'iifname "tun0" ct state new ct mark set 0x00000012',
                 'iifname != "tun0" ip daddr 10.71.0.0/16 dnat ip prefix to 10.243.0.0/16',
                 'iifname "tun0" ip saddr 10.243.0.0/16 snat ip prefix to 10.71.0.0/16',
                 "type route hook output priority mangle;"):
        assert f"\t\t{line}" in res["diff"]["after"], line
    assert ("ip", "liqo_fabric_nat") not in tables(gw_a)

    for ns, side in ((gw_a, "a"), (gw_b, "b")):
        res = run_module(MODULE, tunnel_args(side), netns=ns)
        assert res["changed"] is True and not res.get("failed"), res.get("msg")
        assert res["rules"] == 8

    # pod A -> pod B at its remapped address: B sees A's pod with its host bits, remapped
    assert ask(pod_a, "10.71.0.9", "10.243.0.2")[0] == "10.72.0.2"
    assert ping(pod_a, "10.71.0.9")
    # pod B -> pod A
    assert ask(pod_b, "10.72.0.2", "10.243.0.9")[0] == "10.71.0.9"
    assert ping(pod_b, "10.72.0.2")

    # gwA's own traffic to its pod 10.243.0.2 stays local: answered by pod A, nothing sent into the tunnel
    count_ipv4_out(gw_a, "tun0")
    assert ask(gw_a, "10.243.0.2", "10.243.0.1")[0] == "10.243.0.1"
    assert ping(gw_a, "10.243.0.2")
    assert ipv4_out(gw_a) == 0
    # the gateway host itself (output path: mangle_output + nat output) reaches pod B
    count_ipv4_out(gw_a, "tun0")
    assert ping(gw_a, "10.71.0.9", "-I", "10.243.0.1")
    assert ipv4_out(gw_a) > 0   # the counter does see what goes into the tunnel
    assert ask(gw_a, "10.71.0.9", "10.243.0.1")[0] == "10.72.0.1"
    # a connection from the tunnel to gwA's host: its replies (to 10.243.0.9, which is local on cni0 for the
    # main table) follow the ct mark back into the tunnel
    peer = ask(pod_b, "10.72.0.1", "10.243.0.9")[0]
    assert not peer.startswith("ERROR"), peer
    # a connection from the tunnel whose source is outside the remote pod CIDR (no SNAT; gwA's main table
    # sends that network to cni0): the replies of pod A follow the ct mark (mangle_prerouting) into the tunnel
    netns.ip_batch(["addr add 192.0.2.1/32 dev lo"], netns=gw_b)
    netns.ip_batch(["route add 192.0.2.0/24 dev cni0"], netns=gw_a)
    assert ask(gw_b, "10.72.0.2", "192.0.2.1")[0] == "192.0.2.1"
    assert ping(gw_b, "10.72.0.2", "-I", "192.0.2.1")

    # second run: nothing changes, nothing is written (a rewrite would renumber the handles)
    with_handles = netns.exec_in(gw_a, ["nft", "-j", "list", "table", "ip", "liqo_fabric_nat"]).stdout
    for ns, side in ((gw_a, "a"), (gw_b, "b")):
        again = run_module(MODULE, tunnel_args(side), netns=ns, diff=True)
        assert again["changed"] is False and not again.get("failed"), again.get("msg")
    assert netns.exec_in(gw_a, ["nft", "-j", "list", "table", "ip", "liqo_fabric_nat"]).stdout == with_handles
    assert run_module(MODULE, tunnel_args("a"), netns=gw_a, check=True)["changed"] is False

    # absent removes only this table, and with it the path
    res = run_module(MODULE, {"state": "absent"}, netns=gw_a)
    assert res["changed"] is True
    assert tables(gw_a) == [("ip", "lfab_cni"), ("inet", "lfab_filter")]
    assert ask(pod_a, "10.71.0.9", "10.243.0.2", timeout=1)[0].startswith("ERROR")


def test_tunnel_change_is_detected_and_rewritten(tunnel_clusters):
    _pod_a, gw_a, _gw_b, _pod_b = tunnel_clusters
    assert run_module(MODULE, tunnel_args("a"), netns=gw_a)["changed"] is True
    changed = {"tunnels": [dict(tunnel_args("a")["tunnels"][0], mark=0x99, output=False)]}
    res = run_module(MODULE, changed, netns=gw_a, check=True, diff=True)
    assert res["changed"] is True
    assert "meta mark set 0x00000012" in res["diff"]["before"] and "meta mark set 0x00000099" in res["diff"]["after"]
    assert "chain mangle_output" not in res["diff"]["after"] and "chain output" not in res["diff"]["after"]
    assert run_module(MODULE, changed, netns=gw_a)["changed"] is True
    chains = [o["chain"]["name"] for o in nft_json(gw_a, "list", "table", "ip", "liqo_fabric_nat")["nftables"] if "chain" in o]
    assert sorted(chains) == ["mangle_prerouting", "postrouting", "prerouting"]
    assert run_module(MODULE, changed, netns=gw_a)["changed"] is False

    bad = {"tunnels": [dict(tunnel_args("a")["tunnels"][0], mark=0x100000000, remote_remapped="10.71.0.0/24")]}
    res = run_module(MODULE, bad, netns=gw_a)
    assert res.get("failed") is True
    assert "tunnels[0].mark: 4294967296 is outside" in res["msg"] and "tunnels[0].remote_remapped: prefix length /24" in res["msg"]
