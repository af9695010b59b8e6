"""Lab clusters for end-to-end tests (real kube-apiserver + etcd, netns nodes and pods)."""
import pytest

from ansible_collections.liqo.fabric.plugins.plugin_utils import speed
from tests.conftest import require_root
from tests.lab import Lab

# The kubelet-lab modules (containerd, real pods: the heaviest); tests/lab takes one real-node lab at a time per host.
KUBELET_LAB_FIRST, KUBELET_LAB_LAST = "test_in_cluster.py", "test_real_lab.py"


def pytest_collection_modifyitems(items):
    """The e2e group runs in two workers (hack/run-tests.sh: pytest-xdist, --dist loadfile, a module per worker so
    its module-scoped lab is made once, handed out in this order). test_in_cluster, the longest module, goes first;
    test_real_lab goes last, so the other worker reaches it only after the light-lab modules, by when the first
    kubelet lab is down (were it still up, the second would wait for it: Lab._lock_real_nodes).
    With the speed paths off in the environment both skip: their fabric runs in the image's pods, whose pinned
    ansible-core keeps the speed paths on whatever this process's environment says, so they would repeat the e2e
    group's run."""
    plain = speed.switched_off()
    for item in items:
        if plain and item.path.name in (KUBELET_LAB_FIRST, KUBELET_LAB_LAST):
            item.add_marker(pytest.mark.skip(reason=f"{plain}: a kubelet-lab module; its fabric runs in the image's pods "
                                                    "(pinned ansible-core, speed paths on), as in the e2e group"))
    order = {KUBELET_LAB_FIRST: 0, KUBELET_LAB_LAST: 2}
    items.sort(key=lambda item: order.get(item.path.name, 1))  # stable: each module keeps its order


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
