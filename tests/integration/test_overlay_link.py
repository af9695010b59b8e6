"""Overlay links on a real kernel through liqo.fabric.overlay_link, between the two netns of `veth_pair`
(192.168.77.1 / .2 on eth0). Overlay addresses 10.80.0.1/.2."""
import os
import secrets

import pytest

from tests.ansible_run import run_module
from tests.lab import netns

pytestmark = pytest.mark.root

NAME = "ov0"


def kernel_has_geneve(ns):
    """Independent of the module: loaded/built in, or a geneve link can be created (then removed)."""
    if os.path.isdir("/sys/module/geneve"):
        return True
    name = "lfgt" + secrets.token_hex(3)
    proc = netns.run(["ip", "-n", ns, "link", "add", name, "type", "geneve", "id", "1", "remote", "127.0.0.1"], check=False)
    if proc.returncode == 0:
        netns.run(["ip", "-n", ns, "link", "del", name])
        return True
    return False


def args(side, **kw):
    a, b = ("192.168.77.1", "192.168.77.2") if side == 0 else ("192.168.77.2", "192.168.77.1")
    base = {"name": NAME, "type": "vxlan", "vni": 4242, "remotes": [b], "local": a, "dev": "eth0",
            "addresses": [f"10.80.0.{side + 1}/24"], "mtu": 1340}
    base.update(kw)
    return base


def ok(result):
    assert result["rc"] == 0 and not result.get("failed"), result.get("msg") or result["stderr"]
    return result


def link(ns):
    proc = netns.run(["ip", "-n", ns, "-d", "link", "show", NAME], check=False)
    return proc.stdout if proc.returncode == 0 else ""


def fdb(ns):
    return netns.run(["bridge", "-n", ns, "fdb", "show", "dev", NAME]).stdout


def pings(ns, addr, deadline=3):
    """One answered echo within `deadline` s (ping keeps sending once a second, so ARP may retry)."""
    return netns.exec_in(ns, ["ping", "-c", "1", "-w", str(deadline), addr], check=False).returncode == 0


def test_vxlan_overlay_carries_ping(veth_pair):
    a, b = veth_pair
    r = ok(run_module("liqo.fabric.overlay_link", args(0), netns=a, check=True, diff=True))
    assert r["changed"] and r["type"] == "vxlan" and r["ifindex"] is None and link(a) == ""
    assert r["diff"]["after"]["fdb"] == ["192.168.77.2"] and r["diff"]["before"] == {}

    r = ok(run_module("liqo.fabric.overlay_link", args(0), netns=a))
    assert r["changed"] and r["type"] == "vxlan" and r["dst_port"] == 4789
    ok(run_module("liqo.fabric.overlay_link", args(1), netns=b))
    shown = link(a)
    assert "vxlan id 4242" in shown and "local 192.168.77.1 dev eth0" in shown and "dstport 4789" in shown
    assert "noudpcsum" in shown  # zero outer checksum (RFC 7348)
    assert "nolearning" in shown and "mtu 1340" in shown
    assert "00:00:00:00:00:00 dst 192.168.77.2 self permanent" in fdb(a)
    assert pings(a, "10.80.0.2"), "ping crosses the VXLAN overlay"

    r = ok(run_module("liqo.fabric.overlay_link", args(0), netns=a))
    assert not r["changed"] and r["actions"] == []

    # FDB entries are an exact set: a stray one is removed, the MTU is changed in place.
    netns.run(["bridge", "-n", a, "fdb", "append", "00:00:00:00:00:00", "dev", NAME, "dst", "192.168.77.9"])
    index = r["ifindex"]
    r = ok(run_module("liqo.fabric.overlay_link", args(0, mtu=1300), netns=a))
    assert r["changed"] and r["ifindex"] == index, "mutable changes keep the link"
    assert "192.168.77.9" not in fdb(a) and "192.168.77.2" in fdb(a) and "mtu 1300" in link(a)

    # A new VNI cannot be changed in place: the link is recreated, and both ends agree again.
    r = ok(run_module("liqo.fabric.overlay_link", args(0, vni=4343), netns=a, check=True))
    assert r["changed"] and "vxlan id 4242" in link(a)
    r = ok(run_module("liqo.fabric.overlay_link", args(0, vni=4343), netns=a))
    assert r["actions"][:2] == [f"{NAME}: delete link", f"{NAME}: create link"] and "vxlan id 4343" in link(a)
    assert not pings(a, "10.80.0.2", deadline=1), "VNI mismatch: no traffic"
    ok(run_module("liqo.fabric.overlay_link", args(1, vni=4343), netns=b))
    # the failed probe above left a FAILED neighbour entry behind: start from a clean one
    netns.run(["ip", "-n", a, "neigh", "flush", "dev", NAME])
    assert pings(a, "10.80.0.2", deadline=10)

    r = ok(run_module("liqo.fabric.overlay_link", {"name": NAME, "state": "absent"}, netns=a, check=True))
    assert r["changed"] and link(a)
    r = ok(run_module("liqo.fabric.overlay_link", {"name": NAME, "state": "absent"}, netns=a))
    assert r["changed"] and link(a) == ""
    r = ok(run_module("liqo.fabric.overlay_link", {"name": NAME, "state": "absent"}, netns=a))
    assert not r["changed"]


def test_a_moved_remote_forgets_the_old_ends_neighbours(veth_pair):
    """The far end of a link replaced (the active gateway pod moved): the neighbour entries learnt over it name
    the old end's MAC, which the new end drops; they go with the remote. An unchanged remote keeps them."""
    a, b = veth_pair
    ok(run_module("liqo.fabric.overlay_link", args(0), netns=a))
    ok(run_module("liqo.fabric.overlay_link", args(1), netns=b))
    assert pings(a, "10.80.0.2")
    assert "10.80.0.2 lladdr" in netns.run(["ip", "-n", a, "neigh", "show", "dev", NAME]).stdout
    ok(run_module("liqo.fabric.overlay_link", args(0, mtu=1300), netns=a))   # no FDB change: entries kept
    assert "10.80.0.2 lladdr" in netns.run(["ip", "-n", a, "neigh", "show", "dev", NAME]).stdout
    # b's end replaced by a new link (a new MAC) behind another address of b
    netns.run(["ip", "-n", b, "addr", "add", "192.168.77.12/24", "dev", "eth0"])
    ok(run_module("liqo.fabric.overlay_link", {"name": NAME, "state": "absent"}, netns=b))
    ok(run_module("liqo.fabric.overlay_link", args(1, local="192.168.77.12"), netns=b))
    r = ok(run_module("liqo.fabric.overlay_link", args(0, remotes=["192.168.77.12"]), netns=a))
    assert r["changed"] and "192.168.77.12" in fdb(a) and "192.168.77.2 " not in fdb(a)
    assert "10.80.0.2" not in netns.run(["ip", "-n", a, "neigh", "show", "dev", NAME]).stdout
    assert pings(a, "10.80.0.2"), "the new end answers at once"


def test_auto_picks_what_the_kernel_has(veth_pair):
    a, _b = veth_pair
    expected = "geneve" if kernel_has_geneve(a) else "vxlan"
    r = ok(run_module("liqo.fabric.overlay_link", args(0, type="auto"), netns=a))
    assert r["type"] == expected and r["geneve_supported"] == (expected == "geneve")
    assert f"{expected} id 4242" in link(a)
    assert [ln for ln in netns.run(["ip", "-n", a, "-o", "link"]).stdout.splitlines() if "lfgp" in ln] == [], \
        "the geneve probe leaves nothing behind"
    assert not ok(run_module("liqo.fabric.overlay_link", args(0, type="auto"), netns=a))["changed"]


def test_geneve_overlay_carries_ping(veth_pair):
    a, b = veth_pair
    if not kernel_has_geneve(a):
        r = run_module("liqo.fabric.overlay_link", args(0, type="geneve"), netns=a)
        assert r.get("failed") and "no geneve support" in r["msg"] and link(a) == ""
        pytest.skip("kernel has no geneve module")
    r = ok(run_module("liqo.fabric.overlay_link", args(0, type="geneve", dev=None), netns=a))
    assert r["type"] == "geneve" and r["dst_port"] == 6081
    ok(run_module("liqo.fabric.overlay_link", args(1, type="geneve", dev=None), netns=b))
    assert "geneve id 4242 remote 192.168.77.2" in link(a)
    assert pings(a, "10.80.0.2")
    assert not ok(run_module("liqo.fabric.overlay_link", args(0, type="geneve", dev=None), netns=a))["changed"]


def test_bad_input_fails_before_any_change(veth_pair):
    a, _b = veth_pair
    r = run_module("liqo.fabric.overlay_link", args(0, vni=2 ** 24), netns=a)
    assert r.get("failed") and "vni: 16777216 is out of range" in r["msg"]
    r = run_module("liqo.fabric.overlay_link", args(0, dev="nosuch0"), netns=a)
    assert r.get("failed") and "dev: 'nosuch0' is not a device of this host" in r["msg"]
    r = run_module("liqo.fabric.overlay_link", args(0, addresses=["10.80.0.1"]), netns=a)
    assert r.get("failed") and "addresses[0]: '10.80.0.1' needs a prefix length" in r["msg"]
    assert link(a) == ""
