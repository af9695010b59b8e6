"""A node agent re-pointing its overlay link when the active gateway pod changes, as tests/e2e/test_node_repoint.py
runs it: the real engine in node mode in a light lab node's netns, the gateway's two pods as API objects with a
running status (no kubelet), the active label moved from the oldest pod to the other. ROUNDS times
(LIQO_FABRIC_REPOINT_ROUNDS, default 3) with one agent, the pods made anew between rounds; medians of: label moved
-> the node's link re-pointed (the in-process apply, controller/node_repoint.py), the in-process apply's own time,
and label moved -> the playbook run of the same event done."""
import os
import pathlib
import statistics
import tempfile
import time

from tests.benchmarks.report import figure
from tests.e2e import fabric
from tests.e2e.fabric import kubectl, wait_for
from tests.e2e.test_node_repoint import (fdb_remote, gateway_pods_on, log_records, move_the_active_label, node_agent,
                                         remove_gateway_pods)
from tests.lab import Lab

ROUNDS = int(os.environ.get("LIQO_FABRIC_REPOINT_ROUNDS", "3"))


def settled(node, ips: dict, log_path: str, since: float) -> None:
    """The link on the active gw-old and a playbook run done after `since` (epoch s), then the queue idle."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(since))
    wait_for(lambda: fdb_remote(node.netns) == ips["gw-old"], timeout=90, interval=0.2,
             what="the node's overlay link to the oldest gateway pod")
    wait_for(lambda: any(r.get("msg") == "playbook done" and r.get("ts", "") >= stamp for r in log_records(log_path)),
             timeout=60, what="the node agent's run of the new pods")
    time.sleep(1)


def run():
    if os.geteuid() != 0:
        print("  skipped: needs root for network namespaces")
        return
    got: dict = {"repointed": [], "apply": [], "ran": []}
    with Lab([{"name": "a"}], nodes=1, pods_per_node=1) as lab, tempfile.TemporaryDirectory() as tmp:
        cluster = lab["a"]
        fabric.install(cluster)
        node = cluster.nodes[0]
        log_path = os.path.join(tmp, "agent.log")
        ips = gateway_pods_on(cluster, node)
        # one agent for every round: its API forwarder's port stays taken for a while after it stops
        with node_agent(cluster, node, pathlib.Path(tmp), log_path):
            for r in range(ROUNDS):
                if r:   # the pods made anew: gw-old the oldest, so active again
                    since = time.time()
                    kubectl(cluster, "delete", "pod", "gw-old", "gw-new", "--grace-period=0", "--force", check=False)
                    ips = gateway_pods_on(cluster, node)
                else:
                    since = 0
                settled(node, ips, log_path, since)
                moved = move_the_active_label(cluster, node, ips, log_path)
                if not moved["inproc"] or moved["done"]["result"] != "ok":
                    raise RuntimeError(f"round {r + 1}: no in-process re-point or a failed run: "
                                       f"{moved['inproc'][-1:]} {moved['done']}")
                got["repointed"].append(moved["repointed"])
                got["apply"].append(float(moved["inproc"][-1]["seconds"]))
                got["ran"].append(moved["ran"])
                print(f"  round {r + 1}: label moved -> link re-pointed {moved['repointed']:.2f} s (the in-process "
                      f"apply {moved['inproc'][-1]['seconds']} s); -> the playbook run of the same event done "
                      f"{moved['ran']:.2f} s", flush=True)
        errors = [x for x in log_records(log_path) if x.get("level") in ("warning", "error")]
        remove_gateway_pods(cluster, node)
    if errors:
        print(f"  the node agent logged: {errors[:3]}")
    figure(f"label moved -> link re-pointed, median of {ROUNDS}", statistics.median(got["repointed"]), "s")
    figure(f"  of which the in-process apply, median of {ROUNDS}", statistics.median(got["apply"]), "s")
    figure(f"label moved -> its playbook run done, median of {ROUNDS}", statistics.median(got["ran"]), "s")
