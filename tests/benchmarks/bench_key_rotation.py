"""Key rotation under traffic: on two connected lab clusters (one node, one pod each), three
`rotate_keys` runs, each under a 50 ms ping from A's pod to B's pod through the tunnel (the ping starts 1 s
before and ends after the rotation): packets transmitted / received / lost, the longest RTT (the time the
switched side's packets wait for the other side's handshake) and the rotation's wall time."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time

from tests.benchmarks.report import figure
from tests.e2e import fabric
from tests.e2e.fabric import get, translate
from tests.lab import Lab, netns

RUNS = 3
PING_SECONDS = 40


def sides(lab) -> dict:
    return dict(kubeconfig=lab["a"].kubeconfig, remote_kubeconfig=lab["b"].kubeconfig,
                gateway_group="cluster_a_gateway", remote_gateway_group="cluster_b_gateway")


def one(lab, target: str) -> dict:
    pod_a = lab["a"].gateway_nodes[0].pods[0]
    count = PING_SECONDS * 20
    ping = netns.popen_in(pod_a.netns, ["ping", "-n", "-i", "0.05", "-c", str(count), "-W", "10", target],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = {}

    def rotate():
        time.sleep(1)
        t0 = time.monotonic()
        fabric.playbook("rotate_keys", lab.inventory_path, **sides(lab))
        out["seconds"] = time.monotonic() - t0

    worker = threading.Thread(target=rotate)
    worker.start()
    text = ping.communicate(timeout=PING_SECONDS + 60)[0]
    worker.join(timeout=120)
    if "seconds" not in out:
        raise RuntimeError("the rotation did not finish within the ping")
    m = re.search(r"(\d+) packets transmitted, (\d+) received", text)
    out["sent"], out["received"] = int(m.group(1)), int(m.group(2))
    out["max_rtt"] = max(float(x) for x in re.findall(r"time=([\d.]+) ms", text))
    return out


def run():
    if os.geteuid() != 0:
        print("  skipped: needs root for network namespaces")
        return
    for tool in ("kubectl", "wireguard-go", "wg", "ping"):
        if not shutil.which(tool):
            print(f"  skipped: {tool} is not installed")
            return
    with Lab([{"name": "a"}, {"name": "b"}], pod_cidr="10.243.0.0/16", nodes=1, pods_per_node=1) as lab:
        a, b = lab["a"], lab["b"]
        fabric.install(a)
        fabric.install(b)
        fabric.playbook("connect", lab.inventory_path, wait=True, wait_timeout=20, **sides(lab))
        remapped = get(a, "configurations")[0]["status"]["remote"]["cidr"]["pod"][0]
        target = translate(b.gateway_nodes[0].pods[0].ip, b.pod_cidr, remapped)
        for i in range(RUNS):
            r = one(lab, target)
            print(f"  rotation {i + 1}: {r['sent']} transmitted, {r['received']} received, "
                  f"{r['sent'] - r['received']} lost", flush=True)
            figure(f"rotation {i + 1}: packets lost of a 50 ms ping", r["sent"] - r["received"], "packets", target=0)
            figure(f"rotation {i + 1}: longest RTT (switched side's packets queued)", r["max_rtt"], "ms")
            figure(f"rotation {i + 1}: rotate_keys wall time", r["seconds"], "s")
