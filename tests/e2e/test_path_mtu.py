"""spec.mtu auto, agentless: two lab clusters whose gateways reach each other through a router with a smaller path
MTU (LabWan(routed=True)), which says so with ICMP "fragmentation needed" or drops oversize datagrams silently (a
PMTU black hole). With a fixed 1340 a black hole stalls bulk transfers while small requests pass; with auto the
gateways find the path, publish it (status.mtu, source probed) and carry 10 MB both ways in 1,400-byte writes; the
tunnel follows the path down within the watch's period and back up once the larger size is confirmed, one change
each way. The tests run in order on one lab (each builds on the previous)."""
import contextlib
import os
import shutil
import subprocess
import sys
import threading
import time

import pytest

from tests.e2e import fabric
from tests.e2e.api_forward import ApiIntoNetns
from tests.e2e.fabric import PeerServer, get, playbook, seen_source, translate, wait_for
from tests.lab import netns
from ansible_collections.liqo.fabric.plugins.module_utils.health import daemon as phd

pytestmark = pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl is not installed")

TOTAL = 1400 * 7490           # ~10 MB in 1,400-byte writes
PORT = 7100
STALL = 8                     # seconds without progress that make a transfer stalled

SINK = r"""
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(4); print("ready", flush=True)
while True:
    c, addr = s.accept(); c.settimeout(float(sys.argv[2]))
    try:
        n = 0
        while True:
            d = c.recv(65536)
            if not d:
                break
            n += len(d)
        chunk, sent = b"y" * 1400, 0
        while sent < n:
            c.sendall(chunk[:min(1400, n - sent)]); sent += min(1400, n - sent)
        c.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    c.close()
"""

SOURCE = r"""
import socket, sys
total, stall = int(sys.argv[3]), float(sys.argv[4])
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=stall)
sent = got = 0
try:
    chunk = b"x" * 1400
    while sent < total:
        c.sendall(chunk); sent += 1400
    c.shutdown(socket.SHUT_WR)
    while True:
        d = c.recv(65536)
        if not d:
            break
        got += len(d)
except socket.timeout:
    print("stalled %d %d" % (sent, got)); sys.exit(3)
print("done %d %d" % (sent, got))
"""


class Sink:
    """A TCP server in a pod netns that reads a transfer to its end, then sends as many bytes back in 1,400-byte
    writes."""

    def __init__(self, pod_netns, stall=STALL):
        self.proc = netns.popen_in(pod_netns, [sys.executable, "-c", SINK, str(PORT), str(stall)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "ready"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(timeout=5)


def transfer(client_netns, address, stall=STALL):
    """(outcome, bytes sent, bytes received back) of ~10 MB each way; outcome done or stalled (no progress for
    `stall` seconds)."""
    proc = netns.exec_in(client_netns, [sys.executable, "-c", SOURCE, address, str(PORT), str(TOTAL), str(stall)],
                         check=False, timeout=300)
    words = proc.stdout.split()
    assert words and words[0] in ("done", "stalled"), proc.stdout + proc.stderr
    return words[0], int(words[1]), int(words[2])


@pytest.fixture(scope="module")
def lab():
    with fabric.lab_pair(nodes=1, pods_per_node=1, wan_routed=True) as lab_, contextlib.ExitStack() as stack:
        for c in (lab_["a"], lab_["b"]):  # a gateway host reaches its cluster's API (the lab's is on loopback)
            stack.enter_context(ApiIntoNetns(c.gateway_nodes[0].netns, c.kubeconfig))
        yield lab_


def connect(lab, **extra):
    return playbook("connect", lab.inventory_path, check=False, kubeconfig=lab["a"].kubeconfig,
                    remote_kubeconfig=lab["b"].kubeconfig, gateway_group="cluster_a_gateway",
                    remote_gateway_group="cluster_b_gateway", **extra)


def remapped(cluster):
    return get(cluster, "configurations")[0]["status"]["remote"]["cidr"]["pod"][0]


def pods(lab):
    a, b = lab["a"], lab["b"]
    pod_a, pod_b = a.nodes[0].pods[0], b.nodes[0].pods[0]
    return (pod_a, translate(pod_a.ip, a.pod_cidr, remapped(b))), (pod_b, translate(pod_b.ip, b.pod_cidr, remapped(a)))


def gateway(cluster):
    items = get(cluster, "gatewayservers") + get(cluster, "gatewayclients")
    assert len(items) == 1, items
    return items[0]


def tunnel_mtu(cluster):
    """The live MTU of the cluster's WireGuard interface, read on its gateway host (raised while a probe runs)."""
    node = cluster.nodes[0]
    for line in netns.exec_in(node.netns, ["ip", "-o", "link"]).stdout.splitlines():
        name = line.split(":")[1].strip()
        if name.startswith("lwg"):
            return int(line.split(" mtu ")[1].split()[0])
    raise AssertionError("no tunnel interface on %s" % node.netns)


def watch(cluster):
    """The path watch of the gateway host's live probe process: status (status.mtu after its last probe), changes
    (made, by direction), probes."""
    node = cluster.gateway_nodes[0]
    state_dir = os.path.join(cluster.workdir, "health", node.netns)
    interface = next(f[:-len(".sock")] for f in os.listdir(state_dir) if f.endswith(".sock"))
    return phd.query(state_dir, interface)["path_mtu"]


def live_mtu(cluster):
    """The tunnel MTU the live probe set (the interface's, outside a probe)."""
    return ((watch(cluster) or {}).get("status") or {}).get("value")


class MtuRecorder(fabric.ChangeRecorder):
    """The tunnel MTUs the live probes of both clusters set, read every 0.2 s while a scenario runs: each change is
    recorded, with the changes the watches counted."""

    def __init__(self, lab):
        self.lab = lab
        self.changes = {name: dict(watch(lab[name])["changes"]) for name in ("a", "b")}
        super().__init__(("a", "b"), lambda name: live_mtu(lab[name]))

    def stop(self):
        """{cluster: the MTUs seen}, {cluster: {lower, raise}: the changes made meanwhile}."""
        seen = super().stop()
        after = {name: watch(self.lab[name])["changes"] for name in ("a", "b")}
        return seen, {name: {k: after[name][k] - self.changes[name][k] for k in after[name]} for name in after}


def test_fixed_1340_through_a_black_hole_passes_small_requests_and_stalls_transfers(lab):
    lab.wan.set_path(1380, icmp=False)
    proc = connect(lab, mtu=1340)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (pod_a, addr_a), (pod_b, addr_b) = pods(lab)
    with PeerServer(pod_b.netns):  # a small request crosses: the tunnel looks fine
        assert wait_for(lambda: _seen(pod_a.netns, addr_b), timeout=30, what="a small request through the tunnel")
    with Sink(pod_b.netns):
        outcome, sent, got = transfer(pod_a.netns, addr_b)
    assert outcome == "stalled" and got == 0, (outcome, sent, got)


def _seen(client_netns, address):
    try:
        return seen_source(client_netns, address)
    except AssertionError:
        return None


def test_auto_through_a_path_that_says_fragmentation_needed_connects_and_transfers_both_ways(lab):
    lab.wan.set_path(1380, icmp=True)
    proc = connect(lab, mtu="auto", wait=True, wait_timeout=60)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # the client probed at connect, the server's live probe finds the same path
    for name in ("a", "b"):
        wait_for(lambda name=name: (gateway(lab[name]).get("status") or {}).get("mtu", {}).get("source") == "probed",
                 timeout=30, what="cluster %s's gateway status.mtu probed" % name)
        mtu = gateway(lab[name])["status"]["mtu"]
        assert mtu["value"] == 1312 and mtu["probed"] == 1312 and mtu["pathMTU"] == 1372, mtu
        wait_for(lambda name=name: live_mtu(lab[name]) == 1312, timeout=15, what="cluster %s's live probe" % name)
        conn = get(lab[name], "connections")[0]
        assert conn["status"]["value"] == "Connected" and conn["status"]["mtu"] == {"value": 1312, "source": "probed"}
    _transfer_both_ways(lab)


def _transfer_both_ways(lab):
    (pod_a, addr_a), (pod_b, addr_b) = pods(lab)
    with Sink(pod_b.netns):
        assert transfer(pod_a.netns, addr_b) == ("done", TOTAL, TOTAL)
    with Sink(pod_a.netns):
        assert transfer(pod_b.netns, addr_a) == ("done", TOTAL, TOTAL)


def _forget_frag_needed(lab):
    """The route exceptions the router's "fragmentation needed" left on the gateway hosts (they expire after 10
    minutes): gone, as if expired."""
    for name in ("a", "b"):
        netns.exec_in(lab[name].nodes[0].netns, ["ip", "route", "flush", "cache"])


def test_auto_grows_with_the_path_once_confirmed_then_finds_a_black_hole(lab):
    _forget_frag_needed(lab)
    rec = MtuRecorder(lab)
    lab.wan.set_path(1500, icmp=False)
    try:
        for name in ("a", "b"):
            wait_for(lambda name=name: live_mtu(lab[name]) == 1440, timeout=90, what="cluster %s grows to 1440" % name)
    finally:
        seen, changes = rec.stop()
    assert seen == {"a": [1312, 1440], "b": [1312, 1440]}, seen     # one change each, no flapping
    assert changes == {"a": {"lower": 0, "raise": 1}, "b": {"lower": 0, "raise": 1}}, changes
    # now a black hole of 1380: nothing says so, the periodic probe finds it
    rec = MtuRecorder(lab)
    lab.wan.set_path(1380, icmp=False)
    try:
        for name in ("a", "b"):
            wait_for(lambda name=name: live_mtu(lab[name]) == 1312, timeout=30, what="cluster %s lowers to 1312" % name)
        _transfer_both_ways(lab)
    finally:
        seen, changes = rec.stop()
    assert seen == {"a": [1440, 1312], "b": [1440, 1312]}, seen
    assert changes == {"a": {"lower": 1, "raise": 0}, "b": {"lower": 1, "raise": 0}}, changes
    for name in ("a", "b"):
        assert tunnel_mtu(lab[name]) in (1312, 1440)  # 1440 only while a probe runs


def test_path_lowered_while_transferring_the_tunnel_follows_and_the_transfer_resumes(lab):
    (pod_a, addr_a), (pod_b, addr_b) = pods(lab)
    rec = MtuRecorder(lab)
    try:
        with Sink(pod_b.netns, stall=60):   # both ends wait out the black hole until the probes find it
            result = {}
            worker = threading.Thread(target=lambda: result.update(out=transfer(pod_a.netns, addr_b, stall=60)))
            worker.start()
            time.sleep(0.5)
            lab.wan.set_path(1300, icmp=False)
            for name in ("a", "b"):
                wait_for(lambda name=name: live_mtu(lab[name]) == 1232, timeout=30,
                         what="cluster %s lowers to 1232" % name)
            worker.join(timeout=240)
        assert result.get("out") == ("done", TOTAL, TOTAL), result
        lab.wan.set_path(1500, icmp=False)
        for name in ("a", "b"):
            wait_for(lambda name=name: live_mtu(lab[name]) == 1440, timeout=90, what="cluster %s grows back" % name)
        # one more probe of each watch after the raise (one a period): no flapping after it
        probes = {name: watch(lab[name])["probes"] for name in ("a", "b")}
        for name in ("a", "b"):
            wait_for(lambda name=name: watch(lab[name])["probes"] > probes[name], timeout=40, interval=0.2,
                     what="cluster %s's next probe after the raise" % name)
    finally:
        seen, changes = rec.stop()
    assert seen == {"a": [1312, 1232, 1440], "b": [1312, 1232, 1440]}, seen
    assert changes == {"a": {"lower": 1, "raise": 1}, "b": {"lower": 1, "raise": 1}}, changes
    for name in ("a", "b"):
        wait_for(lambda name=name: gateway(lab[name])["status"]["mtu"]["value"] == 1440, timeout=10,
                 what="cluster %s's status.mtu 1440" % name)
    _transfer_both_ways(lab)


def test_disconnect_leaves_no_residue(lab):
    before = fabric.wireguard_interfaces(lab)
    playbook("disconnect", lab.inventory_path, kubeconfig=lab["a"].kubeconfig, remote_kubeconfig=lab["b"].kubeconfig,
             gateway_group="cluster_a_gateway", remote_gateway_group="cluster_b_gateway", confirm="yes")
    assert fabric.residue(lab, before) == {}
