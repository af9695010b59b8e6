"""Lab clusters for end-to-end tests (real kube-apiserver + etcd, netns nodes and pods)."""
import pytest

from tests.conftest import require_root
from tests.lab import Lab


@pytest.fixture(scope="module")
def lab1():
    """One cluster a (1 node, 1 pod) with the fabric's API installed (CRDs, namespace)."""
    require_root()
    from tests.e2e import fabric  # pylint: disable=import-outside-toplevel
    with Lab([{"name": "a"}], nodes=1, pods_per_node=1) as lab:
        fabric.install(lab["a"])
        yield lab


@pytest.fixture(scope="module")
def lab2():
    """Two clusters a and b, both pod CIDR 10.243.0.0/16, 3 nodes x 2 pods, gateways on the WAN."""
    require_root()
    with Lab([{"name": "a"}, {"name": "b"}], pod_cidr="10.243.0.0/16", nodes=3, pods_per_node=2) as lab:
        yield lab
