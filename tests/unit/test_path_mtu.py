"""spec.mtu auto: the plan's MTU and its source, the peers' agreement on the smaller value, WireGuard's padding and
overhead, the binary search, the "fragmentation needed" seen through the kernel's route exception, and the
hysteresis that lowers at once and raises only after a confirmed larger size (module_utils/gateway/path_mtu.py)."""
import os
import subprocess

import pytest

from ansible_collections.liqo.fabric.plugins.module_utils.gateway import path_mtu as pm
from ansible_collections.liqo.fabric.plugins.module_utils.gateway import peer_mtu
from ansible_collections.liqo.fabric.plugins.module_utils.gateway import plan as gw_mod
from tests.unit.test_gateway_fields import CLIENT, CLIENT_ENDPOINT, REMOTE, _gateway, _pk, _plan


# ------------------------------------------------------------------------------------------------ the plan

def test_auto_before_its_first_probe_runs_the_default_and_checks_the_tunnel_at_the_smallest_path():
    p = _plan(_gateway(CLIENT, CLIENT_ENDPOINT, mtu="auto"))
    assert p["ready"] and p["error"] is None
    assert p["mtu_auto"] and p["mtu"] == gw_mod.DEFAULT_MTU and p["mtu_source"] == "default"
    assert p["mtu_probe"] == 1216      # a 1280-byte path minus 60 bytes, a multiple of 16
    assert p["status"]["mtu"] == {"value": gw_mod.DEFAULT_MTU, "source": "default"}


def test_auto_keeps_what_its_last_probe_found():
    gw = _gateway(CLIENT, CLIENT_ENDPOINT, mtu="auto")
    gw["status"] = {"mtu": {"value": 1312, "source": "probed", "probed": 1312, "pathMTU": 1372}}
    p = _plan(gw)
    assert p["mtu"] == 1312 and p["mtu_source"] == "probed"
    assert p["status"]["mtu"] == {"value": 1312, "source": "probed", "probed": 1312, "pathMTU": 1372}


@pytest.mark.parametrize("mtu, source", [(1400, "configured"), (None, "default")])
def test_a_fixed_mtu_says_where_it_comes_from(mtu, source):
    gw = _gateway(CLIENT, CLIENT_ENDPOINT, mtu=mtu)
    if mtu is None:
        del gw["spec"]["mtu"]
    p = _plan(gw)
    assert not p["mtu_auto"] and p["mtu_probe"] == p["mtu"]
    assert p["status"]["mtu"] == {"value": p["mtu"], "source": source}


@pytest.mark.parametrize("mtu", ["Auto", "automatic", ""])
def test_another_string_is_refused_naming_auto(mtu):
    p = _plan(_gateway(CLIENT, CLIENT_ENDPOINT, mtu=mtu))
    assert p["error"]["reason"] == "InvalidMTU" and "or auto" in p["error"]["message"]
    assert "mtu" not in p["status"]


def _announcing(value):
    pk = _pk("peer", REMOTE)
    pk["metadata"]["annotations"] = {gw_mod.MTU_ANNOTATION: value}
    return pk


@pytest.mark.parametrize("announced, expected", [("1296", 1296), ("1440", 1312), ("auto", 1312), ("junk", 1312)])
def test_both_sides_agree_on_the_smaller_value(announced, expected):
    gw = _gateway(CLIENT, CLIENT_ENDPOINT, mtu="auto")
    gw["status"] = {"mtu": {"value": 1312, "source": "probed", "probed": 1312}}
    p = _plan(gw, pks=[_announcing(announced)])
    assert p["error"] is None and p["mtu"] == expected and p["status"]["mtu"]["value"] == expected
    assert p["status"]["mtu"]["probed"] == 1312          # what this side announces: its own probe, not the agreement
    assert peer_mtu.announced_mtu(p) == 1312


def test_a_fixed_peer_announcing_auto_is_no_mismatch_and_auto_announces_nothing_before_its_probe():
    p = _plan(_gateway(CLIENT, CLIENT_ENDPOINT, mtu=1340), pks=[_announcing("auto")])
    assert p["error"] is None
    assert peer_mtu.announced_mtu(_plan(_gateway(CLIENT, CLIENT_ENDPOINT, mtu="auto"))) is None


def test_the_connection_and_the_status_carry_what_a_probe_of_this_run_found():
    p = _plan(_gateway(CLIENT, CLIENT_ENDPOINT, mtu="auto"))
    probe = {"connected": True, "latency_ms": 0.2, "mtu_status": {"value": 1312, "source": "probed", "probed": 1312}}
    conn = gw_mod.connection_object(p, probe, "2026-01-01T00:00:00Z")[0]
    assert conn["status"]["mtu"] == {"value": 1312, "source": "probed"}
    assert gw_mod.published_mtu(p, probe)["probed"] == 1312
    assert gw_mod.published_mtu(p, None) == {"value": 1340, "source": "default"}


# ------------------------------------------------------------------------------------------------ the sizes

def test_overhead_and_padding_exact():
    assert pm.overhead("192.0.2.1") == 60 and pm.overhead("2001:db8::1") == 80
    assert pm.tunnel_mtu(1500, "192.0.2.1") == 1440 and pm.tunnel_mtu(1380, "192.0.2.1") == 1312
    assert pm.tunnel_mtu(1500, "2001:db8::1") == 1408
    # a full-size packet is padded up to the interface MTU, never beyond: 1340 leaves as 1400
    assert pm.outer_size(1340, 1340, "192.0.2.1") == 1400
    assert pm.outer_size(1330, 1500, "192.0.2.1") == 1404         # padded to 1344
    for mtu in range(1216, 1441, 16):                              # the MTUs auto chooses add no padding at all
        assert pm.outer_size(mtu, 1500, "192.0.2.1") == mtu + 60
    sizes = pm.candidates(1500, "192.0.2.1")
    assert sizes[0] == 1216 and sizes[-1] == 1440 and all(s % 16 == 0 for s in sizes)
    assert pm.candidates(1200, "192.0.2.1") == []


@pytest.mark.parametrize("limit", [1216, 1232, 1300, 1312, 1439, 1440])
def test_search_finds_the_largest_size_that_crosses(limit):
    sizes = pm.candidates(1500, "192.0.2.1")
    found, tried = pm.search(sizes, lambda s: s <= limit)
    assert found == max(s for s in sizes if s <= limit)
    assert len(tried) <= 4


def test_search_when_nothing_crosses():
    assert pm.search([1216, 1232], lambda s: False)[0] is None


class _Host:
    """`ip route get` / `ip link set` of a host whose path to the peer carries `path` bytes; `icmp`: the path says
    so with a "fragmentation needed" (the kernel then records the exception and fragments later datagrams)."""

    def __init__(self, path, icmp=False, local=1500):
        self.path, self.icmp, self.local, self.cached = path, icmp, local, None
        self.mtus = []

    def run(self, argv, **_kw):
        if argv[:3] == ["ip", "route", "get"]:
            out = "192.0.2.2 dev wan0 src 192.0.2.1 uid 0\n    cache"
            out += " expires 599sec mtu %d" % self.cached if self.cached else ""
            return subprocess.CompletedProcess(argv, 0, out, "")
        if argv[:3] == ["ip", "link", "set"]:
            self.mtus.append(int(argv[-1]))
            return subprocess.CompletedProcess(argv, 0, "", "")
        raise AssertionError(argv)

    def send(self, inner):
        outer = inner + 60
        if outer <= self.path:
            return True
        if self.icmp:
            self.cached = self.path
            return True   # the datagrams after the first are fragmented by the sender: the echo comes back
        return False


@pytest.mark.parametrize("icmp", [False, True], ids=["black-hole", "frag-needed"])
def test_probe_through_a_1380_path_raises_the_interface_for_the_probe_only(monkeypatch, icmp):
    host = _Host(1380, icmp)
    monkeypatch.setattr(pm, "link_mtu", lambda dev: host.local)
    res = pm.probe("lwg0", "169.254.18.1", "192.0.2.2", 1340, send=host.send, run=host.run, settle=0)
    assert res.tunnel_mtu == 1312 and res.path_mtu == 1372 and res.local_mtu == 1500 and res.device == "wan0"
    assert host.mtus == [1440, 1340]          # raised to the largest size tried, then put back
    assert res.icmp_mtu == (1380 if icmp else None)


def test_probe_below_the_current_mtu_leaves_the_interface_alone(monkeypatch):
    host = _Host(1500, local=1400)
    monkeypatch.setattr(pm, "link_mtu", lambda dev: host.local)
    res = pm.probe("lwg0", "169.254.18.1", "192.0.2.2", 1340, send=host.send, run=host.run, settle=0)
    assert res.tunnel_mtu == 1328 and host.mtus == []


def test_a_rebuild_of_a_probed_tunnel_lowers_it_but_leaves_growing_to_the_watch(monkeypatch, tmp_path):
    """gateway_dataplane probes the path at every run; once the live watch set the tunnel (status.mtu probed), a run
    lowers it at once if the path shrank but does not grow it past the watch's hysteresis (grow=False)."""
    host = _Host(1500)
    iface = {"mtu": 1232}

    def run(argv, **kw):
        out = host.run(argv, **kw)
        if argv[:3] == ["ip", "link", "set"]:
            iface["mtu"] = int(argv[-1])
        return out
    monkeypatch.setattr(pm, "LOCK_DIR", str(tmp_path))
    monkeypatch.setattr(pm, "peer_endpoint_ip", lambda interface, key=None: "192.0.2.2")
    monkeypatch.setattr(pm, "link_mtu", lambda dev: iface["mtu"] if dev == "lwg0" else host.local)
    monkeypatch.setattr(pm, "ping", lambda interface, address, size, **kw: (host.send(size + pm.ICMP_HEADERS), None))
    out = pm.probe_and_set("lwg0", "169.254.18.1", grow=False, run=run)
    assert out["mtu_status"] == {"value": 1232, "source": "probed", "probed": 1440, "pathMTU": 1500}
    assert not out["changed"] and iface["mtu"] == 1232 and host.mtus[-1] == 1232   # raised for the probe only
    host.path = 1300
    iface["mtu"] = 1312
    out = pm.probe_and_set("lwg0", "169.254.18.1", grow=False, run=run)
    assert out["changed"] and iface["mtu"] == 1232 and out["mtu_status"]["value"] == 1232
    host.path = 1500
    assert pm.probe_and_set("lwg0", "169.254.18.1", run=run)["changed"] and iface["mtu"] == 1440   # a first build
    assert os.listdir(tmp_path) == ["liqo-fabric-path-mtu-lwg0.lock"]


def test_mtu_status_caps_by_the_peer_and_keeps_the_current_when_nothing_crosses():
    assert pm.mtu_status(1440, "192.0.2.2", cap=1312) == {"value": 1312, "source": "probed", "probed": 1440,
                                                          "pathMTU": 1500}
    assert pm.mtu_status(None, "192.0.2.2", current=1340) == {"value": 1340, "source": "probed"}


# ------------------------------------------------------------------------------------------------ hysteresis

def test_hysteresis_lowers_at_once_and_raises_after_confirmation_one_change_each_way():
    h = pm.Hysteresis(1312, confirm=3)
    assert h.observe(1312) is None
    assert h.observe(1232) == 1232                  # the path shrank: at once
    assert h.observe(1232) is None
    assert [h.observe(1440), h.observe(1440)] == [None, None]
    assert h.observe(1440) == 1440                  # the third larger probe in a row
    assert [h.observe(1440) for dummy in range(5)] == [None] * 5
    assert h.changes == {"lower": 1, "raise": 1}


def test_hysteresis_forgets_a_larger_size_that_was_not_stable():
    h = pm.Hysteresis(1312, confirm=3)
    assert [h.observe(1440), h.observe(1312), h.observe(1440), h.observe(1440)] == [None] * 4
    assert h.observe(1424) == 1424                  # the smallest of the confirming probes
    assert h.observe(None) is None and h.current == 1424


# ------------------------------------------------------------------------------------------------ diagnose

def _diagnose(gateway, announced):
    from ansible_collections.liqo.fabric.plugins.module_utils.verify.diagnose import gateway_checks
    return {c["check"]: c for c in gateway_checks("local", [gateway], [], [_announcing(announced)], [], "fix")}


def test_diagnose_shows_what_auto_found_and_its_source():
    gw = _gateway(CLIENT, CLIENT_ENDPOINT, mtu="auto")
    checks = _diagnose(gw, "1312")
    assert not checks["path MTU probed"]["ok"] and "MTU equal on both sides" not in checks
    gw["status"] = {"mtu": {"value": 1312, "source": "probed", "probed": 1312, "pathMTU": 1372}}
    check = _diagnose(gw, "1312")["path MTU probed"]
    assert check["ok"] and check["detail"] == "tunnel MTU 1312 (probed), the path carries 1372, the peer announced 1312"


def test_diagnose_a_fixed_side_facing_auto_is_no_mismatch():
    gw = _gateway(CLIENT, CLIENT_ENDPOINT, mtu=1340)
    assert _diagnose(gw, "auto")["MTU equal on both sides"]["ok"]
    assert not _diagnose(gw, "1300")["MTU equal on both sides"]["ok"]


# ------------------------------------------------------------------------------------------------ the live watch

def test_watch_follows_the_path_down_at_once_and_up_once_confirmed(monkeypatch):
    host = _Host(1380)
    iface = {"mtu": 1340}
    now = [0.0]
    monkeypatch.setattr(pm, "peer_endpoint_ip", lambda interface, key=None: "192.0.2.2")
    monkeypatch.setattr(pm, "link_mtu", lambda dev: iface["mtu"] if dev == "lwg0" else host.local)

    def run(argv, **kw):
        out = host.run(argv, **kw)
        if argv[:3] == ["ip", "link", "set"]:
            iface["mtu"] = int(argv[-1])
        return out
    watch = pm.Watch("lwg0", "169.254.18.1", period=10, confirm=3, run=run, send=host.send, clock=lambda: now[0])
    assert watch.step() == {"value": 1312, "source": "probed", "probed": 1312, "pathMTU": 1372}   # the first probe
    assert iface["mtu"] == 1312 and watch.step() is None                     # not due before the period
    host.path = 1300                                                         # a black hole of 1300
    now[0] += 10
    assert watch.step()["value"] == 1232 and iface["mtu"] == 1232
    host.path = 1500
    results = []
    for dummy in range(4):
        now[0] += 10
        results.append(watch.step())
    assert [r and r["value"] for r in results] == [None, None, 1440, None]
    assert iface["mtu"] == 1440 and watch.snapshot()["changes"] == {"lower": 1, "raise": 1}
    host.path, host.icmp = 1380, True                                         # the path says so: probed at once
    host.cached = 1380
    assert watch.due() == "frag-needed" and watch.step()["value"] == 1312


def test_the_tunnel_mtu_is_a_metric_of_the_live_probe():
    from ansible_collections.liqo.fabric.plugins.module_utils.health import metrics
    text = metrics.render([metrics.sample("cid", True, 500.0, (1, 2), 1312)])
    assert 'liqo_fabric_tunnel_mtu{driver="wireguard",cluster_id="cid"} 1312' in text
    assert "liqo_fabric_tunnel_mtu{" not in metrics.render([metrics.sample("cid", True, 500.0, None)])


def test_a_probe_cut_short_puts_the_interface_back(monkeypatch):
    host = _Host(1380)
    monkeypatch.setattr(pm, "peer_endpoint_ip", lambda interface, key=None: "192.0.2.2")
    monkeypatch.setattr(pm, "link_mtu", lambda dev: 1312 if dev == "lwg0" else 1500)
    watch = pm.Watch("lwg0", "169.254.18.1", run=host.run, send=host.send)
    watch.restore()
    assert host.mtus == []                      # no probe running: nothing to put back
    assert watch.interface_mtu() == 1312
    monkeypatch.setattr(pm, "link_mtu", lambda dev: 1440 if dev == "lwg0" else 1500)   # raised by a probe
    watch.probing_from = 1312
    assert watch.interface_mtu() == 1312        # the metric shows the tunnel's MTU, not the probe's moment
    watch.restore()
    assert host.mtus == [1312]


def test_a_probe_waits_for_anothers_lock_a_bounded_time(monkeypatch, tmp_path):
    """The build's probe and the live watch take a lock per interface; a holder that never lets go costs the other
    LOCK_WAIT seconds and a PathMtuError naming the lock, never a watch stuck for good."""
    import fcntl  # pylint: disable=import-outside-toplevel
    monkeypatch.setattr(pm, "LOCK_WAIT", 0.2)
    with open(tmp_path / "liqo-fabric-path-mtu-lwg0.lock", "a", encoding="ascii") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(pm.PathMtuError, match="another probe of lwg0's path has held"):
            with pm.exclusive("lwg0", str(tmp_path)):
                raise AssertionError("not reached")
    with pm.exclusive("lwg0", str(tmp_path)):   # released: taken at once
        pass


def test_the_drift_checks_leave_an_auto_tunnels_mtu_to_its_watch():
    """The manifest the drift checks read back: a fixed MTU is checked, an auto one is not (the path watch changes
    it, and raises it for each probe: a repair run there would undo the watch's probes)."""
    from ansible_collections.liqo.fabric.plugins.module_utils.host import manifest  # pylint: disable=import-outside-toplevel
    gws = [{"interface": "lwg0", "mtu": 1312, "mtu_auto": True, "table": 1, "nat_table": "n0", "peer": {}},
           {"interface": "lwg1", "mtu": 1340, "table": 2, "nat_table": "n1", "peer": {}}]
    out = manifest.gateway(gws, {"gateways": [{"interface": "lwg0"}, {"interface": "lwg1"}]}, lambda gw: [],
                           lambda gw: [], {})
    assert [(w["name"], w["mtu"]) for w in out["wireguard"]] == [("lwg0", None), ("lwg1", 1340)]
