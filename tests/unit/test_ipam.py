"""IPAM (plugins/module_utils/ipam/allocator.py): table-driven cases of keep/remap, errors, release, state, translation."""
import ipaddress
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "build", "collections"))

from ansible_collections.liqo.fabric.plugins.module_utils.ipam import allocator as ipam_mod  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.liqo.fabric.plugins.module_utils.ipam.allocator import (  # noqa: E402  pylint: disable=wrong-import-position
    InvalidCidrError, InvalidCidrSizeError, InvalidStateError, Ipam, IpamError, LocalCidrOverlapError, PoolTooSmallError,
    PoolsExhaustedError, translate)

LOCAL = {"pod_cidrs": ["10.243.0.0/16"], "service_cidr": "10.96.0.0/12"}


@pytest.mark.parametrize("taken_before, cidr, expected", [
    # free: kept as it is, even outside the pools
    ([], "10.200.0.0/16", "10.200.0.0/16"),
    ([], "100.64.0.0/16", "100.64.0.0/16"),
    ([], "192.168.10.0/24", "192.168.10.0/24"),
    # equal to the local pod CIDR: first free /16 of 10.0.0.0/8
    ([], "10.243.0.0/16", "10.0.0.0/16"),
    # descendant of the local service CIDR (10.96.0.0/12)
    ([], "10.100.0.0/16", "10.0.0.0/16"),
    # ancestor of the local pod CIDR
    ([], "10.240.0.0/12", "10.0.0.0/12"),
    # descendant of the default external (10.70.0.0/16) and internal (10.80.0.0/16) CIDRs
    ([], "10.70.4.0/24", "10.0.0.0/24"),
    ([], "10.80.0.0/16", "10.0.0.0/16"),
    # earlier allocations are skipped, in address order
    (["10.243.0.0/16", "10.243.0.0/16"], "10.243.0.0/16", "10.2.0.0/16"),
    # a /24 packs right after a /16 taken at 10.0.0.0
    (["10.243.0.0/16"], "10.243.0.0/24", "10.1.0.0/24"),
    # a kept remote CIDR is taken for the next remote cluster
    (["172.20.0.0/16"], "172.20.0.0/16", "10.0.0.0/16"),
])
def test_keep_when_free_else_first_free_of_same_length(taken_before, cidr, expected):
    ipam = Ipam(**LOCAL)
    for i, c in enumerate(taken_before):
        ipam.allocate("ns/prev%d" % i, "pod", c)
    alloc = ipam.allocate("ns/new", "pod", cidr)
    assert str(alloc.remapped) == expected
    assert alloc.is_remapped == (cidr != expected)


def test_pool_order_not_address_order():
    ipam = Ipam(pools=["192.168.0.0/16", "10.0.0.0/8"], pod_cidrs=["192.168.0.0/17"])
    assert ipam.allocate_remote("a/a", "192.168.0.0/16") == {"pod": "10.0.0.0/16"}
    assert ipam.allocate_remote("b/b", "192.168.0.0/24") == {"pod": "192.168.128.0/24"}


def test_next_pool_when_first_is_full():
    ipam = Ipam(pools=["10.0.0.0/15", "172.16.0.0/12"], pod_cidrs=[], external_cidr=None, internal_cidr=None)
    got = [ipam.allocate("ns/c%d" % i, "pod", "10.0.0.0/16").remapped for i in range(4)]
    assert [str(g) for g in got] == ["10.0.0.0/16", "10.1.0.0/16", "172.16.0.0/16", "172.17.0.0/16"]


def test_reserved_never_handed_out_and_overlapping_reserved_are_merged():
    ipam = Ipam(reserved=["10.0.0.0/10", "10.0.0.0/16"], **LOCAL)
    assert str(ipam.allocate("a/a", "pod", "10.243.0.0/16").remapped) == "10.64.0.0/16"
    assert ipam.allocate("b/b", "pod", "10.1.0.0/24").remapped != ipaddress.ip_network("10.1.0.0/24")


def test_pod_and_external_of_one_cluster_do_not_collide():
    ipam = Ipam(**LOCAL)
    assert ipam.allocate_remote("t/dry-paper", "10.243.0.0/16", "10.70.0.0/16") == {"pod": "10.0.0.0/16", "external": "10.1.0.0/16"}
    assert ipam.allocate_remote("t/other", "10.50.0.0/16", "10.50.0.0/16") == {"pod": "10.50.0.0/16", "external": "10.2.0.0/16"}


@pytest.mark.parametrize("kwargs, exc, reason, words", [
    ({"pod_cidrs": ["10.0.0.0/16"], "reserved": ["10.0.0.0/8"]}, LocalCidrOverlapError, "LocalCIDROverlap",
     ["pod_cidrs[0]", "10.0.0.0/16", "reserved[0]", "10.0.0.0/8"]),
    ({"service_cidr": "10.70.0.0/20"}, LocalCidrOverlapError, "LocalCIDROverlap", ["external_cidr", "service_cidr", "10.70.0.0/20"]),
    ({"pod_cidrs": ["10.243.0.0/33"]}, InvalidCidrError, "InvalidCIDR", ["pod_cidrs[0]", "10.243.0.0/33", "not a valid CIDR"]),
    ({"service_cidr": "10.96.0.1/12"}, InvalidCidrError, "InvalidCIDR", ["service_cidr", "host bits", "10.96.0.0/12"]),
    ({"reserved": ["fd00::/8"]}, InvalidCidrError, "InvalidCIDR", ["reserved[0]", "fd00::/8", "IPv4"]),
    ({"pools": []}, InvalidCidrError, "InvalidCIDR", ["pools"]),
])
def test_bad_local_configuration(kwargs, exc, reason, words):
    with pytest.raises(exc) as err:
        Ipam(**kwargs)
    assert err.value.reason == reason
    for w in words:
        assert w in str(err.value)


@pytest.mark.parametrize("cidr, exc, reason, words", [
    ("10.243.0.0/4", InvalidCidrError, "InvalidCIDR", ["spec.remote.cidr.pod", "host bits"]),
    ("0.0.0.0/4", PoolTooSmallError, "PoolTooSmall",
     ["pools 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16 too small", "spec.remote.cidr.pod '0.0.0.0/4' needs a free /4",
      "the largest pool is a /8"]),
    ("10.243.0.0/31", InvalidCidrSizeError, "InvalidCIDRSize", ["10.243.0.0/31"]),
    ("10.243.0.0", InvalidCidrSizeError, "InvalidCIDRSize", ["10.243.0.0/32"]),
    ("banana", InvalidCidrError, "InvalidCIDR", ["spec.remote.cidr.pod", "'banana'"]),
    (None, InvalidCidrError, "InvalidCIDR", ["spec.remote.cidr.pod"]),
])
def test_bad_remote_cidr(cidr, exc, reason, words):
    ipam = Ipam(**LOCAL)
    before = ipam.dumps()
    with pytest.raises(exc) as err:
        ipam.allocate("ns/x", "pod", cidr)
    assert err.value.reason == reason and err.value.field == "spec.remote.cidr.pod"
    for w in words:
        assert w in str(err.value)
    assert ipam.dumps() == before


def test_exhausted_pools_is_atomic_and_clear():
    ipam = Ipam(pools=["10.0.0.0/15"], pod_cidrs=["10.0.0.0/16"], external_cidr=None, internal_cidr=None)
    assert ipam.allocate_remote("a/a", "10.0.0.0/16") == {"pod": "10.1.0.0/16"}
    before = ipam.dumps()
    with pytest.raises(PoolsExhaustedError) as err:
        ipam.allocate_remote("b/b", "10.5.0.0/16", "10.0.0.0/16")  # pod fits (kept), external cannot
    assert err.value.reason == "PoolsExhausted"
    assert "spec.remote.cidr.external" in str(err.value) and "10.0.0.0/16" in str(err.value) and "10.0.0.0/15" in str(err.value)
    assert "local pod_cidrs[0]" in str(err.value)
    assert ipam.dumps() == before  # nothing allocated, not even the pod CIDR


def test_release_frees_and_next_allocation_reuses_lowest():
    ipam = Ipam(**LOCAL)
    for name in "abc":
        ipam.allocate_remote("t/" + name, "10.243.0.0/16")
    assert [str(a.remapped) for a in ipam.release("t/b")] == ["10.1.0.0/16"]
    assert ipam.release("t/b") == []
    assert ipam.allocate_remote("t/d", "10.243.0.0/16") == {"pod": "10.1.0.0/16"}
    assert not ipam.is_taken("10.3.0.0/16") and ipam.is_taken("10.2.0.0/16") and ipam.is_taken("10.96.0.0/12")


def test_allocate_is_idempotent_and_follows_spec_changes():
    ipam = Ipam(**LOCAL)
    first = ipam.allocate("t/a", "pod", "10.243.0.0/16")
    assert ipam.allocate("t/a", "pod", "10.243.0.0/16") is first
    # the spec changes to a free CIDR: kept, and the old prefix is released
    assert str(ipam.allocate("t/a", "pod", "10.244.0.0/16").remapped) == "10.244.0.0/16"
    assert not ipam.is_taken("10.0.0.0/16")
    # changes to a conflicting /24: remapped into the freed space
    assert str(ipam.allocate("t/a", "pod", "10.243.7.0/24").remapped) == "10.0.0.0/24"


@pytest.mark.parametrize("address, src, dst, expected", [
    ("10.243.1.7", "10.243.0.0/16", "10.71.0.0/16", "10.71.1.7"),
    ("10.243.255.255", "10.243.0.0/16", "10.0.0.0/16", "10.0.255.255"),
    ("10.243.1.0/24", "10.243.0.0/16", "10.71.0.0/16", "10.71.1.0/24"),
    ("192.168.5.9", "192.168.5.0/24", "10.1.0.0/24", "10.1.0.9"),
    ("10.243.0.0/16", "10.243.0.0/16", "10.71.0.0/16", "10.71.0.0/16"),
])
def test_translate_keeps_host_bits(address, src, dst, expected):
    assert translate(address, src, dst) == expected
    assert translate(expected, dst, src) == address


@pytest.mark.parametrize("address, src, dst, words", [
    ("10.244.0.1", "10.243.0.0/16", "10.71.0.0/16", ["not inside"]),
    ("10.243.0.0/8", "10.243.0.0/16", "10.71.0.0/16", ["address"]),
    ("10.243.0.1", "10.243.0.0/16", "10.71.0.0/24", ["not the length"]),
    ("x", "10.243.0.0/16", "10.71.0.0/16", ["'x'"]),
])
def test_translate_errors(address, src, dst, words):
    with pytest.raises(InvalidCidrError) as err:
        translate(address, src, dst)
    for w in words:
        assert w in str(err.value)


def test_translation_through_allocation():
    ipam = Ipam(**LOCAL)
    ipam.allocate_remote("t/a", "10.243.0.0/16", "10.70.0.0/16")
    assert ipam.to_remapped("t/a", "pod", "10.243.3.4") == "10.0.3.4"
    assert ipam.to_original("t/a", "external", "10.1.0.9") == "10.70.0.9"
    with pytest.raises(IpamError):
        ipam.to_remapped("t/missing", "pod", "10.243.3.4")


def test_state_round_trip_is_canonical_and_behaves_the_same():
    ipam = Ipam(reserved=["10.5.0.0/16"], **LOCAL)
    for i in range(6):
        ipam.allocate_remote("t/c%d" % i, "10.243.0.0/16", "10.70.0.0/16")
    ipam.release("t/c2")
    text = ipam.dumps()
    again = Ipam.loads(text)
    assert again.dumps() == text
    assert json.loads(text)["version"] == ipam_mod.STATE_VERSION
    assert again.allocate_remote("t/new", "10.243.0.0/16") == ipam.allocate_remote("t/new", "10.243.0.0/16")


def test_from_state_with_new_reserved_reallocates_the_conflicting_prefix():
    ipam = Ipam(**LOCAL)
    ipam.allocate_remote("t/a", "10.243.0.0/16")  # -> 10.0.0.0/16
    state = ipam.to_state()
    moved = Ipam.from_state(state, reserved=["10.0.0.0/16"])
    assert str(moved.allocation("t/a", "pod").remapped) == "10.1.0.0/16"


@pytest.mark.parametrize("state", [None, {}, {"version": 99}, {"version": 1, "allocations": [{"owner": "a"}]},
                                   {"version": 1, "allocations": [{"owner": "a", "field": "svc", "original": "10.0.0.0/16", "remapped": "10.0.0.0/16"}]}])
def test_bad_state(state):
    with pytest.raises(InvalidStateError) as err:
        Ipam.from_state(state)
    assert err.value.reason == "InvalidIPAMState"


def test_loads_rejects_garbage():
    with pytest.raises(InvalidStateError):
        Ipam.loads("{not json")


def _conf(ns, name, pod, external, status=None, created="2026-01-01T00:00:00Z"):
    conf = {"apiVersion": "networking.liqo.io/v1beta1", "kind": "Configuration",
            "metadata": {"namespace": ns, "name": name, "creationTimestamp": created},
            "spec": {"remote": {"cidr": {"pod": pod, "external": external}}}}
    if status:
        conf["status"] = {"remote": {"cidr": status}}
    return conf


def test_adopt_configurations_rebuilds_state_and_resolves_conflicts_oldest_first():
    ipam = Ipam(**LOCAL)
    confs = [
        # newer one claims the same remapped pod prefix as the older one: it must move
        _conf("t2", "b", "10.243.0.0/16", "10.70.0.0/16", {"pod": "10.0.0.0/16", "external": "10.2.0.0/16"}, "2026-01-02T00:00:00Z"),
        _conf("t1", "a", "10.243.0.0/16", "10.70.0.0/16", {"pod": "10.0.0.0/16", "external": "10.1.0.0/16"}, "2026-01-01T00:00:00Z"),
        # no status yet: allocated
        _conf("t3", "c", "10.243.0.0/16", "10.70.0.0/16", None, "2026-01-03T00:00:00Z"),
        # status pointing into the local pod CIDR (e.g. the local cluster was reconfigured): reallocated
        _conf("t4", "d", "10.50.0.0/16", "10.70.0.0/16", {"pod": "10.243.0.0/16", "external": "10.4.0.0/16"}, "2026-01-04T00:00:00Z"),
        # invalid spec: reported, nothing taken
        _conf("t5", "e", "10.50.0.0/4", "10.70.0.0/16", None, "2026-01-05T00:00:00Z"),
    ]
    res = ipam.adopt_configurations(confs)
    by_owner = {owner: (out, changed) for owner, out, changed in res}
    assert [r[0] for r in res] == ["t1/a", "t2/b", "t3/c", "t4/d", "t5/e"]
    assert by_owner["t1/a"] == ({"pod": "10.0.0.0/16", "external": "10.1.0.0/16"}, False)
    assert by_owner["t2/b"] == ({"pod": "10.3.0.0/16", "external": "10.2.0.0/16"}, True)
    assert by_owner["t3/c"] == ({"pod": "10.5.0.0/16", "external": "10.6.0.0/16"}, True)
    assert by_owner["t4/d"] == ({"pod": "10.50.0.0/16", "external": "10.4.0.0/16"}, True)
    assert isinstance(by_owner["t5/e"][0], InvalidCidrError) and by_owner["t5/e"][1] is True
    assert ipam.owners() == ["t1/a", "t2/b", "t3/c", "t4/d"]
    # a second pass over the written statuses changes nothing
    written = [_conf(o.split("/")[0], o.split("/")[1], c["spec"]["remote"]["cidr"]["pod"], c["spec"]["remote"]["cidr"]["external"],
                     by_owner[o][0], c["metadata"]["creationTimestamp"])
               for c in confs for o in [ipam_mod.configuration_owner(c)] if o != "t5/e"]
    rebuilt = Ipam(**LOCAL)
    assert all(not changed for dummy, dummy2, changed in rebuilt.adopt_configurations(written))
    assert rebuilt.dumps() == ipam.dumps()


def test_adopt_configurations_keeps_the_allocations_of_an_owner_whose_spec_became_invalid():
    """A refused spec change does not take the allocation in use away (a live connection routes through it)."""
    ipam = Ipam(**LOCAL)
    held = ipam.allocate_remote("t/a", "10.243.0.0/16", "10.70.0.0/16")
    res = ipam.adopt_configurations([_conf("t", "a", "10.243.0.0/4", "10.70.0.0/16", held)])
    assert res[0][0] == "t/a" and isinstance(res[0][1], InvalidCidrError)
    assert res[0][1].kept == held
    assert sorted(str(a.remapped) for a in ipam.allocations()) == sorted(held.values())
    # one that never held anything keeps nothing
    res = ipam.adopt_configurations([_conf("t", "a", "10.243.0.0/16", "10.70.0.0/16", held),
                                     _conf("t", "new", "10.243.0.0/4", "10.70.0.0/16", None)])
    assert isinstance(res[1][1], InvalidCidrError) and res[1][1].kept == {}
    assert ipam.owners() == ["t/a"]


def test_a_spec_change_the_pools_cannot_serve_keeps_both_fields_as_they_were():
    """pod and external move together or not at all: a new external CIDR that no pool can hold leaves the pod
    CIDR's prefix where it was too."""
    ipam = Ipam(**dict(LOCAL, pools=["10.0.0.0/15"]))
    held = ipam.allocate_remote("t/a", "10.243.0.0/16", "10.70.0.0/16")
    assert held == {"pod": "10.0.0.0/16", "external": "10.1.0.0/16"}   # the pool is full
    res = ipam.adopt_configurations([_conf("t", "a", "10.96.0.0/16", "10.96.0.0/15", held)])
    assert isinstance(res[0][1], IpamError) and res[0][1].kept == held
    assert dict((a.field, str(a.remapped)) for a in ipam.allocations()) == held


def test_release_missing_frees_deleted_configurations():
    ipam = Ipam(**LOCAL)
    for name in "abc":
        ipam.allocate_remote("t/" + name, "10.243.0.0/16", "10.70.0.0/16")
    released = ipam.release_missing(["t/a", "t/c"])
    assert sorted((a.owner, a.field) for a in released) == [("t/b", "external"), ("t/b", "pod")]
    assert ipam.owners() == ["t/a", "t/c"]


def test_pools_shrunk_below_a_ledger_allocation_name_the_pool_for_its_configuration():
    """A ledger holding a /16 remap loads with a /24 pool (no failure of the whole run, nothing of
    another namespace lost); the Configuration needing the /16 is reported PoolTooSmall, naming the pool,
    and keeps its /16."""
    ipam = Ipam(**LOCAL)
    ipam.allocate_remote("other/peer", "10.243.0.0/16")
    ipam.allocate_remote("ns/peer", "10.243.0.0/16")
    text = ipam.dumps()
    small = Ipam.loads(text, pools=["10.0.0.0/24"])
    assert sorted(a.owner for a in small.allocations()) == ["ns/peer", "other/peer"]
    conf = {"metadata": {"namespace": "ns", "name": "peer"}, "spec": {"remote": {"cidr": {"pod": "10.243.0.0/16"}}}}
    [(owner, err, changed)] = small.adopt_configurations([conf])
    assert owner == "ns/peer" and changed and isinstance(err, PoolTooSmallError)
    assert str(err).startswith("pools 10.0.0.0/24 too small: spec.remote.cidr.pod '10.243.0.0/16' needs a free /16")
    # the allocation in use is kept (pools only bound new remaps)
    assert err.kept == {"pod": str(ipam.allocation("ns/peer", "pod").remapped)}
    assert sorted(a.owner for a in small.allocations()) == ["ns/peer", "other/peer"]


def test_status_is_written_in_v1beta1_shape_whatever_the_spec_shape():
    """The IPAM writes status.remote.cidr as Liqo's lists of one (the collection reads and writes v1beta1)."""
    from ansible_collections.liqo.fabric.plugins.module_utils.ipam import store as ipam_store  # pylint: disable=import-outside-toplevel
    for pod in (["10.243.0.0/16"], "10.243.0.0/16"):
        conf = {"metadata": {"name": "c", "namespace": "n", "generation": 2}, "spec": {"remote": {"cidr": {"pod": pod}}}}
        status = ipam_store._desired_status(conf, {"pod": "10.71.0.0/16", "external": "10.72.0.0/16"})  # pylint: disable=protected-access
        assert status["remote"] == {"cidr": {"pod": ["10.71.0.0/16"], "external": ["10.72.0.0/16"]}}
        assert status["conditions"][0]["message"] == "pod CIDR 10.243.0.0/16 remapped to 10.71.0.0/16"
