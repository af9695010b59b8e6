"""`make demo`: two lab clusters that both use 10.243.0.0/16, connected by the fabric.

Brings the clusters up, installs the API, runs `connect` (the seeds' `liqoctl network connect` flow, with the
overlay on every node), prints the seeds' kubectl views, a cross-cluster TCP request with the addresses each
side saw, a ping matrix from every pod of A to every pod of B, then disconnects and tears everything down."""
from __future__ import annotations

import shutil
import subprocess
import time

from tests.e2e import fabric
from tests.e2e.fabric import PeerServer, seen_source, translate
from tests.lab.lab import Lab


def kubectl(kubeconfig: str, *args: str) -> str:
    if shutil.which("kubectl"):
        proc = subprocess.run(["kubectl", "--kubeconfig", kubeconfig, *args], capture_output=True, text=True,
                              check=False)
        return (proc.stdout + proc.stderr).rstrip()
    return "(kubectl not installed: skipping this view)"


def step(title: str) -> None:
    print(f"\n== {title}", flush=True)


def main() -> int:
    step("two lab clusters, 'a' and 'b', both with pod CIDR 10.243.0.0/16 (3 nodes x 2 pods each)")
    t0 = time.monotonic()
    groups = dict(gateway_group="cluster_a_gateway", remote_gateway_group="cluster_b_gateway",
                  nodes_group="cluster_a_nodes", remote_nodes_group="cluster_b_nodes")
    with Lab([{"name": "a"}, {"name": "b"}], pod_cidr="10.243.0.0/16", nodes=3, pods_per_node=2) as lab:
        a, b = lab["a"], lab["b"]
        print(f"   up in {time.monotonic() - t0:.1f} s; kubeconfigs {a.kubeconfig} and {b.kubeconfig}")
        print(kubectl(a.kubeconfig, "get", "nodes,pods", "-o", "wide"))

        step("ansible-playbook liqo.fabric.install on both clusters (CRDs, templates, network configuration)")
        for cluster in (a, b):
            fabric.install(cluster)

        step(f"ansible-playbook -i {lab.inventory_path} liqo.fabric.connect "
             "-e kubeconfig=<a> -e remote_kubeconfig=<b> -e wait=true")
        t1 = time.monotonic()
        out = fabric.playbook("connect", lab.inventory_path, kubeconfig=a.kubeconfig,
                              remote_kubeconfig=b.kubeconfig, wait=True, wait_timeout=30, **groups).stdout
        print(out.rstrip())
        print(f"   connected in {time.monotonic() - t1:.1f} s")

        for cluster, kinds in ((a, ("configurations", "gatewayclients", "connections")),
                               (b, ("configurations", "gatewayservers", "connections"))):
            for kind in kinds:
                step(f"cluster {cluster.name}: kubectl get {kind}.networking.liqo.io -A")
                print(kubectl(cluster.kubeconfig, "get", f"{kind}.networking.liqo.io", "-A"))

        remap_a = fabric.get(a, "configurations")[0]["status"]["remote"]["cidr"]["pod"][0]
        remap_b = fabric.get(b, "configurations")[0]["status"]["remote"]["cidr"]["pod"][0]
        src, dst = a.nodes[1].pods[0], b.nodes[2].pods[1]
        target = translate(dst.ip, b.pod_cidr, remap_a)
        step(f"cross-cluster request: {src.name} of a ({src.ip}, on {a.nodes[1].name}) connects to {target}, "
             f"which a's IPAM maps to {dst.name} of b ({dst.ip}, on {b.nodes[2].name})")
        with PeerServer(dst.netns):
            seen = seen_source(src.netns, target)
        print(f"   the server in b saw the client as {seen} "
              f"(b's remap of a is {remap_b}: {src.ip} -> {translate(src.ip, a.pod_cidr, remap_b)}, host bits kept)")
        ok = seen == translate(src.ip, a.pod_cidr, remap_b)

        step("ping matrix: every pod of a to every pod of b at its remapped address")
        failures = 0
        for p in a.pods:
            row = []
            for q in b.pods:
                reached = a.ping(p.netns, translate(q.ip, b.pod_cidr, remap_a))
                failures += not reached
                row.append("ok" if reached else "--")
            print(f"   {p.name:<9} " + " ".join(row))
        print(f"   {len(a.pods) * len(b.pods) - failures}/{len(a.pods) * len(b.pods)} reached")
        ok = ok and failures == 0

        step("ansible-playbook liqo.fabric.disconnect -e confirm=yes")
        print(fabric.playbook("disconnect", lab.inventory_path, kubeconfig=a.kubeconfig,
                              remote_kubeconfig=b.kubeconfig, confirm="yes", **groups).stdout.rstrip())
    step(f"lab torn down in {lab.timings['down']:.1f} s; total {time.monotonic() - t0:.0f} s")
    return 0 if ok else 1
