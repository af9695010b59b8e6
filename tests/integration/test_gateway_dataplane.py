"""liqo.fabric.gateway_dataplane on real netns: two gateway hosts joined by a veth build a WireGuard tunnel with
the NAT table, routing table and rules in one module call each, probe it, rerun with no write, refuse bad input
before writing anything, and tear down to zero residue. Run through ansible-playbook (run_module)."""
import os
import re
import secrets
import subprocess
import sys

import pytest

from tests.ansible_run import ROOT, run_module
from tests.lab import netns

pytestmark = pytest.mark.root

sys.path.insert(0, os.path.join(ROOT, "build", "collections"))
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.keys import generate_keypair  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.userspace import RUN_DIR  # noqa: E402

MODULE = "liqo.fabric.gateway_dataplane"


def entry(tag, role, peer_pub, endpoint, mark):
    """A gateway_plan entry as the planner makes it (see module_utils/gateway/plan.py)."""
    local, remote = ("169.254.18.1/30", "169.254.18.2") if role == "Server" else ("169.254.18.2/30", "169.254.18.1")
    iface = f"lfab{tag}{role[0].lower()}"
    return {"kind": "Gateway" + role, "role": role, "name": "peer", "namespace": "liqo-tenant-x", "interface": iface,
            "nat_table": f"lfgw_{tag}{role[0].lower()}", "mark": mark, "table": mark, "rule_priority": 1800,
            "mtu": 1340, "listen_port": 51820 if role == "Server" else None, "transit_address": local,
            "probe_address": remote, "ready": True, "error": None,
            "peer": {"public_key": peer_pub, "endpoint": endpoint, "allowed_ips": ["0.0.0.0/0"],
                     "persistent_keepalive": 25 if role == "Client" else 0},
            "nat_tunnel": {"interface": iface, "mark": mark, "remote_original": "10.243.0.0/16",
                           "remote_remapped": "10.71.0.0/16" if role == "Client" else "10.72.0.0/16", "output": True}}


@pytest.fixture
def pair(veth_pair, tmp_path):
    a, b = veth_pair
    tag = secrets.token_hex(2)
    (priv_s, pub_s), (priv_c, pub_c) = generate_keypair(), generate_keypair()
    server = entry(tag, "Server", pub_c, None, 24001)
    client = entry(tag, "Client", pub_s, "192.168.77.2:51820", 24002)
    ctx = {"client_ns": a, "server_ns": b, "server": server, "client": client,
           "keys": {server["interface"]: priv_s, client["interface"]: priv_c}, "privs": (priv_s, priv_c),
           "sysctl": str(tmp_path / "sysctl.conf")}
    yield ctx
    for ns, gw in ((a, client), (b, server)):
        run_module(MODULE, {"gateways": [gw], "state": "absent"}, netns=ns)


def build(ctx, side, check=False, diff=False, **extra):
    gw = ctx[side]
    args = {"gateways": [gw], "private_keys": {gw["interface"]: ctx["keys"][gw["interface"]]}}
    args.update(extra)
    return run_module(MODULE, args, netns=ctx[side + "_ns"], check=check, diff=diff)


def residue(ns, gw):
    links = netns.exec_in(ns, ["ip", "-br", "link"]).stdout
    tables = netns.exec_in(ns, ["nft", "list", "tables"]).stdout
    rules = netns.exec_in(ns, ["ip", "rule"]).stdout
    routes = netns.exec_in(ns, ["ip", "route", "show", "table", str(gw["table"])], check=False).stdout
    sockets = [f for f in os.listdir(RUN_DIR) if f.startswith(gw["interface"])] if os.path.isdir(RUN_DIR) else []
    return [x for x, present in (("link", gw["interface"] in links), ("nft", gw["nat_table"] in tables),
                                 ("rule", str(gw["table"]) in rules), ("route", routes.strip() != ""),
                                 ("socket", bool(sockets))) if present]


def test_build_probe_rerun_and_teardown(pair):
    srv = build(pair, "server", sysctl_file=pair["sysctl"])
    assert srv["rc"] == 0 and srv["changed"], srv
    cli = build(pair, "client", probe_wait=10)
    assert cli["rc"] == 0 and cli["changed"], cli
    probe = cli["probes"][pair["client"]["interface"]]
    assert probe["connected"] and probe["reason"] == "Established", probe
    part = cli["gateways"][0]
    assert part["wireguard"]["created"] and part["nat"]["changed"] and part["routes"]["added"] and part["rules"]["added"]
    # the wireguard-go it runs, as the binary prints its version; the one installed here has the offloads
    printed = subprocess.run(["wireguard-go", "--version"], capture_output=True, text=True, check=False).stdout
    assert cli["wireguard_go"]["version"] == re.search(r"v(\d+\.\d+\.\d+)", printed).group(1)
    assert cli["wireguard_go"]["offloads"] and cli["wireguard_go"]["warning"] is None
    assert not any("wireguard-go" in w for w in cli.get("warnings") or [])

    ns, gw = pair["client_ns"], pair["client"]
    rules = netns.exec_in(ns, ["ip", "rule"]).stdout
    assert f"fwmark {hex(gw['mark'])} lookup {gw['table']}" in rules and f"to 10.71.0.0/16 lookup {gw['table']}" in rules
    assert f"dev {gw['interface']}" in netns.exec_in(ns, ["ip", "route", "show", "table", str(gw["table"])]).stdout
    nft = netns.exec_in(ns, ["nft", "list", "table", "ip", gw["nat_table"]]).stdout
    assert "prefix to 10.243.0.0/16" in nft and "10.71.0.0/16" in nft and "maxseg size set rt mtu" in nft, nft
    assert netns.exec_in(ns, ["cat", "/proc/sys/net/ipv4/ip_forward"]).stdout.strip() == "1"
    with open(pair["sysctl"], encoding="ascii") as f:
        assert "net.ipv4.conf.all.rp_filter = 2" in f.read()

    again = build(pair, "client", probe_wait=5)
    assert not again["changed"] and again["gateways"][0]["writes"] == 0, again["gateways"]
    for result in (srv, cli, again):
        assert all(p not in result["stdout"] + result["stderr"] for p in pair["privs"])

    gone = run_module(MODULE, {"gateways": [gw], "state": "absent"}, netns=ns)
    assert gone["changed"]
    assert residue(ns, gw) == []
    assert not run_module(MODULE, {"gateways": [gw], "state": "absent"}, netns=ns)["changed"]


def test_check_mode_writes_nothing(pair):
    gw = pair["client"]
    res = run_module(MODULE, {"gateways": [gw], "private_keys": {gw["interface"]: pair["keys"][gw["interface"]]}},
                     netns=pair["client_ns"], check=True, diff=True)
    assert res["rc"] == 0 and res["changed"], res
    assert res["gateways"][0]["routes"]["added"] and res["probes"] == {}
    assert residue(pair["client_ns"], pair["client"]) == []
    assert any("wireguard" in d.get("after_header", "") and "lfab" in d["after"] for d in res["diff"])


@pytest.mark.parametrize("field,value,expect", [
    ("mtu", 100, "mtu"),
    ("nat_tunnel", {"interface": "x", "mark": 1, "remote_original": "10.243.0.0/33", "remote_remapped": "10.71.0.0/16"},
     "10.243.0.0/33"),
    ("peer", {"public_key": "not-a-key", "allowed_ips": ["0.0.0.0/0"]}, "public_key"),
    ("table", 254, "table"),
])
def test_bad_input_names_the_field_and_writes_nothing(pair, field, value, expect):
    server = dict(pair["server"], **{field: value})
    good = pair["client"]
    res = run_module(MODULE, {"gateways": [good, server],
                              "private_keys": {good["interface"]: pair["keys"][good["interface"]],
                                               server["interface"]: pair["keys"][server["interface"]]}},
                     netns=pair["client_ns"])
    assert res["rc"] != 0 and expect in res["msg"] and "gateways[1]" in res["msg"], res.get("msg")
    # the valid first gateway was not built either: validation precedes every write
    assert residue(pair["client_ns"], good) == []


def test_missing_private_key_is_refused(pair):
    res = run_module(MODULE, {"gateways": [pair["client"]], "private_keys": {"other": "x"}}, netns=pair["client_ns"])
    assert res["rc"] != 0 and "private_keys" in res["msg"] and pair["client"]["interface"] in res["msg"]
    assert residue(pair["client_ns"], pair["client"]) == []


def test_handover_between_namespaces_of_one_machine(pair, netns_factory):
    """Failover between two hosts of one machine: the old host tears down while the new one builds the same
    interface name; the builder waits for the name instead of failing."""
    import threading  # pylint: disable=import-outside-toplevel
    build(pair, "server")
    assert build(pair, "client", probe_wait=10)["probes"][pair["client"]["interface"]]["connected"]
    (standby,) = netns_factory("c")
    netns.ip_batch([f"link add eth1 netns {standby} type veth peer name eth1 netns {pair['server_ns']}"])
    netns.ip_batch(["addr add 192.168.78.1/24 dev eth1", "link set eth1 up"], netns=standby)
    netns.ip_batch(["addr add 192.168.78.2/24 dev eth1", "link set eth1 up"], netns=pair["server_ns"])
    gw = dict(pair["client"], peer=dict(pair["client"]["peer"], endpoint="192.168.78.2:51820"))
    out = {}

    def new_host():
        out["res"] = run_module(MODULE, {"gateways": [gw], "private_keys": {gw["interface"]: pair["keys"][gw["interface"]]},
                                         "handover_wait": 15, "probe_wait": 10}, netns=standby)
    t = threading.Thread(target=new_host)
    t.start()
    old = run_module(MODULE, {"gateways": [pair["client"]], "state": "absent"}, netns=pair["client_ns"])
    t.join()
    res = out["res"]
    assert old["changed"] and res["rc"] == 0, res.get("msg")
    assert res["probes"][gw["interface"]]["connected"], res["probes"]
    # the old host keeps nothing (the control socket of that name is now the new host's)
    assert [r for r in residue(pair["client_ns"], gw) if r != "socket"] == []
    assert res["gateways"][0]["wireguard"]["created"]
    assert run_module(MODULE, {"gateways": [gw], "state": "absent"}, netns=standby)["changed"]
    assert residue(standby, gw) == []


SYSCTL_PATHS = {"net.ipv4.ip_forward": "/proc/sys/net/ipv4/ip_forward",
                "net.ipv4.conf.all.rp_filter": "/proc/sys/net/ipv4/conf/all/rp_filter"}


def sysctls(ns):
    return {name: netns.exec_in(ns, ["cat", path]).stdout.strip() for name, path in SYSCTL_PATHS.items()}


def ping(ns, dst, size=1312):
    """Full-MTU pings through a tunnel (1340 - 28)."""
    return netns.exec_in(ns, ["ping", "-c", "3", "-i", "0.2", "-W", "2", "-M", "do", "-s", str(size), dst], check=False).returncode == 0


def test_two_gateways_on_one_host_share_the_sysctls_and_the_last_restores_them(pair, netns_factory):
    """The host (server_ns) runs one gateway per peer: the values found before the first are recorded once,
    kept while either runs, and put back when the last goes."""
    host, rec = pair["server_ns"], pair["sysctl"]
    netns.sysctl_in(host, {"net.ipv4.ip_forward": "0", "net.ipv4.conf.all.rp_filter": "1"})
    found = sysctls(host)
    (other,) = netns_factory("c")
    netns.ip_batch([f"link add eth1 netns {other} type veth peer name eth1 netns {host}"])
    netns.ip_batch(["addr add 192.168.78.1/24 dev eth1", "link set eth1 up"], netns=other)
    netns.ip_batch(["addr add 192.168.78.2/24 dev eth1", "link set eth1 up"], netns=host)
    tag = secrets.token_hex(2)
    (priv_s2, pub_s2), (priv_c2, pub_c2) = generate_keypair(), generate_keypair()
    s2 = dict(entry(tag, "Server", pub_c2, None, 24003), listen_port=51821, transit_address="169.254.18.5/30",
              probe_address="169.254.18.6")
    c2 = dict(entry(tag, "Client", pub_s2, "192.168.78.2:51821", 24004), transit_address="169.254.18.6/30",
              probe_address="169.254.18.5")
    s1 = pair["server"]
    try:
        first = build(pair, "server", sysctl_file=rec)
        assert set(first["sysctls"]) == {rec, *SYSCTL_PATHS}, first["sysctls"]
        second = run_module(MODULE, {"gateways": [s2], "private_keys": {s2["interface"]: priv_s2}, "sysctl_file": rec},
                            netns=host, diff=True)
        assert second["rc"] == 0 and second["sysctls"] == [rec], second.get("msg")  # only the list of gateways grew
        assert sysctls(host) == {"net.ipv4.ip_forward": "1", "net.ipv4.conf.all.rp_filter": "2"}
        with open(rec, encoding="ascii") as f:
            text = f.read()
        assert "net.ipv4.conf.all.rp_filter = 2" in text and s1["interface"] in text and s2["interface"] in text
        assert "net.ipv4.conf.all.rp_filter=1" in text  # the value found before the first gateway
        assert build(pair, "client", probe_wait=10)["probes"][pair["client"]["interface"]]["connected"]
        res = run_module(MODULE, {"gateways": [c2], "private_keys": {c2["interface"]: priv_c2}, "probe_wait": 10}, netns=other)
        assert res["probes"][c2["interface"]]["connected"], res["probes"]

        gone = run_module(MODULE, {"gateways": [s1], "state": "absent", "sysctl_file": rec}, netns=host)
        assert gone["changed"] and gone["sysctls"] == [rec] and gone["sysctls_restored"] == {}
        assert residue(host, s1) == [] and os.path.exists(rec)
        assert sysctls(host) == {"net.ipv4.ip_forward": "1", "net.ipv4.conf.all.rp_filter": "2"}
        with open(rec, encoding="ascii") as f:
            text = f.read()
        assert s1["interface"] not in text and s2["interface"] in text
        assert ping(other, "169.254.18.5")  # the other peer's tunnel still carries full-MTU traffic

        check = run_module(MODULE, {"gateways": [s2], "state": "absent", "sysctl_file": rec}, netns=host, check=True, diff=True)
        assert check["changed"] and os.path.exists(rec) and sysctls(host)["net.ipv4.ip_forward"] == "1"
        diff = next(d for d in check["diff"] if d["after_header"] == "sysctls")
        assert "rp_filter = 2" in diff["before"] and "rp_filter = 1" in diff["after"], diff

        last = run_module(MODULE, {"gateways": [s2], "state": "absent", "sysctl_file": rec}, netns=host)
        assert last["changed"] and last["sysctls_restored"] == {"net.ipv4.ip_forward": "0", "net.ipv4.conf.all.rp_filter": "1"}
        assert sysctls(host) == found and not os.path.exists(rec)
        assert residue(host, s2) == []
        assert not run_module(MODULE, {"gateways": [s2], "state": "absent", "sysctl_file": rec}, netns=host)["changed"]
    finally:
        run_module(MODULE, {"gateways": [s2], "state": "absent"}, netns=host)
        run_module(MODULE, {"gateways": [c2], "state": "absent"}, netns=other)


def test_a_host_already_right_is_left_as_it_was(pair):
    host, rec = pair["server_ns"], pair["sysctl"]
    netns.sysctl_in(host, {"net.ipv4.ip_forward": "1", "net.ipv4.conf.all.rp_filter": "2"})
    res = build(pair, "server", sysctl_file=rec)
    assert res["sysctls"] == [rec]  # only the record: no value changed
    gone = run_module(MODULE, {"gateways": [pair["server"]], "state": "absent", "sysctl_file": rec}, netns=host)
    assert gone["sysctls_restored"] == {} and not os.path.exists(rec)
    assert sysctls(host) == {"net.ipv4.ip_forward": "1", "net.ipv4.conf.all.rp_filter": "2"}


def test_a_key_rotation_switch_then_peer_replacement_reconnects(pair):
    """Key rotation: the client switches to a new private key (no probe: the server cannot answer it yet), then
    the server replaces the peer: the new peer keeps the endpoint WireGuard learned for the old one, the
    server sends a datagram into the tunnel so it handshakes itself, and the tunnel is up with the new key."""
    assert build(pair, "server")["rc"] == 0
    assert build(pair, "client", probe_wait=10)["probes"][pair["client"]["interface"]]["connected"]
    srv_if, cli_if = pair["server"]["interface"], pair["client"]["interface"]
    learned = netns.exec_in(pair["server_ns"], ["wg", "show", srv_if, "endpoints"]).stdout.split()
    assert len(learned) == 2 and learned[1].startswith("192.168.77.1:"), learned
    priv_c2, pub_c2 = generate_keypair()
    pair["keys"][cli_if] = priv_c2
    switched = build(pair, "client", probe=False)
    assert switched["changed"] and switched["probes"] == {}, switched
    assert netns.exec_in(pair["client_ns"], ["wg", "show", cli_if, "public-key"]).stdout.strip() == pub_c2
    pair["server"]["peer"]["public_key"] = pub_c2
    replaced = build(pair, "server", probe_wait=10)
    part = replaced["gateways"][0]
    assert part["wireguard"]["changed"] and part["wireguard"]["handshake_kicked"], part
    assert replaced["probes"][srv_if]["connected"], replaced["probes"]
    now = netns.exec_in(pair["server_ns"], ["wg", "show", srv_if, "endpoints"]).stdout.split()
    assert now == [pub_c2, learned[1]], now
    # a rerun replaces nothing and kicks nothing
    again = build(pair, "server", probe_wait=5)
    assert not again["changed"] and not again["gateways"][0]["wireguard"]["handshake_kicked"]
    for result in (switched, replaced, again):
        assert priv_c2 not in result["stdout"] + result["stderr"]
