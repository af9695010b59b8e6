"""Failover at scale: one `reconcile_gateway` run moves cluster a's tunnel to its other gateway host and
re-points every node, on two light-lab clusters of N nodes (N = 50, 100; pods per node LIQO_FABRIC_SCALE_PODS,
default 3). The nodes' overlay goes through `internal/overlay_nodes.yml`'s batch (the default) or a task per node
(`node_overlay_batch=false`, the baseline), alternately in one lab, ROUNDS times each (LIQO_FABRIC_FAILOVER_ROUNDS,
default 2). Prints, per size and mode, the medians of the run's wall time and of the outage: the longest gap
between replies of one 50 ms ping flow from a pod on a node that is not a gateway host to a remote pod (the flow
must survive the move). `LIQO_FABRIC_FAILOVER_SIZES=50` measures fewer sizes."""
import os
import statistics
import time

from tests.benchmarks.bench_overlay import failover_once
from tests.benchmarks.report import figure, ratio
from tests.e2e import fabric
from tests.e2e.fabric import get, translate

SIZES = [int(x) for x in os.environ.get("LIQO_FABRIC_FAILOVER_SIZES", "50,100").split(",") if x]
PODS = int(os.environ.get("LIQO_FABRIC_SCALE_PODS", "3"))
ROUNDS = int(os.environ.get("LIQO_FABRIC_FAILOVER_ROUNDS", "2"))
GROUPS = {"gateway_group": "cluster_a_gateway", "remote_gateway_group": "cluster_b_gateway",
          "nodes_group": "cluster_a_nodes", "remote_nodes_group": "cluster_b_nodes"}
MODES = {"batch": True, "a task per node (baseline)": False}


def one_size(n: int) -> dict:
    got: dict = {}
    t0 = time.monotonic()
    with fabric.connected_pair(nodes=n, pods_per_node=PODS, cluster_a={"gateways": 2}, wait_timeout=120,
                               **GROUPS) as lab:
        a, b = lab["a"], lab["b"]
        print(f"  (lab up and connected in {time.monotonic() - t0:.1f} s)", flush=True)
        client = a.nodes[2]     # a-node-1 and a-node-2 are the gateway hosts
        assert client.name not in {g.name for g in a.gateway_nodes}, (client.name, a.gateway_nodes)
        view = get(a, "configurations")[0]["status"]["remote"]["cidr"]["pod"][0]
        target = translate(b.nodes[1].pods[0].ip, b.pod_cidr, view)
        active = 0
        for r in range(ROUNDS):
            for mode in (list(MODES) if r % 2 == 0 else list(MODES)[::-1]):   # alternate who goes first
                active = 1 - active
                # as the controller runs gateway events: a recorded node is skipped only if its plan did not change
                one = failover_once(lab, client.pods[0].netns, target, a.gateway_nodes[active].name,
                                    gateway_probe_wait=10, node_overlay_skip_unchanged=True,
                                    node_overlay_batch=MODES[mode])
                if not one["resumed"]:
                    raise RuntimeError(f"{n} nodes, {mode}: traffic did not resume after the failover ({one['detail']})")
                print(f"  ({n} nodes, round {r}, {mode}: run {one['run']:.1f} s, outage {one['gap']:.2f} s; "
                      f"{one['detail']})", flush=True)
                got.setdefault(mode, []).append(one)
    return got


def run():
    if os.geteuid() != 0:
        print("  skipped: needs root for network namespaces")
        return
    for n in SIZES:
        print(f"  -- {n} nodes per cluster, {PODS} pods per node, {ROUNDS} failovers per mode", flush=True)
        got = one_size(n)
        med = {mode: {k: statistics.median(x[k] for x in runs) for k in ("run", "gap")} for mode, runs in got.items()}
        for mode, m in med.items():
            figure(f"{n} nodes: failover run, {mode}", m["run"], "s")
            figure(f"{n} nodes: failover outage, {mode}", m["gap"], "s", target=3)
        base = "a task per node (baseline)"
        ratio(f"{n} nodes: failover run, batch / a task per node", med["batch"]["run"], med[base]["run"])
        ratio(f"{n} nodes: failover outage, batch / a task per node", med["batch"]["gap"], med[base]["gap"])


if __name__ == "__main__":
    run()
