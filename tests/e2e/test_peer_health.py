"""Live peer health on two connected lab clusters (agentless path): the gateway role leaves one
probe process per gateway on the gateway host. The remote gateway's tunnel goes down -> the local Connection
is Error and liqo_peer_is_connected 0 within 10 s; it comes back -> Connected within 10 s; WireGuard's byte
counters in the metrics rise with traffic; a rerun of connect leaves the processes alone; disconnect leaves no
process and no file. The lab's gateway hosts reach their cluster's API as real ones do (api_forward). States
are polled with a deadline (tests/benchmarks/bench_peer_health.py measures the times)."""
import contextlib
import os
import shutil
import time

import pytest

from tests.conftest import process_reaped
from tests.e2e import fabric
from tests.e2e.api_forward import ApiIntoNetns
from tests.e2e.fabric import playbook
from tests.lab import netns
from ansible_collections.liqo.fabric.plugins.module_utils.health import daemon as phd

pytestmark = pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl is not installed")
GROUPS = {"gateway_group": "cluster_a_gateway", "remote_gateway_group": "cluster_b_gateway",
          "nodes_group": "cluster_a_nodes", "remote_nodes_group": "cluster_b_nodes"}


@pytest.fixture(scope="module")
def lab():
    with fabric.lab_pair() as lab_, contextlib.ExitStack() as stack:
        for c in (lab_["a"], lab_["b"]):  # a gateway host reaches its cluster's API (the lab's is on loopback)
            stack.enter_context(ApiIntoNetns(c.gateway_nodes[0].netns, c.kubeconfig))
        playbook("connect", lab_.inventory_path, **fabric.sides(lab_), wait=True, wait_timeout=60, **GROUPS)
        yield lab_


def gateway_host(cluster):
    node = cluster.gateway_nodes[0]
    return node.netns, os.path.join(cluster.workdir, "health", node.netns)


def connection(cluster):
    items = fabric.get(cluster, "connections")
    assert len(items) == 1, items
    return items[0]


def interface_of(state_dir):
    names = phd.running(state_dir)
    assert len(names) == 1, names
    return names[0]


def metric(text, name):
    line = next(x for x in text.splitlines() if x.startswith(name + "{"))
    return line.split("{", 1)[1].split("}")[0], float(line.rsplit(" ", 1)[1])


def poll(fn, deadline, describe=lambda: ""):
    start = time.monotonic()
    while time.monotonic() - start < deadline:
        if fn():
            return time.monotonic() - start
        time.sleep(0.1)
    raise AssertionError(f"not reached within {deadline} s: {describe()}")


def test_connection_follows_the_remote_gateway_down_and_up(lab):
    a, b = lab["a"], lab["b"]
    _ns_a, dir_a = gateway_host(a)
    ns_b, dir_b = gateway_host(b)
    if_a, if_b = interface_of(dir_a), interface_of(dir_b)
    conn = connection(a)
    assert conn["status"]["value"] == "Connected", conn["status"]
    poll(lambda: phd.query(dir_a, if_a)["value"] == "Connected", 10)
    labels, value = metric(phd.query(dir_a, if_a, "metrics"), "liqo_peer_is_connected")
    assert value == 1 and labels == f'driver="wireguard",cluster_id="{b.cluster_id}"', labels
    assert metric(phd.query(dir_a, if_a, "metrics"), "liqo_peer_latency_us")[1] > 0

    # byte counters rise with traffic through the tunnel (full-size pings to the remote transit address)
    rx0 = metric(phd.query(dir_a, if_a, "metrics"), "liqo_peer_receive_bytes_total")[1]
    tx0 = metric(phd.query(dir_a, if_a, "metrics"), "liqo_peer_transmit_bytes_total")[1]
    peer = phd.query(dir_a, if_a)["address"]
    assert netns.exec_in(gateway_host(a)[0], ["ping", "-c", "20", "-i", "0.01", "-s", "1000", "-q", "-I", if_a, peer],
                         check=False).returncode == 0
    rx1 = metric(phd.query(dir_a, if_a, "metrics"), "liqo_peer_receive_bytes_total")[1]
    tx1 = metric(phd.query(dir_a, if_a, "metrics"), "liqo_peer_transmit_bytes_total")[1]
    assert rx1 >= rx0 + 20_000 and tx1 >= tx0 + 20_000, (rx0, rx1, tx0, tx1)

    # the remote gateway's tunnel goes down
    netns.exec_in(ns_b, ["ip", "link", "set", "dev", if_b, "down"])

    def seen():
        return connection(a)["status"], phd.query(dir_a, if_a), phd.query(dir_b, if_b)

    poll(lambda: connection(a)["status"]["value"] == "Error"
         and metric(phd.query(dir_a, if_a, "metrics"), "liqo_peer_is_connected")[1] == 0, 10, seen)
    cond = next(c for c in connection(a)["status"]["conditions"] if c["type"] == "Established")
    assert cond["status"] == "False" and cond["reason"] == "PeerUnreachable", cond
    assert "latency" not in connection(a)["status"]

    # and comes back
    netns.exec_in(ns_b, ["ip", "link", "set", "dev", if_b, "up"])
    poll(lambda: connection(a)["status"]["value"] == "Connected"
         and metric(phd.query(dir_a, if_a, "metrics"), "liqo_peer_is_connected")[1] == 1, 10, seen)
    assert connection(a)["status"]["latency"]["value"].endswith("ms")

    # the routes the link took with it come back with a rerun; the probe processes are left alone
    pid = phd.query(dir_a, if_a)["pid"]
    playbook("connect", lab.inventory_path, kubeconfig=a.kubeconfig, remote_kubeconfig=b.kubeconfig, wait=True,
             wait_timeout=60, **GROUPS)
    assert phd.query(dir_a, if_a)["pid"] == pid

    # disconnect: no probe process, no file
    playbook("disconnect", lab.inventory_path, kubeconfig=a.kubeconfig, remote_kubeconfig=b.kubeconfig, confirm="yes",
             **GROUPS)
    for d in (dir_a, dir_b):
        assert not os.path.exists(d) or os.listdir(d) == [], os.listdir(d)
    assert process_reaped(pid), pid
