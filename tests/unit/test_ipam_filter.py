"""The liqo.fabric.remap_address filter (plugins/filter/ipam.py): table-driven cases, a round-trip property,
and the filter as Ansible's templar resolves it by its collection name (plus its ansible-doc page)."""
import ipaddress
import json
import os
import subprocess
import sys

import pytest
from ansible.errors import AnsibleFilterError
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.liqo.fabric.plugins.filter.ipam import FilterModule, remap_address

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTIONS = os.path.join(ROOT, "build", "collections")


@pytest.mark.parametrize("address, src, dst, expected", [
    ("10.243.3.7", "10.243.0.0/16", "10.71.0.0/16", "10.71.3.7"),
    ("10.243.0.0", "10.243.0.0/16", "10.71.0.0/16", "10.71.0.0"),
    ("10.243.255.255", "10.243.0.0/16", "10.71.0.0/16", "10.71.255.255"),
    ("10.71.3.7", "10.71.0.0/16", "10.243.0.0/16", "10.243.3.7"),        # and back
    ("10.243.3.0/24", "10.243.0.0/16", "10.71.0.0/16", "10.71.3.0/24"),  # a subnet keeps its length
    ("10.243.0.0/16", "10.243.0.0/16", "10.71.0.0/16", "10.71.0.0/16"),  # the whole CIDR
    ("192.168.1.130", "192.168.1.128/25", "172.16.9.0/25", "172.16.9.2"),
    ("10.243.3.7", "10.243.0.0/16", "10.243.0.0/16", "10.243.3.7"),      # kept CIDR: identity
    ("10.243.3.7", ["10.243.0.0/16"], ["10.71.0.0/16"], "10.71.3.7"),    # a v1beta1 Configuration's lists of one
])
def test_remap_address_table(address, src, dst, expected):
    assert remap_address(address, src, dst) == expected


@pytest.mark.parametrize("address, src, dst, words", [
    ("10.244.3.7", "10.243.0.0/16", "10.71.0.0/16", ["address", "'10.244.3.7'", "not inside"]),
    ("10.243.3.300", "10.243.0.0/16", "10.71.0.0/16", ["address", "'10.243.3.300'"]),
    ("10.243.3.7", "10.243.0.0/16", "10.71.0.0/24", ["to_cidr", "10.71.0.0/24"]),
    ("10.243.3.7", "10.243.0.1/16", "10.71.0.0/16", ["from_cidr", "'10.243.0.1/16'", "host bits"]),
    ("10.243.3.7", "10.243.0.0/16", "nonsense", ["to_cidr", "'nonsense'"]),
    ("10.0.0.0/8", "10.243.0.0/16", "10.71.0.0/16", ["address", "'10.0.0.0/8'"]),  # larger than the CIDR
    ("fd00::1", "10.243.0.0/16", "10.71.0.0/16", ["address", "'fd00::1'"]),
    ("10.243.3.7", ["10.243.0.0/16", "10.1.0.0/16"], "10.71.0.0/16", ["from_cidr", "has 2 CIDRs"]),
    ("10.243.3.7", "10.243.0.0/16", [], ["to_cidr", "has 0 CIDRs"]),
])
def test_remap_address_errors_name_field_and_value(address, src, dst, words):
    with pytest.raises(AnsibleFilterError) as err:
        remap_address(address, src, dst)
    msg = str(err.value)
    assert msg.startswith("remap_address: ")
    for word in words:
        assert word in msg, msg


def test_filter_module_exports_remap_address():
    assert FilterModule().filters() == {"remap_address": remap_address}


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=8, max_value=30), st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1))
def test_round_trip_keeps_host_bits(prefixlen, a, b, host):
    src = ipaddress.IPv4Network((a, prefixlen), strict=False)
    dst = ipaddress.IPv4Network((b, prefixlen), strict=False)
    hostbits = host & (src.num_addresses - 1)
    address = str(src.network_address + hostbits)
    mapped = remap_address(address, str(src), str(dst))
    assert ipaddress.IPv4Address(mapped) in dst
    assert int(ipaddress.IPv4Address(mapped)) - int(dst.network_address) == hostbits
    assert remap_address(mapped, str(dst), str(src)) == address


def test_filter_resolves_by_collection_name_in_a_template():
    """Through Ansible's own plugin loader (a fresh interpreter: the collection finder is process-wide)."""
    code = r"""
import json
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
_AnsibleCollectionFinder(paths=[%r])._install()
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
try:
    from ansible.template import trust_as_template
except ImportError:  # ansible-core before 2.19 trusts every template
    trust_as_template = str
t = Templar(loader=DataLoader())
out = {"ok": t.template(trust_as_template("{{ '10.243.3.7' | liqo.fabric.remap_address('10.243.0.0/16', '10.71.0.0/16') }}"))}
try:
    t.template(trust_as_template("{{ '10.244.3.7' | liqo.fabric.remap_address('10.243.0.0/16', '10.71.0.0/16') }}"))
except Exception as exc:
    out["error"] = str(exc)
print(json.dumps(out))
""" % COLLECTIONS
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["ok"] == "10.71.3.7"
    assert "address: '10.244.3.7' is not inside '10.243.0.0/16'" in out["error"]


def test_ansible_doc_documents_the_filter():
    ansible_doc = os.path.join(os.path.dirname(sys.executable), "ansible-doc")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR="1")
    env.setdefault("ANSIBLE_HOME", os.path.join(ROOT, "build", "ansible-home"))
    proc = subprocess.run([ansible_doc, "-t", "filter", "--json", "liqo.fabric.remap_address"], capture_output=True,
                          text=True, check=False, env=env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)["liqo.fabric.remap_address"]
    assert set(doc["doc"]["options"]) == {"_input", "from_cidr", "to_cidr"}
    assert doc["doc"]["positional"] == "from_cidr, to_cidr"
    assert "remap_address('10.243.0.0/16', '10.71.0.0/16')" in doc["examples"]
    assert doc["return"]["_value"]["type"] == "str"
