"""cluster_identity's pure logic: the friendly name a cluster gets by default and the check of a chosen one
(the ConfigMap itself is tested against the lab's apiserver in tests/e2e/test_real_clusters.py)."""
import pytest

from ansible_collections.liqo.fabric.plugins.module_utils.api.cluster_identity import IdentityError, check_name, default_name

CID = "4b6f2a7e-2d1c-4a55-9a1e-7f1c2b3d4e5f"


@pytest.mark.parametrize("kubeconfig_cluster,expected", [
    ("a", "a"),
    ("arn:aws:eks:eu-west-1:123456789012:cluster/prod-eu", "prod-eu"),
    ("gke_my-project_europe-west1-b_rome", "gke-my-project-europe-west1-b-rome"),
    ("Kind-Dev", "kind-dev"),
    ("kubernetes", "cluster-4b6f2a7e"),  # kubeadm's name for every cluster: not a name
    ("kind", "cluster-4b6f2a7e"),
    (None, "cluster-4b6f2a7e"),
    ("___", "cluster-4b6f2a7e"),
    ("x" * 80, "x" * 51),
])
def test_default_name(kubeconfig_cluster, expected):
    assert default_name(kubeconfig_cluster, CID) == expected


@pytest.mark.parametrize("name", ["Rome", "-a", "a-", "a_b", "", "x" * 52])
def test_a_bad_name_is_refused_naming_field_and_value(name):
    with pytest.raises(IdentityError, match="cluster_name: '%s' is not a valid cluster name" % name):
        check_name(name)


def test_good_names():
    assert check_name("rome") == "rome" and check_name("x" * 51) == "x" * 51
