"""host_sysctls: the values before the first gateway recorded once per host, kept while any gateway runs,
restored by the last. /proc/sys is a temporary directory here; tests/integration/test_gateway_dataplane.py
runs the same on real network namespaces."""
import os

import pytest

from ansible_collections.liqo.fabric.plugins.module_utils.host import sysctls as hs

WANTED = (("net.ipv4.ip_forward", "1"), ("net.ipv4.conf.all.rp_filter", "2"))


@pytest.fixture
def host(tmp_path, monkeypatch):
    proc = tmp_path / "proc"
    for name, value in (("net.ipv4.ip_forward", "0"), ("net.ipv4.conf.all.rp_filter", "0")):
        path = proc.joinpath(*name.split("."))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value + "\n")
    monkeypatch.setattr(hs, "PROC_SYS", str(proc))
    live = set()
    monkeypatch.setattr(hs, "_live", lambda names: set(names) & live)
    return {"record": str(tmp_path / "sysctl.conf"), "live": live}


def values():
    return {name: hs.read_value(name) for name, dummy in WANTED}


def test_record_parse_round_trip():
    text = hs.format_record(WANTED, {"net.ipv4.ip_forward": "0"}, ["b", "a"])
    assert hs.parse_record(text) == ({"net.ipv4.ip_forward": "0"}, ["a", "b"])
    assert "net.ipv4.ip_forward = 1\n" in text  # still a sysctl.d file
    assert hs.parse_record("net.ipv4.ip_forward = 1\n") == ({}, [])  # an older release's record


def test_two_gateways_the_last_restores(host):
    rec = host["record"]
    first = hs.acquire(WANTED, ["wg1"], rec)
    host["live"].add("wg1")
    assert set(first["changed"]) == {rec, "net.ipv4.ip_forward", "net.ipv4.conf.all.rp_filter"}
    assert values() == {"net.ipv4.ip_forward": "1", "net.ipv4.conf.all.rp_filter": "2"}
    second = hs.acquire(WANTED, ["wg2"], rec)
    host["live"].add("wg2")
    assert second["changed"] == [rec]  # only the list of gateways grew
    assert hs.read_record(rec) == ({"net.ipv4.ip_forward": "0", "net.ipv4.conf.all.rp_filter": "0"}, ["wg1", "wg2"])
    assert hs.acquire(WANTED, ["wg2"], rec)["changed"] == []

    host["live"].discard("wg1")
    one = hs.release(WANTED, ["wg1"], rec)
    assert one["changed"] == [rec] and one["restored"] == {}
    assert values()["net.ipv4.conf.all.rp_filter"] == "2" and hs.read_record(rec)[1] == ["wg2"]

    check = hs.release(WANTED, ["wg2"], rec, check=True)
    assert check["restored"] == {"net.ipv4.ip_forward": "0", "net.ipv4.conf.all.rp_filter": "0"}
    assert "rp_filter = 2" in check["before"] and "rp_filter = 0" in check["after"]
    assert os.path.exists(rec) and values()["net.ipv4.ip_forward"] == "1"  # check mode wrote nothing

    host["live"].discard("wg2")
    last = hs.release(WANTED, ["wg2"], rec)
    assert last["restored"] == check["restored"] and not os.path.exists(rec)
    assert values() == {"net.ipv4.ip_forward": "0", "net.ipv4.conf.all.rp_filter": "0"}
    assert hs.release(WANTED, ["wg2"], rec)["changed"] == []


def test_a_host_already_right_is_left_as_it_was(host):
    hs._write_value("net.ipv4.ip_forward", "1")  # pylint: disable=protected-access
    hs._write_value("net.ipv4.conf.all.rp_filter", "2")  # pylint: disable=protected-access
    assert hs.acquire(WANTED, ["wg1"], host["record"])["changed"] == [host["record"]]
    last = hs.release(WANTED, ["wg1"], host["record"])
    assert last["restored"] == {} and not os.path.exists(host["record"])
    assert values() == {"net.ipv4.ip_forward": "1", "net.ipv4.conf.all.rp_filter": "2"}


def test_values_before_are_kept_across_reruns_and_lost_gateways_do_not_hold(host):
    rec = host["record"]
    hs.acquire(WANTED, ["wg1"], rec)
    host["live"].add("wg1")
    hs.acquire(WANTED, ["wg1"], rec)  # the values are now 1/2: the record keeps the ones found first
    assert hs.read_record(rec)[0] == {"net.ipv4.ip_forward": "0", "net.ipv4.conf.all.rp_filter": "0"}
    hs.acquire(WANTED, ["wg2"], rec)
    host["live"].discard("wg1")  # wg1 lost without a teardown: it no longer holds the values
    assert hs.release(WANTED, ["wg2"], rec)["restored"] == {"net.ipv4.ip_forward": "0", "net.ipv4.conf.all.rp_filter": "0"}


def test_check_mode_acquire_writes_nothing(host):
    res = hs.acquire(WANTED, ["wg1"], host["record"], check=True)
    assert host["record"] in res["changed"] and "net.ipv4.ip_forward" in res["changed"]
    assert not os.path.exists(host["record"]) and values()["net.ipv4.ip_forward"] == "0"
    assert "ip_forward = 0" in res["before"] and "ip_forward = 1" in res["after"]
