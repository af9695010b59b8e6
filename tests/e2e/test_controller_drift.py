"""Drift checks of the controller against a real netns (no lab cluster): routes, links, nft tables."""
from __future__ import annotations

import os
import subprocess

import pytest

from tests.conftest import require_root


@pytest.fixture
def netns():
    require_root()
    name = f"lfab{os.urandom(2).hex()}dr"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        _setup(name)
    except BaseException:
        subprocess.run(["ip", "netns", "del", name], check=False)
        raise
    yield name
    subprocess.run(["ip", "netns", "del", name], check=False)


def _setup(name):
    subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
    subprocess.run(["ip", "-n", name, "link", "add", "dummy7", "type", "veth", "peer", "name", "dummy8"], check=True)
    subprocess.run(["ip", "-n", name, "route", "add", "10.98.0.0/16", "dev", "lo", "table", "18952"], check=True)
    subprocess.run(["ip", "netns", "exec", name, "nft", "-f", "-"], check=True, text=True,
                   input="table ip lfabtest {\n chain post {\n  type nat hook postrouting priority 100;\n"
                         "  ip saddr 10.243.0.0/16 snat ip prefix to 10.72.0.0/16\n }\n}\n")


def test_dataplane_manifest_check_finds_each_kind_of_drift(netns):
    from controller import drift  # pylint: disable=import-outside-toplevel
    before = os.stat("/proc/thread-self/ns/net").st_ino
    manifest = [{"netns": netns, "links": ["dummy7"], "routes": [{"table": 18952, "dst": ["10.98.0.0/16"]}],
                 "nft_tables": [{"family": "ip", "name": "lfabtest", "rules": 1}]}]
    assert drift.gateway(manifest) == []
    subprocess.run(["ip", "-n", netns, "route", "del", "10.98.0.0/16", "table", "18952"], check=True)
    subprocess.run(["ip", "netns", "exec", netns, "nft", "flush", "table", "ip", "lfabtest"], check=True)
    subprocess.run(["ip", "-n", netns, "link", "del", "dummy7"], check=True)
    diffs = drift.dataplane(manifest)
    assert any("route 10.98.0.0/16 missing from table 18952" in d for d in diffs), diffs
    assert any("nft table ip lfabtest has 0 rule(s)" in d for d in diffs), diffs
    assert any("link dummy7 is missing" in d for d in diffs), diffs
    subprocess.run(["ip", "netns", "exec", netns, "nft", "delete", "table", "ip", "lfabtest"], check=True)
    assert any("nft table ip lfabtest is missing" in d for d in drift.overlay(manifest))
    assert drift.dataplane([{"netns": netns + "x"}]) == [f"{netns}x: network namespace is missing"]
    # the calling thread's namespace is untouched
    assert os.stat("/proc/thread-self/ns/net").st_ino == before
