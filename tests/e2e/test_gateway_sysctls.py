"""The host-wide sysctls a gateway host needs (forwarding, loose reverse-path filtering) are put back by the
playbooks that take its gateways away: `disconnect`, and `reset` (which disconnects first). Both run on a
lab whose gateway hosts start with rp_filter at 0; after each, the values are the ones found before connect
and the host's record file is gone. tests/integration/test_gateway_dataplane.py covers two gateways on one
host."""
import os
import shutil

import pytest

from tests.e2e import fabric
from tests.e2e.fabric import playbook
from tests.lab import netns

pytestmark = pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl is not installed")
PATHS = {"net.ipv4.ip_forward": "/proc/sys/net/ipv4/ip_forward", "net.ipv4.conf.all.rp_filter": "/proc/sys/net/ipv4/conf/all/rp_filter"}


@pytest.fixture(scope="module")
def lab():
    with fabric.lab_pair() as lab_:
        yield lab_


def sysctls(ns):
    return {name: netns.exec_in(ns, ["cat", path]).stdout.strip() for name, path in PATHS.items()}


def record(ns):
    return f"/run/liqo-fabric-sysctl-{ns}.conf"


def gateway_hosts(lab):
    return [lab["a"].gateway_nodes[0].netns, lab["b"].gateway_nodes[0].netns]


def sides(lab):
    return {"kubeconfig": lab["a"].kubeconfig, "remote_kubeconfig": lab["b"].kubeconfig,
            "gateway_group": "cluster_a_gateway", "remote_gateway_group": "cluster_b_gateway"}


def connect_from_loose_filtering_off(lab):
    hosts = gateway_hosts(lab)
    for ns in hosts:
        netns.sysctl_in(ns, {"net.ipv4.conf.all.rp_filter": "0"})
    found = {ns: sysctls(ns) for ns in hosts}
    playbook("connect", lab.inventory_path, wait=True, wait_timeout=20, **sides(lab))
    for ns in hosts:
        assert sysctls(ns) == {"net.ipv4.ip_forward": "1", "net.ipv4.conf.all.rp_filter": "2"}, ns
        with open(record(ns), encoding="ascii") as f:
            assert "net.ipv4.conf.all.rp_filter=0" in f.read()  # the value found before, kept for the last one
    return found


@pytest.mark.parametrize("command", ["disconnect", "reset"])
def test_teardown_puts_the_sysctls_back(lab, command):
    found = connect_from_loose_filtering_off(lab)
    playbook(command, lab.inventory_path, confirm="yes", **sides(lab))
    for ns in gateway_hosts(lab):
        assert sysctls(ns) == found[ns], ns
        assert not os.path.exists(record(ns)), record(ns)
