"""wireguard_go_version: the version a binary prints, and the warning for one without offloads. The binaries
here are small scripts printing what Debian's two builds print; tests/integration/test_gateway_dataplane.py
checks the report of the installed wireguard-go."""
import os

import pytest

from ansible_collections.liqo.fabric.plugins.module_utils.wireguard import go_version as v


@pytest.mark.parametrize("text,version", [
    ("wireguard-go v0.0.20230223\n\nUserspace WireGuard daemon for linux-amd64.\n", (0, 0, 20230223)),
    ("wireguard-go v0.0.20220316\n", (0, 0, 20220316)),
    ("wireguard-go 0.0.20231211", (0, 0, 20231211)),
    ("Usage: something else", None),
])
def test_parse_version(text, version):
    assert v.parse_version(text) == version


def fake(tmp_path, printed, name="wireguard-go"):
    path = tmp_path / name
    path.write_text("#!/bin/sh\necho '%s'\n" % printed)
    os.chmod(path, 0o755)
    return str(path)


def test_the_backports_binary_has_offloads(tmp_path):
    res = v.probe(fake(tmp_path, "wireguard-go v0.0.20230223"))
    assert res["version"] == "0.0.20230223" and res["offloads"] and res["warning"] is None


def test_an_old_binary_is_reported_with_the_package_to_install(tmp_path):
    path = fake(tmp_path, "wireguard-go v0.0.20220316")
    res = v.probe(path)
    assert res["version"] == "0.0.20220316" and not res["offloads"]
    assert path in res["warning"] and "v0.0.20220316" in res["warning"] and "bookworm-backports" in res["warning"]


def test_unknown_version_warns_and_missing_binary_is_none(tmp_path):
    res = v.probe(fake(tmp_path, "hello", name="wg-other"))
    assert res["version"] is None and "unknown version" in res["warning"]
    assert v.probe(str(tmp_path / "absent")) is None
