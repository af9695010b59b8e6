"""WireGuard through the modules only, on the real kernel: two netns joined by a veth get a tunnel.

The kernel here may lack the wireguard module; then the modules pick wireguard-go (reported as `backend`).
Every assertion about state reads it back from the system (link, UAPI socket, /proc), not from results.
"""
import copy
import os
import secrets
import shutil
import stat
import subprocess
import sys

import pytest

from tests.ansible_run import ROOT, run_module
from tests.lab import netns

pytestmark = pytest.mark.root

sys.path.insert(0, os.path.join(ROOT, "build", "collections"))
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.kernel import kernel_has_wireguard  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.keys import (  # noqa: E402
    decode_key, generate_keypair, generate_private_key, public_key)
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.userspace import (  # noqa: E402
    RUN_DIR, UserspaceBackend, _proc_alive)


def link_exists(ns, ifname):
    return netns.run(["ip", "-n", ns, "link", "show", ifname], check=False).returncode == 0


def uapi_get(ifname):
    return UserspaceBackend(ifname).read()


def ping(ns, dst, attempts=3):
    for _attempt in range(attempts):
        if netns.exec_in(ns, ["ping", "-c1", "-W1", dst], check=False).returncode == 0:
            return True
    return False


def pid_alive(pid):
    return _proc_alive(pid)


def no_secret(result, *secrets_):
    text = result["stdout"] + result["stderr"]
    return all(s not in text for s in secrets_)


@pytest.fixture
def wg_names(veth_pair):
    """(ns_a, ns_b, if_a, if_b) with host-unique interface names; tears down whatever a test left."""
    a, b = veth_pair
    tag = secrets.token_hex(2)
    ifa, ifb = f"lfab{tag}wga", f"lfab{tag}wgb"
    yield a, b, ifa, ifb
    for ns, ifname in ((a, ifa), (b, ifb)):
        code = ("import sys; sys.path.insert(0, %r); from ansible_collections.liqo.fabric.plugins.module_utils.wireguard "
                "import interface as w; w.ensure_absent(%r)" % (os.path.join(ROOT, "build", "collections"), ifname))
        netns.exec_in(ns, [sys.executable, "-c", code], check=False)
        for suffix in (".sock", ".pid", ".log", ".pid.tmp"):
            try:
                os.unlink(os.path.join(RUN_DIR, ifname + suffix))
            except FileNotFoundError:
                pass


def iface_args(ifname, priv, port, addr, peer_pub, peer_ep, peer_ip, **extra):
    args = {"name": ifname, "private_key": priv, "listen_port": port, "addresses": [addr],
            "peers": [{"public_key": peer_pub, "endpoint": peer_ep, "allowed_ips": [peer_ip]}]}
    args.update(extra)
    return args


def test_tunnel_lifecycle(wg_names, tmp_path):
    a, b, ifa, ifb = wg_names
    # keys: A from a 0600 key file made by wireguard_keypair, B as a value
    key_file = str(tmp_path / "a.key")
    r = run_module("liqo.fabric.wireguard_keypair", {"path": key_file})
    assert r["changed"] and stat.S_IMODE(os.stat(key_file).st_mode) == 0o600, r.get("msg")
    priv_a = open(key_file).read().strip()
    pub_a = r["public_key"]
    assert public_key(priv_a) == pub_a and priv_a not in r["stdout"]
    priv_b, pub_b = generate_keypair()

    args_a = iface_args(ifa, None, 51820, "10.80.0.1/30", pub_b, "192.168.77.2:51820", "10.80.0.2/32")
    del args_a["private_key"]
    args_a["private_key_file"] = key_file
    args_b = iface_args(ifb, priv_b, 51820, "10.80.0.2/30", pub_a, "192.168.77.1:51820", "10.80.0.1/32")

    # check mode on a missing interface: predicts a change, creates nothing
    r = run_module("liqo.fabric.wireguard_interface", args_b, netns=b, check=True, diff=True)
    assert r["changed"] and not r.get("failed"), r.get("msg")
    assert r["diff"]["before"]["state"] == "absent" and r["diff"]["after"]["public_key"] == pub_b
    assert not link_exists(b, ifb) and not os.path.exists(f"{RUN_DIR}/{ifb}.sock")

    ra = run_module("liqo.fabric.wireguard_interface", args_a, netns=a)
    rb = run_module("liqo.fabric.wireguard_interface", args_b, netns=b, diff=True)
    for r in (ra, rb):
        assert r["changed"] and not r.get("failed"), r.get("msg")
        assert r["backend"] == ("kernel" if kernel_has_wireguard() else "wireguard-go")
        assert no_secret(r, priv_a, priv_b)
    assert rb["interface"]["public_key"] == pub_b and rb["interface"]["mtu"] == 1340
    if rb["backend"] == "wireguard-go":
        for ifname, r in ((ifa, ra), (ifb, rb)):
            pid_file = f"{RUN_DIR}/{ifname}.pid"
            assert stat.S_IMODE(os.stat(pid_file).st_mode) == 0o600
            assert int(open(pid_file).read()) == r["pid"] and pid_alive(r["pid"])
        dev = uapi_get(ifb)
        assert dev.private_key == decode_key(priv_b, "k") and dev.listen_port == 51820
        assert dev.peers[pub_a].allowed_ips == ["10.80.0.1/32"]

    # the process outlives ansible and the tunnel carries traffic
    assert ping(a, "10.80.0.2"), "no ping through the tunnel"
    assert ping(b, "10.80.0.1")

    # second identical run: no change, nothing written
    for args, ns in ((args_a, a), (args_b, b)):
        r = run_module("liqo.fabric.wireguard_interface", args, netns=ns)
        assert r["changed"] is False and r["writes"] == 0, r.get("msg")

    # health read-back
    r = run_module("liqo.fabric.wireguard_info", {"name": ifa}, netns=a)
    assert r["exists"] and not r["changed"] and no_secret(r, priv_a)
    (peer,) = r["interface"]["peers"]
    assert peer["public_key"] == pub_b and peer["connected"] and peer["latest_handshake_age"] < 60
    assert peer["rx_bytes"] > 0 and peer["tx_bytes"] > 0 and peer["endpoint"] == "192.168.77.2:51820"

    # check mode with changes: predicted, not applied
    before = uapi_get(ifb) if rb["backend"] == "wireguard-go" else None
    changed_b = dict(args_b, addresses=["10.80.0.2/30", "10.90.0.2/24"], mtu=1300)
    changed_b["peers"] = [dict(args_b["peers"][0], persistent_keepalive=25)]
    r = run_module("liqo.fabric.wireguard_interface", changed_b, netns=b, check=True, diff=True)
    assert r["changed"] and r["diff"]["after"]["peers"][0]["persistent_keepalive"] == 25
    assert r["diff"]["after"]["addresses"] == ["10.80.0.2/30", "10.90.0.2/24"]
    assert "10.90.0.2" not in netns.run(["ip", "-n", b, "addr", "show", ifb]).stdout
    assert "mtu 1340" in netns.run(["ip", "-n", b, "link", "show", ifb]).stdout
    if before is not None:
        assert uapi_get(ifb).peers[pub_a].persistent_keepalive == before.peers[pub_a].persistent_keepalive == 0
    # ...and applied for real
    r = run_module("liqo.fabric.wireguard_interface", changed_b, netns=b)
    assert r["changed"] and r["writes"] >= 1
    assert "10.90.0.2/24" in netns.run(["ip", "-n", b, "addr", "show", ifb]).stdout
    if before is not None:
        assert uapi_get(ifb).peers[pub_a].persistent_keepalive == 25

    # exclusive: an extra peer is kept without it, removed with it
    extra = generate_keypair()[1]
    more = dict(changed_b, peers=changed_b["peers"] + [{"public_key": extra, "allowed_ips": ["10.99.0.0/24"]}])
    assert run_module("liqo.fabric.wireguard_interface", more, netns=b)["changed"]
    assert not run_module("liqo.fabric.wireguard_interface", changed_b, netns=b)["changed"]
    r = run_module("liqo.fabric.wireguard_interface", dict(changed_b, exclusive=True), netns=b, diff=True)
    assert r["changed"] and [p["public_key"] for p in r["diff"]["before"]["peers"]] == sorted([pub_a, extra])
    if before is not None:
        assert set(uapi_get(ifb).peers) == {pub_a}

    # absent: link, process, socket and pid file gone; check mode first changes nothing
    r = run_module("liqo.fabric.wireguard_interface", {"name": ifb, "state": "absent"}, netns=b, check=True)
    assert r["changed"] and link_exists(b, ifb)
    for ns, ifname, res in ((a, ifa, ra), (b, ifb, rb)):
        r = run_module("liqo.fabric.wireguard_interface", {"name": ifname, "state": "absent"}, netns=ns)
        assert r["changed"] and not r.get("failed"), r.get("msg")
        assert not link_exists(ns, ifname)
        for suffix in (".sock", ".pid", ".log"):
            assert not os.path.exists(f"{RUN_DIR}/{ifname}{suffix}")
        if res.get("pid"):
            assert not pid_alive(res["pid"])
        assert not run_module("liqo.fabric.wireguard_interface", {"name": ifname, "state": "absent"}, netns=ns)["changed"]
    r = run_module("liqo.fabric.wireguard_info", {"name": ifa}, netns=a)
    assert r["exists"] is False


def test_wrong_public_key_gets_no_traffic(wg_names):
    a, b, ifa, ifb = wg_names
    priv_a, pub_a = generate_keypair()
    priv_b, pub_b = generate_keypair()
    wrong = generate_keypair()[1]
    # A believes B's key is `wrong`: handshakes from either side are rejected
    r1 = run_module("liqo.fabric.wireguard_interface",
                    iface_args(ifa, priv_a, 51820, "10.80.0.1/30", wrong, "192.168.77.2:51820", "10.80.0.2/32"), netns=a)
    r2 = run_module("liqo.fabric.wireguard_interface",
                    iface_args(ifb, priv_b, 51820, "10.80.0.2/30", pub_a, "192.168.77.1:51820", "10.80.0.1/32"), netns=b)
    assert r1["changed"] and r2["changed"], (r1.get("msg"), r2.get("msg"))
    assert not ping(a, "10.80.0.2", attempts=2)
    assert not ping(b, "10.80.0.1", attempts=1)
    info = run_module("liqo.fabric.wireguard_info", {"name": ifb}, netns=b)
    (peer,) = info["interface"]["peers"]
    assert peer["latest_handshake"] is None and peer["rx_bytes"] == 0 and not peer["connected"]
    # the veth itself works, so the tunnel is what blocks
    assert ping(a, "192.168.77.2")


@pytest.mark.parametrize("bad, field", [
    ({"private_key": "not-a-key"}, "private_key"),
    ({"peers": [{"public_key": "AAAA", "allowed_ips": ["10.80.0.2/32"]}]}, "peers[0].public_key"),
    ({"peers": [{"public_key": "PUB", "allowed_ips": ["10.80.0.300/32"]}]}, "peers[0].allowed_ips[0]"),
    ({"peers": [{"public_key": "PUB", "endpoint": "192.168.77.2", "allowed_ips": []}]}, "peers[0].endpoint"),
    ({"addresses": ["10.80.0.1"]}, "addresses[0]"),
])
def test_bad_input_fails_naming_the_field_and_creates_nothing(wg_names, bad, field):
    a, ifa = wg_names[0], wg_names[2]
    priv = generate_private_key()
    peer_pub = generate_keypair()[1]
    args = iface_args(ifa, priv, 51820, "10.80.0.1/30", peer_pub, "192.168.77.2:51820", "10.80.0.2/32")
    args.update(copy.deepcopy(bad))
    for p in args["peers"]:
        if p["public_key"] == "PUB":
            p["public_key"] = peer_pub
    r = run_module("liqo.fabric.wireguard_interface", args, netns=a)
    assert r.get("failed") and field + ":" in r["msg"], r.get("msg")
    assert not link_exists(a, ifa) and not os.path.exists(f"{RUN_DIR}/{ifa}.sock")
    assert not os.path.exists(f"{RUN_DIR}/{ifa}.pid")
    assert no_secret(r, priv)


def test_name_used_in_another_netns_is_refused(wg_names):
    if kernel_has_wireguard():
        pytest.skip("kernel has the wireguard module: interface names are per netns, no shared UAPI socket")
    a, b, ifa = wg_names[:3]
    priv = generate_private_key()
    args = {"name": ifa, "private_key": priv}
    assert run_module("liqo.fabric.wireguard_interface", args, netns=a)["changed"]
    r = run_module("liqo.fabric.wireguard_interface", args, netns=b)
    assert r.get("failed") and "another network namespace" in r["msg"]
    assert not link_exists(b, ifa) and link_exists(a, ifa)
    # absent from another namespace is true there: unchanged, and the other namespace's interface, its
    # process and socket are untouched (a gateway that moved keeps its name)
    r = run_module("liqo.fabric.wireguard_interface", {"name": ifa, "state": "absent"}, netns=b)
    assert not r.get("failed") and not r["changed"] and link_exists(a, ifa)
    assert os.path.exists(f"{RUN_DIR}/{ifa}.sock") and os.path.exists(f"{RUN_DIR}/{ifa}.pid")


def test_keypair_module(tmp_path):
    path = str(tmp_path / "k")
    r1 = run_module("liqo.fabric.wireguard_keypair", {"path": path}, check=True)
    assert r1["changed"] and not os.path.exists(path)
    r2 = run_module("liqo.fabric.wireguard_keypair", {"path": path})
    r3 = run_module("liqo.fabric.wireguard_keypair", {"path": path})
    priv = open(path).read().strip()
    assert r2["changed"] and not r3["changed"] and r2["public_key"] == r3["public_key"] == public_key(priv)
    assert "private_key" not in r2 and no_secret(r2, priv) and no_secret(r3, priv)
    if shutil.which("wg"):
        wg_out = subprocess.run(["wg", "pubkey"], input=priv, capture_output=True, text=True, check=True).stdout
        assert wg_out.strip() == r2["public_key"]
    r = run_module("liqo.fabric.wireguard_keypair", {"return_private_key": True})
    assert r.get("failed") and "no_log" in r["msg"]
    os.chmod(path, 0o644)
    r = run_module("liqo.fabric.wireguard_keypair", {"path": path})
    assert r.get("failed") and "path:" in r["msg"] and no_secret(r, priv)
