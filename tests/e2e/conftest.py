"""Lab clusters for end-to-end tests (real kube-apiserver + etcd, netns nodes and pods)."""
import os

import pytest

from ansible_collections.liqo.fabric.plugins.plugin_utils import speed_paths
from tests.conftest import require_root
from tests.lab import Lab

# Kubelet labs (containerd, real pods: the heaviest modules) never run two at once.
KUBELET_LAB_MODULES = ("test_in_cluster.py", "test_real_lab.py")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups (its own hook of the same name)
def pytest_collection_modifyitems(items):
    """The e2e group runs in parallel workers (hack/run-tests.sh: pytest-xdist, --dist loadgroup). A module's tests
    share a worker, so its module-scoped lab is made once; the kubelet-lab modules share one worker and go first,
    being the longest, while the other worker takes the light-lab modules.
    With the speed paths off (`make e2e-plain`) the kubelet-lab modules are skipped: their fabric runs in the
    image's pods, whose pinned ansible-core keeps the speed paths on whatever this process's environment says,
    so they would repeat the e2e group's run."""
    switch = os.environ.get(speed_paths.ENV, "")
    plain = f"{speed_paths.ENV}={switch}" if switch.strip().lower() in speed_paths.OFF_VALUES else None
    for item in items:
        name = item.path.name
        item.add_marker(pytest.mark.xdist_group("kubelet-lab" if name in KUBELET_LAB_MODULES else name))
        if plain and name in KUBELET_LAB_MODULES:
            item.add_marker(pytest.mark.skip(reason=f"{plain}: a kubelet-lab module; its fabric runs in the image's pods "
                                                    "(pinned ansible-core, speed paths on), as in the e2e group"))
    items.sort(key=lambda item: item.path.name not in KUBELET_LAB_MODULES)  # stable: each module keeps its order


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
