"""tenant_names: what the fabric names per remote cluster (tenant namespace, object names) from its friendly name;
the playbooks call it through the liqo.fabric.tenant filter (tests/e2e/test_connect_rerun.py and
test_real_clusters.py run it against the lab)."""
import hashlib
import re

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.liqo.fabric.plugins.filter.tenant import FilterModule
from ansible_collections.liqo.fabric.plugins.module_utils.api.tenant_names import (
    MAX_NAME, TenantNameError, cluster_label, resource_name, tenant, tenant_namespace, tenant_namespaces)

CID = "4b6f2a7e-2d1c-4a55-9a1e-7f1c2b3d4e5f"
OTHER = "0f1e2d3c-4b5a-4968-8776-655443322110"
HASH6 = hashlib.sha256(CID.encode()).hexdigest()[:6]
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@pytest.mark.parametrize("name,cluster_id,expected", [
    ("rome", CID, "rome"),
    ("dry-paper", CID, "dry-paper"),
    ("a--b", CID, "a--b"),                      # a valid name is kept as it is
    ("0rome", CID, "0rome"),                    # a label may start with a digit (gw-/wg- prefixes make the rest)
    ("Rome", CID, "rome"),
    ("Prod EU/West_1", CID, "prod-eu-west-1"),
    ("-edge-", CID, "edge"),
    ("x" * 80, CID, "x" * MAX_NAME),
    ("x" * 50 + "-yz", CID, "x" * 50),          # no trailing '-' after the cut
    ("___", CID, "cluster-4b6f2a7e"),           # nothing left: as without a name
    (None, CID, "cluster-4b6f2a7e"),            # no CLUSTER_NAME, a UUID id
    ("", CID.upper(), "cluster-4b6f2a7e"),
    (None, "milan", "milan"),                   # Liqo 1.x: the id is a name already
    (None, "Milan_2", "milan-2"),
    (None, "___", "cluster-" + hashlib.sha256(b"___").hexdigest()[:8]),
])
def test_cluster_label(name, cluster_id, expected):
    got = cluster_label(name, cluster_id)
    assert got == expected
    assert DNS_LABEL.match(got) and len(got) <= MAX_NAME and len("liqo-tenant-" + got) <= 63


@pytest.mark.parametrize("existing,name,expected", [
    # a fresh cluster: liqo-tenant-<name>
    ({}, "rome", "liqo-tenant-rome"),
    ({"liqo-tenant-milan": OTHER}, "rome", "liqo-tenant-rome"),
    # made before by connect (labelled): kept, also after the peer was renamed
    ({"liqo-tenant-rome": CID}, "rome", "liqo-tenant-rome"),
    ({"liqo-tenant-rome": CID}, "paris", "liqo-tenant-rome"),
    ({"liqo-tenant-rome-" + HASH6: CID, "liqo-tenant-rome": OTHER}, "rome", "liqo-tenant-rome-" + HASH6),
    # two labelled for the id: the one of today's name first, else the first by name
    ({"liqo-tenant-b": CID, "liqo-tenant-rome": CID}, "rome", "liqo-tenant-rome"),
    ({"liqo-tenant-b": CID, "liqo-tenant-c": CID}, "rome", "liqo-tenant-b"),
    # made by liqo.fabric before names (liqo-tenant-<id>, unlabelled): found, so disconnect removes it
    ({"liqo-tenant-" + CID: ""}, "rome", "liqo-tenant-" + CID),
    ({"liqo-tenant-" + CID: CID}, "rome", "liqo-tenant-" + CID),
    # another cluster of the same name has liqo-tenant-rome, or a namespace not labelled: suffix from the id
    ({"liqo-tenant-rome": OTHER}, "rome", "liqo-tenant-rome-" + HASH6),
    ({"liqo-tenant-rome": ""}, "rome", "liqo-tenant-rome-" + HASH6),
    ({"liqo-tenant-" + "x" * 51: OTHER}, "x" * 51, "liqo-tenant-" + "x" * 44 + "-" + HASH6),
    ({"liqo-tenant-" + "x" * 43 + "-y" * 4: OTHER}, "x" * 43 + "-y" * 4, "liqo-tenant-" + "x" * 43 + "-" + HASH6),
    # no CLUSTER_NAME on the peer
    ({}, None, "liqo-tenant-cluster-4b6f2a7e"),
    ({}, "Prod EU", "liqo-tenant-prod-eu"),
])
def test_tenant_namespace(existing, name, expected):
    got = tenant_namespace(existing, CID, name)
    assert got == expected
    assert DNS_LABEL.match(got) and len(got) <= 63


def test_both_names_taken_is_an_error_naming_both_clusters():
    existing = {"liqo-tenant-rome": OTHER, "liqo-tenant-rome-" + HASH6: ""}
    with pytest.raises(TenantNameError) as err:
        tenant_namespace(existing, CID, "rome")
    msg = str(err.value)
    assert "cluster 'rome' (id %s)" % CID in msg
    assert "liqo-tenant-rome by cluster id %s" % OTHER in msg
    assert "liqo-tenant-rome-%s by a namespace not labelled liqo.io/remote-cluster-id" % HASH6 in msg
    assert "-e cluster_name=NAME" in msg


def test_no_remote_id_is_an_error():
    with pytest.raises(TenantNameError, match="no cluster id"):
        tenant_namespace({}, "", "rome")


@pytest.mark.parametrize("namespace,name", [
    ("liqo-tenant-rome", "rome"),
    ("liqo-tenant-rome-" + HASH6, "rome-" + HASH6),
    ("liqo-tenant-" + CID, CID),                # a connection made with UUID names keeps them
])
def test_resource_name(namespace, name):
    assert resource_name(namespace) == name


@pytest.mark.parametrize("namespace", ["default", "liqo-tenant-", None])
def test_resource_name_of_a_namespace_that_is_not_a_tenant_one(namespace):
    with pytest.raises(TenantNameError, match="is not a tenant namespace"):
        resource_name(namespace)


def test_tenant_namespaces_from_namespace_objects():
    objs = [{"metadata": {"name": "default"}},
            {"metadata": {"name": "liqo-tenant-rome", "labels": {"liqo.io/remote-cluster-id": CID}}},
            {"metadata": {"name": "liqo-tenant-" + OTHER}},
            {"metadata": {"name": "offloaded", "labels": {"liqo.io/remote-cluster-id": OTHER}}}]
    assert tenant_namespaces(objs) == {"liqo-tenant-rome": CID, "liqo-tenant-" + OTHER: ""}
    assert not tenant_namespaces(None)


def test_tenant_and_the_filter():
    assert tenant({}, CID, "rome") == {"namespace": "liqo-tenant-rome", "name": "rome"}
    flt = FilterModule().filters()["tenant"]
    assert flt({"liqo-tenant-rome": OTHER}, CID, "rome") == {"namespace": "liqo-tenant-rome-" + HASH6,
                                                             "name": "rome-" + HASH6}
    with pytest.raises(AnsibleFilterError, match="are both taken"):
        flt({"liqo-tenant-rome": OTHER, "liqo-tenant-rome-" + HASH6: OTHER}, CID, "rome")
