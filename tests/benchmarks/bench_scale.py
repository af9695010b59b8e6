"""Scale: the agentless path on two light-lab clusters of N nodes each (N = 10, 25, 50, 100; pods per node
LIQO_FABRIC_SCALE_PODS, default 3): lab up and down with its memory, connect, connect again with nothing changed,
reconcile_overlay of one cluster, disconnect; then connect and disconnect again with a task per node
(node_overlay_batch=false, the baseline of pending.yml's batch); each figure with its growth per added node (per
cluster) between sizes, and the targets at 100 nodes. `LIQO_FABRIC_SCALE_SIZES=10,25` measures fewer sizes.

Every playbook is a real `ansible-playbook` run against the lab (netns nodes, real apiservers); reachability is
checked by liqo.fabric.verify on the smallest size only (its cost grows with node pairs)."""
import os
import subprocess
import time

from tests.benchmarks.bench_lab import _mem_available_mib
from tests.benchmarks.report import MEASURED, figure, ratio
from tests.e2e import fabric
from tests.lab import Lab

SIZES = [int(x) for x in os.environ.get("LIQO_FABRIC_SCALE_SIZES", "10,25,50,100").split(",") if x]
PODS = int(os.environ.get("LIQO_FABRIC_SCALE_PODS", "3"))
# the targets on 2 x 100 nodes
TARGETS = {"connect": 30.0, "connect again (nothing changed)": 5.0, "disconnect": 15.0}


def timed(book, lab, **extra):
    t0 = time.monotonic()
    proc = fabric.playbook(book, lab.inventory_path, check=False, proc_timeout=1800, **extra)
    took = time.monotonic() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{book} failed on {lab.lab_id}: {proc.stdout[-2000:]}{proc.stderr[-1000:]}")
    return took


def one_size(n):
    out = {}
    before = _mem_available_mib()
    t0 = time.monotonic()
    lab = Lab([{"name": "a"}, {"name": "b"}], pod_cidr="10.243.0.0/16", nodes=n, pods_per_node=PODS).up()
    out["lab up"] = time.monotonic() - t0
    out["machine memory taken by the lab, MemAvailable drop (MiB)"] = before - _mem_available_mib()
    try:
        fabric.install(lab["a"])
        fabric.install(lab["b"])
        args = {"kubeconfig": lab["a"].kubeconfig, "remote_kubeconfig": lab["b"].kubeconfig,
                "gateway_group": "cluster_a_gateway", "remote_gateway_group": "cluster_b_gateway",
                "nodes_group": "cluster_a_nodes", "remote_nodes_group": "cluster_b_nodes", "confirm": "yes"}
        out["connect"] = timed("connect", lab, wait=True, wait_timeout=120, **args)
        out["connect again (nothing changed)"] = timed("connect", lab, wait=True, wait_timeout=120, **args)
        out["reconcile_overlay (one cluster)"] = timed("reconcile_overlay", lab, kubeconfig=lab["a"].kubeconfig,
                                                       nodes_group="cluster_a_nodes")
        if n == min(SIZES):
            proc = fabric.playbook("verify", lab.inventory_path, check=False, kubeconfig=lab["a"].kubeconfig,
                                   remote_kubeconfig=lab["b"].kubeconfig, nodes_group="cluster_a_nodes",
                                   remote_nodes_group="cluster_b_nodes")
            print(f"  ({n} nodes: verify {'passed' if proc.returncode == 0 else 'FAILED'}: "
                  f"{[ln for ln in proc.stdout.splitlines() if ' probes, ' in ln]})", flush=True)
        out["disconnect"] = timed("disconnect", lab, **args)
        # the baseline, same lab: every node in a task of its own (what any connection but local and
        # liqo.fabric.netns gets), against pending.yml's batch above
        per_host = dict(args, node_overlay_batch=False)
        out["connect, a task per node (baseline)"] = timed("connect", lab, wait=True, wait_timeout=120, **per_host)
        out["disconnect, a task per node (baseline)"] = timed("disconnect", lab, **per_host)
    finally:
        t1 = time.monotonic()
        lab.down()
        out["lab down"] = time.monotonic() - t1
    return out


def run():
    if os.geteuid() != 0:
        print("  skipped: needs root for network namespaces")
        return
    results = {}
    for n in SIZES:
        print(f"  -- {n} nodes per cluster, {PODS} pods per node", flush=True)
        results[n] = one_size(n)
        # for bench_scale_in_cluster, later in the same run: the agentless side of the same change
        MEASURED[f"reconcile_overlay (one cluster), {n} nodes (s)"] = results[n]["reconcile_overlay (one cluster)"]
        for name, value in results[n].items():
            unit = "MiB" if "MiB" in name else "s"
            target = TARGETS.get(name) if n == 100 else None
            figure(f"{n} nodes: {name.replace(' (MiB)', '')}", value, unit, target=target)
        subprocess.run(["sync"], check=False)
        for what in ("connect", "disconnect"):
            ratio(f"{n} nodes: {what}, batch / a task per node", results[n][what],
                  results[n][f"{what}, a task per node (baseline)"])
    sizes = sorted(results)
    for a, b in zip(sizes, sizes[1:]):
        for name in results[a]:
            unit = "MiB" if "MiB" in name else "s"
            figure(f"growth per added node {a}->{b}: {name.replace(' (MiB)', '')}",
                   (results[b][name] - results[a][name]) / (b - a), unit)


if __name__ == "__main__":
    run()
