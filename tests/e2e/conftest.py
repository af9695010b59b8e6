"""Lab clusters for end-to-end tests (real kube-apiserver + etcd, netns nodes and pods)."""
import os

import pytest

from ansible_collections.liqo.fabric.plugins.plugin_utils import speed
from tests.conftest import require_root
from tests.e2e import real_nodes
from tests.lab import Lab

# the real-node scope's name for the scheduler below
REAL_NODE_SCOPE = "tests/e2e/real_nodes.py (shared lab)"


def pytest_collection_modifyitems(items):
    """The e2e group runs in two workers (hack/run-tests.sh: pytest-xdist, --dist loadfile, handed out in this
    order). The kubelet-lab modules (real_nodes.MODULES, the heaviest) go first, one after the other: they share
    one real-node lab on one worker (pytest_xdist_make_scheduler below).
    With the speed paths off in the environment they skip: their fabric runs in the image's pods, whose pinned
    ansible-core keeps the speed paths on whatever this process's environment says, so they would repeat the e2e
    group's run."""
    plain = speed.switched_off()
    for item in items:
        if plain and item.path.name in real_nodes.MODULES + real_nodes.LATER:
            item.add_marker(pytest.mark.skip(reason=f"{plain}: a kubelet-lab module; its fabric runs in the image's pods "
                                                    "(pinned ansible-core, speed paths on), as in the e2e group"))
    order = {name: i for i, name in enumerate(real_nodes.MODULES + real_nodes.LATER)}
    items.sort(key=lambda item: order.get(item.path.name, len(order)))  # stable: each module keeps its order


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: absent when the run has no workers
def pytest_xdist_make_scheduler(config, log):
    """--dist loadfile with the kubelet-lab modules as one unit of work, so that one worker runs them back to back
    on their shared lab, then the real-node modules with a lab of their own (real_nodes.LATER)."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling  # pylint: disable=import-outside-toplevel

    class SharedRealNodeLab(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            return REAL_NODE_SCOPE if os.path.basename(path) in real_nodes.MODULES + real_nodes.LATER else path

    return SharedRealNodeLab(config, log)


@pytest.fixture(scope="session")
def real_node_lab():
    """The kubelet-lab modules' shared lab (tests/e2e/real_nodes.py): each module takes it with get() and gives it
    back with release(request); down at the latest when the worker's session ends."""
    require_root()
    shared = real_nodes.SharedLab()
    try:
        yield shared
    finally:
        shared.down()


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
