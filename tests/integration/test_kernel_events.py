"""Kernel notifications of a real network namespace reach the controller as they happen: each change that can undo
a build (a link deleted or its MTU changed, a route table flushed, a rule deleted, an nftables table flushed, a
watched process killed) is reported, a new route alone is not, and a deleted namespace is let go (its listener
ends, so the controller does not keep it alive)."""
import os
import queue
import signal
import subprocess
import time

import pytest

from controller.kernel_events import KernelEvents, classify
from tests.conftest import require_root


def sh(*argv):
    subprocess.run(list(argv), check=True, capture_output=True, text=True)


@pytest.fixture
def netns():
    require_root()
    name = f"lfab{os.urandom(2).hex()}ke"
    sh("ip", "netns", "add", name)
    try:
        sh("ip", "-n", name, "link", "set", "lo", "up")
        sh("ip", "-n", name, "link", "add", "ke0", "type", "veth", "peer", "name", "ke1")
        sh("ip", "-n", name, "link", "set", "ke0", "up")
        sh("ip", "-n", name, "link", "set", "ke1", "up")
        sh("ip", "-n", name, "route", "add", "10.98.0.0/16", "dev", "ke0", "table", "18952")
        sh("ip", "-n", name, "rule", "add", "priority", "1900", "to", "10.98.0.0/16", "lookup", "18952")
        subprocess.run(["ip", "netns", "exec", name, "nft", "-f", "-"], check=True, text=True,
                       input="table ip lfabke {\n chain post {\n  type nat hook postrouting priority 100;\n"
                             "  ip saddr 10.243.0.0/16 snat ip prefix to 10.72.0.0/16\n }\n}\n")
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


@pytest.fixture
def events(netns):
    got = queue.Queue()
    ke = KernelEvents(lambda ns, what: got.put((ns, what)))
    ke.watch({netns: {}})
    assert netns in ke.spaces, ke.unlistenable
    yield ke, got
    ke.close()


def next_event(got, timeout=3.0):
    try:
        return got.get(timeout=timeout)
    except queue.Empty:
        return None


def drain(got):
    time.sleep(0.3)
    while not got.empty():
        got.get_nowait()


@pytest.mark.parametrize("change, words", [
    (["ip", "-n", "{ns}", "route", "flush", "table", "18952"], "route deleted"),
    (["ip", "-n", "{ns}", "rule", "del", "priority", "1900"], "rule deleted"),
    (["ip", "netns", "exec", "{ns}", "nft", "flush", "table", "ip", "lfabke"], "nftables changed"),
    (["ip", "-n", "{ns}", "link", "set", "ke0", "mtu", "1300"], "link changed"),
    (["ip", "-n", "{ns}", "link", "del", "ke0"], "link"),
    (["ip", "netns", "exec", "{ns}", "sysctl", "-qw", "net.ipv4.conf.all.forwarding=1"], "forwarding setting changed"),
], ids=["route-flush", "rule-delete", "nft-flush", "mtu", "link-delete", "forwarding"])
def test_a_change_that_undoes_a_build_is_reported(netns, events, change, words):
    got = events[1]
    drain(got)
    sh(*[a.format(ns=netns) for a in change])
    ev = next_event(got)
    assert ev is not None, f"no notification after {change}"
    assert ev[0] == netns and words in ev[1], ev


def test_a_new_route_alone_is_not_a_fault(netns, events):
    got = events[1]
    drain(got)
    sh("ip", "-n", netns, "route", "add", "10.99.0.0/16", "dev", "ke0", "table", "18952")
    assert next_event(got, timeout=1.0) is None


def test_a_watched_process_exit_is_reported(netns, events):
    ke, got = events
    proc = subprocess.Popen(["sleep", "60"])
    try:
        ke.watch({netns: {proc.pid: "a probe"}})
        drain(got)
        os.kill(proc.pid, signal.SIGKILL)
        ev = next_event(got)
        assert ev == (netns, f"a probe (pid {proc.pid}) exited"), ev
    finally:
        proc.kill()
        proc.wait()


def test_a_deleted_namespace_is_let_go(netns, events):
    ke = events[0]
    # the namespace holds a veth whose peer is in the host: deleting the namespace deletes the pair at once, which
    # happens only when nothing (no listener socket) keeps the namespace alive
    peer = f"ke{os.urandom(2).hex()}"
    sh("ip", "link", "add", peer, "type", "veth", "peer", "name", "kein", "netns", netns)
    try:
        sh("ip", "netns", "del", netns)
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and os.path.exists(f"/sys/class/net/{peer}"):
            time.sleep(0.05)
        assert netns not in ke.spaces, "the listener still holds the deleted namespace"
        assert not os.path.exists(f"/sys/class/net/{peer}"), "the deleted namespace's veth pair is still there"
    finally:
        subprocess.run(["ip", "link", "del", peer], check=False, capture_output=True)


def test_many_namespaces_share_one_poller(netns, events):
    """Namespaces are added and dropped as the manifests change, one thread polling them all."""
    ke, got = events
    other = f"lfab{os.urandom(2).hex()}ke"
    sh("ip", "netns", "add", other)
    try:
        ke.watch({netns: {}, other: {}})
        assert set(ke.spaces) == {netns, other}
        drain(got)
        sh("ip", "-n", other, "link", "add", "x0", "type", "veth", "peer", "name", "x1")
        sh("ip", "-n", other, "link", "del", "x0")
        ev = next_event(got)
        assert ev is not None and ev[0] == other, ev
        ke.watch({netns: {}})
        assert set(ke.spaces) == {netns}
        assert sum(1 for t in __import__("threading").enumerate() if t.name == "kernel-events") == 1
    finally:
        subprocess.run(["ip", "netns", "del", other], check=False)


def test_classify_reads_every_message_of_a_batch():
    import struct
    new_route = struct.pack("=IHHII", 16, 24, 0, 0, 0)
    del_rule = struct.pack("=IHHII", 16, 33, 0, 0, 0)
    nft_gen = struct.pack("=IHHII", 16, (10 << 8) | 15, 0, 0, 0)
    nft_delrule = struct.pack("=IHHII", 16, (10 << 8) | 8, 0, 0, 0)
    assert classify(new_route) is None
    assert classify(nft_gen) is None
    assert classify(new_route + del_rule) == "rule deleted"
    assert classify(nft_gen + nft_delrule) == "nftables changed"
