"""Scale of the in-cluster path: what one node agent costs as the cluster grows.

In a cluster, each node agent (the DaemonSet's engine in node mode, playbooks/internal/node_agent.yml) applies its own
node only: it watches its own Node (a field selector), the gateway pods, the gateways and the Configurations, never
the other Nodes or the workload pods. So a change that touches every node (a peer's remapped CIDR) costs one agent run
per node, each on its own node's CPUs, at the same time; the agentless path runs the same change from one Ansible
controller for every node (`reconcile_overlay`, bench_scale's figure, printed beside this one when it ran first).

Here: a light-lab cluster of N nodes (N = 10, 100; LIQO_FABRIC_AGENT_SIZES), the fabric's API, a gateway and its
pod as API objects with a running status (no kubelet: test_in_cluster.py runs real pods on 3 kubelets), and the
real node agent on one node, in that node's netns (as test_node_repoint.py runs it). ROUNDS times
(LIQO_FABRIC_AGENT_ROUNDS, default 3) the Configuration's remapped pod CIDR changes; measured: the change to its
route in the node's table 18952, the agent's playbook run, and the agent's memory (PSS of its process tree)."""
import os
import pathlib
import statistics
import tempfile
import time

from tests.benchmarks.report import MEASURED, figure, ratio
from tests.e2e import fabric
from tests.e2e.fabric import apply_yaml, kubectl, wait_for
from tests.e2e.test_node_repoint import OBJECTS, POD, fdb_remote, log_records, node_agent, put_status
# importable once tests.conftest (imported above) has put the collection on sys.path
from ansible_collections.liqo.fabric.plugins.plugin_utils.speed import warm  # noqa: E402  pylint: disable=wrong-import-order
from tests.lab import Lab, netns

SIZES = [int(x) for x in os.environ.get("LIQO_FABRIC_AGENT_SIZES", "10,100").split(",") if x]
ROUNDS = int(os.environ.get("LIQO_FABRIC_AGENT_ROUNDS", "3"))
PODS = int(os.environ.get("LIQO_FABRIC_SCALE_PODS", "3"))
CIDRS = ["10.71.0.0/16", "10.72.0.0/16"]
GATEWAY_POD_IP = "10.99.0.10"


def tree_pss_mib(pid: int) -> float:
    """Proportional set size of pid and its descendants (the engine and its warm runner, a fork that shares most
    of its pages: PSS counts a shared page once across them, RSS once per process), MiB."""
    total = 0
    for p in [pid] + warm.descendants(pid):
        try:
            with open(f"/proc/{p}/smaps_rollup", encoding="utf-8") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("Pss:"))
        except (OSError, StopIteration):
            pass
    return total / 1024


def routed(ns: str, cidr: str) -> bool:
    return cidr in netns.run(["ip", "-n", ns, "route", "show", "table", "18952"]).stdout


def one_size(n: int) -> dict:
    with Lab([{"name": "a"}], nodes=n, pods_per_node=PODS) as lab, tempfile.TemporaryDirectory() as tmp:
        cluster = lab["a"]
        fabric.install(cluster)
        node = cluster.nodes[-1]
        apply_yaml(cluster, OBJECTS)
        put_status(cluster, "Configuration", "repoint-peer", {"remote": {"cidr": {"pod": [CIDRS[0]]}}})
        apply_yaml(cluster, POD.format(name="gw", node=cluster.nodes[0].name))
        put_status(cluster, "Pod", "gw", {"phase": "Running", "podIP": GATEWAY_POD_IP, "podIPs": [{"ip": GATEWAY_POD_IP}]})
        log_path = os.path.join(tmp, "agent.log")
        got: dict = {"to route": [], "run": []}
        with node_agent(cluster, node, pathlib.Path(tmp), log_path) as agent:
            wait_for(lambda: fdb_remote(node.netns) == GATEWAY_POD_IP and routed(node.netns, CIDRS[0]), timeout=120,
                     interval=0.2, what="the node's overlay to the gateway pod")
            wait_for(lambda: any(r.get("msg") == "playbook done" for r in log_records(log_path)), timeout=60,
                     what="the node agent's first playbook run")
            for r in range(ROUNDS):
                time.sleep(1)   # the queue is idle
                cidr = CIDRS[(r + 1) % 2]
                seen = len(log_records(log_path))
                t0 = time.monotonic()
                put_status(cluster, "Configuration", "repoint-peer", {"remote": {"cidr": {"pod": [cidr]}}})
                wait_for(lambda c=cidr: routed(node.netns, c), timeout=60, interval=0.02, what=f"the route to {cidr}")
                got["to route"].append(time.monotonic() - t0)
                done = wait_for(lambda s=seen: [x for x in log_records(log_path)[s:] if x.get("msg") == "playbook done"],
                                timeout=60, what="the agent's run of the change")
                if done[-1]["result"] != "ok":
                    raise RuntimeError(f"the agent's run failed: {done[-1]}")
                got["run"].append(done[-1]["seconds"])
            got["pss"] = tree_pss_mib(agent.pid)
        errors = [x for x in log_records(log_path) if x.get("level") in ("warning", "error")]
        if errors:
            raise RuntimeError(f"the node agent logged: {errors[:3]}")
        kubectl(cluster, "delete", "pod", "gw", "--grace-period=0", "--force", check=False)
    return got


def run():
    if os.geteuid() != 0:
        print("  skipped: needs root for network namespaces")
        return
    med = {}
    for n in SIZES:
        print(f"  -- {n} nodes, {PODS} pods per node, one node agent, {ROUNDS} remapped-CIDR changes", flush=True)
        got = one_size(n)
        med[n] = {"to route": statistics.median(got["to route"]), "run": statistics.median(got["run"]), "pss": got["pss"]}
        print(f"  ({n} nodes: change -> route " + " / ".join(f"{x:.2f}" for x in got["to route"]) + " s; agent run "
              + " / ".join(f"{x:.2f}" for x in got["run"]) + " s)", flush=True)
        figure(f"{n} nodes: node agent, remapped CIDR change -> its route", med[n]["to route"], "s")
        figure(f"{n} nodes: node agent, its playbook run", med[n]["run"], "s")
        figure(f"{n} nodes: node agent memory (PSS, engine and warm runner)", med[n]["pss"], "MiB")
        agentless = MEASURED.get(f"reconcile_overlay (one cluster), {n} nodes (s)")
        if agentless is not None:
            ratio(f"{n} nodes: agentless reconcile_overlay / one agent's run", agentless, med[n]["run"])
    sizes = sorted(med)
    for a, b in zip(sizes, sizes[1:]):
        for key, unit in (("to route", "s"), ("run", "s"), ("pss", "MiB")):
            figure(f"growth per added node {a}->{b}: node agent {key}", (med[b][key] - med[a][key]) / (b - a), unit)
        before, after = (MEASURED.get(f"reconcile_overlay (one cluster), {x} nodes (s)") for x in (a, b))
        if before is not None and after is not None:
            figure(f"growth per added node {a}->{b}: agentless reconcile_overlay", (after - before) / (b - a), "s")


if __name__ == "__main__":
    run()
