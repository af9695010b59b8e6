"""`make demo`: two lab clusters with the same pod CIDR, their nodes and pods, an intra-cluster ping.

Later features extend this to the whole fabric (connect, cross-cluster traffic)."""
from __future__ import annotations

import shutil
import subprocess
import time

from tests.lab.lab import Lab


def kubectl(kubeconfig: str, *args: str) -> str:
    if shutil.which("kubectl"):
        proc = subprocess.run(["kubectl", "--kubeconfig", kubeconfig, *args], capture_output=True, text=True,
                              check=False)
        return proc.stdout + proc.stderr
    return "(kubectl not installed: skipping this view)"


def main() -> int:
    print("== bringing up lab clusters 'a' and 'b', both with pod CIDR 10.243.0.0/16")
    t0 = time.monotonic()
    with Lab([{"name": "a"}, {"name": "b"}], pod_cidr="10.243.0.0/16", nodes=3, pods_per_node=2) as lab:
        print(f"   up in {time.monotonic() - t0:.1f} s (apiservers {lab.timings['apiservers_start']:.1f} s)")
        for name, cluster in lab.clusters.items():
            print(f"\n== cluster {name} (id {cluster.cluster_id}): "
                  f"kubectl --kubeconfig {cluster.kubeconfig} get nodes,pods -A -o wide")
            print(kubectl(cluster.kubeconfig, "get", "nodes,pods", "-A", "-o", "wide"))
        a = lab["a"]
        src, dst = a.nodes[0].pods[0], a.nodes[1].pods[0]
        print(f"== intra-cluster: {src.name} ({src.ip}, {a.nodes[0].name}) pings "
              f"{dst.name} ({dst.ip}, {a.nodes[1].name})")
        out = a.exec_in(src.netns, ["ping", "-n", "-c", "3", "-i", "0.2", "-W", "1", dst.ip], check=False)
        print(out.stdout.strip())
        b = lab["b"]
        print(f"\n== isolation: a-node-1 to b's gateway underlay address {b.nodes[0].underlay_ip} "
              f"(no fabric yet, must fail): "
              f"{'reachable (WRONG)' if a.ping(a.nodes[0].netns, b.nodes[0].underlay_ip) else 'unreachable, as expected'}")
        ok = out.returncode == 0
    print(f"\n== torn down in {lab.timings['down']:.1f} s")
    return 0 if ok else 1
