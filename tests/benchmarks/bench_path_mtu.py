"""spec.mtu auto: how long one probe of the path takes, on two lab clusters (one node, one pod each) connected with
`-e mtu=auto` through a router (LabWan(routed=True)), read from the gateway hosts' live probes (their last probe's
`seconds`): a path that carries everything the local interface does (1500), a 1380-byte and a 1300-byte black
hole. A black hole costs the probe a
timeout (0.3 s) per size that does not cross. Then how long the tunnel takes to follow a black hole that appears
(1300, from the change of the path to the lowered tunnel MTU: up to one probe period) and to grow back once the
path is 1500 again (the period times the confirmations); last a 1380-byte path that says so (ICMP "fragmentation
needed")."""
from __future__ import annotations

import contextlib
import os
import shutil
import time

from tests.benchmarks.report import figure
from tests.e2e import fabric
from tests.e2e.api_forward import ApiIntoNetns
from tests.e2e.test_path_mtu import live_mtu, watch

PROBES = 2
# black holes first: a "fragmentation needed" leaves a route exception on the gateway hosts for 10 minutes, which
# caps the probes (and keeps the tunnel from growing back) until it expires
PATHS = [(1500, False, "1500 path"), (1380, False, "1380 black hole"), (1300, False, "1300 black hole")]


def _next_probes(cluster, count):
    """The `seconds` of the next `count` probes of the cluster's live probe."""
    seen = watch(cluster)["probes"]
    out = []
    deadline = time.monotonic() + 30 * count
    while len(out) < count and time.monotonic() < deadline:
        w = watch(cluster)
        if w["probes"] > seen:
            seen = w["probes"]
            out.append(w["last_probe"]["seconds"])
        time.sleep(0.2)
    return out


def _until(predicate, timeout):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if predicate():
            return time.monotonic() - t0
        time.sleep(0.2)
    return None


def run():
    if os.geteuid() != 0:
        print("  skipped: needs root for network namespaces")
        return
    for tool in ("kubectl", "wireguard-go", "wg", "ping", "nft"):
        if not shutil.which(tool):
            print(f"  skipped: {tool} is not installed")
            return
    with fabric.lab_pair(nodes=1, pods_per_node=1, wan_routed=True) as lab, contextlib.ExitStack() as stack:
        for c in (lab["a"], lab["b"]):
            stack.enter_context(ApiIntoNetns(c.gateway_nodes[0].netns, c.kubeconfig))
        lab.wan.set_path(1500, icmp=True)
        t0 = time.monotonic()
        fabric.playbook("connect", lab.inventory_path, wait=True, wait_timeout=60, mtu="auto", **fabric.sides(lab),
                        gateway_group="cluster_a_gateway", remote_gateway_group="cluster_b_gateway")
        figure("connect -e mtu=auto wait=true (1500 path), wall time", time.monotonic() - t0, "s")
        for mtu, icmp, what in PATHS:
            lab.wan.set_path(mtu, icmp=icmp)
            seconds = _next_probes(lab["a"], PROBES + 1)[1:]   # the first may have started before the change
            for i, s in enumerate(seconds):
                figure(f"one probe of the path, {what} (probe {i + 1})", s, "s")
        lab.wan.set_path(1500, icmp=False)
        _until(lambda: live_mtu(lab["a"]) == 1440, 90)
        t0 = time.monotonic()
        lab.wan.set_path(1300, icmp=False)
        lowered = _until(lambda: live_mtu(lab["a"]) == 1232, 60)
        figure("a 1300 black hole appears: the tunnel follows after", lowered if lowered is not None else float("inf"),
               "s", target=30)
        lab.wan.set_path(1500, icmp=False)
        raised = _until(lambda: live_mtu(lab["a"]) == 1440, 120)
        figure("the path is 1500 again: the tunnel grows back after", raised if raised is not None else float("inf"),
               "s")
        lab.wan.set_path(1380, icmp=True)
        for i, s in enumerate(_next_probes(lab["a"], PROBES + 1)[1:]):
            figure(f"one probe of the path, 1380 path with frag-needed (probe {i + 1})", s, "s")
