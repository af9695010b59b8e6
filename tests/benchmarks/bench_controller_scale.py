"""Controller at scale: the controller process (`python -m controller`, warm runner, inventory of the lab)
against two connected light-lab clusters, cluster a with LIQO_FABRIC_CTL_SCALE_NODES nodes (default 100), b with 2.

1. 1,000 pods (10 per node of a; their network namespaces made beforehand) created at once in a's apiserver ->
   every one routed on a's active gateway host (its /32 in the overlay table): converged;
2. controller memory (RSS of the controller process; and with its warm runner's zygote) with those 100 nodes x
   10 pods and 5 peers (the real one, b, plus 4 more Configurations and PublicKeys in a);
3. one pod added on a node of a (not a gateway host) -> its /32 route through the overlay on a's active gateway
   host (the controller's part: the lab's nodes also route each other's pod slices on the underlay, so a ping
   alone would pass before), then a pod of cluster b pings it; 3 times.

LIQO_FABRIC_BENCH_COMPARE_TREE=DIR (a checkout of another revision, e.g. a `git archive` of the previous commit,
with its own `build/collections/ansible_collections/liqo/fabric` link to DIR, so its roles and modules run) runs the same steps with that tree's controller too,
alternately (one controller at a time, in the same lab), so both see the same machine load: before/after figures.
"""
from __future__ import annotations

import concurrent.futures
import json
import os
import shutil
import signal
import tempfile
import time

from tests.benchmarks.bench_controller import rss_mib, tree_rss_mib
from tests.benchmarks.report import figure
from tests.conftest import ROOT
from tests.e2e import fabric
from tests.e2e.test_controller import ControllerProc, Kube, wait_for
from tests.lab import netns

NODES = int(os.environ.get("LIQO_FABRIC_CTL_SCALE_NODES", "100"))
PODS_PER_NODE = 10
PEERS = 5
ADDS = 3
TARGETS = {"add": 1.5, "burst": 10.0, "rss": 150.0}
TABLE = "18952"


def routed(gw_ns: str) -> set:
    """The /32 pod routes in the overlay table of the gateway host."""
    out = netns.exec_in(gw_ns, ["ip", "-4", "route", "show", "table", TABLE], check=False).stdout
    return {line.split()[0] for line in out.splitlines() if line and "/" not in line.split()[0]}


def settle(ctl: ControllerProc, quiet: float = 3.0, timeout: float = 600) -> None:
    """Until the controller's queue is empty and nothing runs, `quiet` seconds in a row."""
    deadline = time.monotonic() + timeout
    since = None
    while time.monotonic() < deadline:
        busy = ctl.metric("liqo_fabric_queue_depth") + ctl.metric("liqo_fabric_queue_running")
        if busy:
            since = None
        elif since is None:
            since = time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
        time.sleep(0.2)
    raise RuntimeError(f"controller {ctl.name} not idle after {timeout} s:\n{ctl.log_tail()}")


def log_offset(ctl: ControllerProc) -> int:
    try:
        return os.path.getsize(ctl.log_path)
    except OSError:
        return 0


def overlay_runs(ctl: ControllerProc, since: int, cluster: str = "a") -> list:
    """The overlay key's runs logged since the byte offset `since`: [(seconds, reasons, timeline)] (the reasons of
    each run are the events it serves: `added Pod/...`, `modified Pod/...`; the timeline: when each task started)."""
    runs, pending = [], None
    with open(ctl.log_path, "rb") as f:
        f.seek(since)
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("key") != f"{cluster}/overlay":
                continue
            if rec.get("msg") == "playbook run":
                pending = rec.get("reasons") or []
            elif rec.get("msg") == "playbook done":
                runs.append((rec.get("seconds"), pending, rec.get("timeline") or []))
    return runs


def make_pod_netns(cluster, node, j=None):
    """The lab's add_pod without the API object: the pod's namespace and veth (returns its plan)."""
    j = j or max([int(p.host_veth[4:]) for p in node.pods] + [0]) + 1
    from tests.lab.topology import plan_cluster  # pylint: disable=import-outside-toplevel
    plan = plan_cluster(cluster.prefix, cluster.name, cluster.pod_cidr, cluster.underlay_cidr, node.index + 1, j, 0)[node.index].pods[j - 1]
    node.pods.append(plan)
    netns.create_netns([plan.netns])
    netns.ip_batch([f"link add name eth0 netns {plan.netns} type veth peer name {plan.host_veth} netns {node.netns}"])
    netns.ip_batch([f"link set {plan.host_veth} master cni0", f"link set {plan.host_veth} up"], netns=node.netns)
    cluster._configure_pod(plan, node)  # pylint: disable=protected-access
    return plan


_CORE = {}


def creator(cluster, workers):
    """A CoreV1Api for the bench's creates: a connection per client thread kept open (the kube client's default pool
    holds 10, so 16 threads opened a TLS connection per call beyond that), created once per cluster."""
    if cluster.kubeconfig not in _CORE:
        from kubernetes import client, config  # pylint: disable=import-outside-toplevel
        cfg = client.Configuration()
        config.load_kube_config(config_file=cluster.kubeconfig, client_configuration=cfg)
        cfg.connection_pool_maxsize = workers
        _CORE[cluster.kubeconfig] = client.CoreV1Api(client.ApiClient(cfg))
    return _CORE[cluster.kubeconfig]


def register(cluster, pairs, workers=16):
    """Each pod created, then its status (IP) written, as the lab does: as fast as the apiserver takes them (the
    responses are not decoded into objects: ~1 ms of the client's CPU per call, which the GIL serialises)."""
    from tests.lab.kube import POD_NAMESPACE, pod_object, pod_status  # pylint: disable=import-outside-toplevel
    core = creator(cluster, workers)

    def done(resp):
        resp.read()   # the body read (not decoded): the connection goes back to the pool clean
        resp.release_conn()

    def one(pod, node):
        done(core.create_namespaced_pod(POD_NAMESPACE, pod_object(pod, node), _preload_content=False))
        done(core.patch_namespaced_pod_status(pod.name, POD_NAMESPACE, pod_status(pod, node), _preload_content=False))
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        for fut in [pool.submit(one, p, n) for p, n in pairs]:
            fut.result()


def unregister(cluster, pods, workers=16):
    from tests.lab.kube import POD_NAMESPACE  # pylint: disable=import-outside-toplevel
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        for fut in [pool.submit(cluster.kube.core.delete_namespaced_pod, p.name, POD_NAMESPACE, grace_period_seconds=0)
                    for p in pods]:
            fut.result()


def peers(kube: Kube, create: bool):
    key = "GExyYe7RJ3Lo5nQVa6K2Tp9zobXCvWmJawsLxu7hn10="
    for i in range(PEERS - 1):
        name = f"bench-peer-{i}"
        if create:
            kube.create({"apiVersion": "networking.liqo.io/v1beta1", "kind": "Configuration",
                         "metadata": {"name": name, "namespace": "default", "labels": {"liqo.io/remote-cluster-id": name}},
                         "spec": {"remote": {"cidr": {"pod": [f"10.{200 + i}.0.0/16"], "external": [f"10.{210 + i}.0.0/16"]}}}})
            kube.create({"apiVersion": "networking.liqo.io/v1beta1", "kind": "PublicKey",
                         "metadata": {"name": name, "namespace": "default", "labels": {"liqo.io/remote-cluster-id": name}},
                         "spec": {"publicKey": key}})
        else:
            kube.delete("Configuration", "default", name)
            kube.delete("PublicKey", "default", name)


def one_pass(label, root, lab, workdir, burst_pods, spare, out):
    a, b = lab["a"], lab["b"]
    gw_ns = a.gateway_nodes[0].netns
    src = b.nodes[-1].pods[0].netns
    kube = Kube(a.kubeconfig)
    # b reaches a's pods at a's pod CIDR as b's IPAM remapped it (both clusters use the same pod CIDR)
    remap = Kube(b.kubeconfig).list("Configuration")[0]["status"]["remote"]["cidr"]["pod"][0]
    ctl = ControllerProc(workdir, {"a": a.kubeconfig, "b": b.kubeconfig}, "--no-leader-elect",
                         name=f"scale-{label}-{len(out.setdefault(label, {}).get('add', []))}",
                         inventory=lab.inventory_path, root=root).start(60)
    try:
        t0 = time.monotonic()
        settle(ctl)
        out[label].setdefault("start to idle", []).append(time.monotonic() - t0)
        # 1. 1,000 pods at once
        want = {p.ip for p, n in burst_pods if not n.gateway}   # the gateway host's own pods are on its bridge
        t0 = time.monotonic()
        off = log_offset(ctl)
        register(a, burst_pods)
        created = time.monotonic() - t0
        wait_for(lambda: want <= routed(gw_ns), 300, "the burst's pods routed on the gateway host", interval=0.1)
        out[label].setdefault("burst", []).append((time.monotonic() - t0, created))
        settle(ctl)
        runs = overlay_runs(ctl, off)
        print(f"    burst: {len(runs)} overlay runs: " + ", ".join(f"{sec} s ({len(r)} reasons)" for sec, r, _s in runs),
              flush=True)
        # 2. memory, 5 peers
        peers(kube, True)
        settle(ctl)
        out[label].setdefault("rss", []).append((rss_mib(ctl.proc.pid), tree_rss_mib(ctl.proc.pid)))
        # 3. one pod added, reachable from b
        for i in range(ADDS):
            pod, node = spare.pop()
            t0 = time.monotonic()
            off = log_offset(ctl)
            register(a, [(pod, node)])
            wait_for(lambda pod=pod: pod.ip in routed(gw_ns), 300, f"{pod.name} routed on the gateway host", interval=0.02)
            took = time.monotonic() - t0
            # the lab's nodes also route each other's pod slices (host-gw on the underlay): a ping alone would
            # pass before the overlay has the pod; it confirms the path once the /32 is there
            dst = fabric.translate(pod.ip, a.pod_cidr, remap)
            wait_for(lambda dst=dst: netns.exec_in(src, ["ping", "-n", "-q", "-c", "1", "-W", "1", dst],
                                                   check=False).returncode == 0, 30, f"{pod.name} reachable from b")
            out[label].setdefault("add", []).append(took)
            settle(ctl, quiet=1.0)
            print(f"    add #{i + 1}: {took:.2f} s; overlay runs: " + "; ".join(
                f"{sec} s {r} tasks at " + " ".join(f"{t}:{name[:24]!r}" for t, name in tl)
                for sec, r, tl in overlay_runs(ctl, off)), flush=True)
        runs = ctl.metric("liqo_fabric_playbook_runs_total", kind="Pod") + ctl.metric("liqo_fabric_playbook_runs_total", kind="Node")
        out[label].setdefault("overlay runs", []).append(runs)
    finally:
        ctl.stop(signal.SIGTERM)
    # back to the start: the pods leave the API (their routes are removed by the next controller's first run)
    peers(kube, False)
    unregister(a, [p for p, _n in burst_pods] + [p for p, _n in out[label]["_added"]])


def report(label, res):
    print(f"  -- {label}", flush=True)
    for i, (took, created) in enumerate(res["burst"]):
        figure(f"{PODS_PER_NODE * NODES} pods at once -> all routed (pass {i + 1})", took, "s", target=TARGETS["burst"])
        figure("  of which creating them in the apiserver (16 clients)", created, "s")
    for i, (rss, tree) in enumerate(res["rss"]):
        figure(f"controller RSS, {NODES} nodes x {PODS_PER_NODE} pods x {PEERS} peers", rss, "MiB", target=TARGETS["rss"])
        figure("  with its warm runner's zygote (summed)", tree, "MiB")
    for i, took in enumerate(res["add"]):
        figure(f"one pod added -> routed by the overlay (#{i + 1})", took, "s", target=TARGETS["add"])
    for v in res["start to idle"]:
        figure("controller start -> idle (first overlay run on every node)", v, "s")
    figure("overlay playbook runs (last pass)", res["overlay runs"][-1], "runs")


def run():
    if os.geteuid() != 0:
        print("  skipped: needs root for the lab")
        return
    from tests.lab import Lab  # pylint: disable=import-outside-toplevel
    compare = os.environ.get("LIQO_FABRIC_BENCH_COMPARE_TREE")
    trees = ([("compared tree", os.path.abspath(compare))] if compare else []) + [("this tree", ROOT)]
    passes = int(os.environ.get("LIQO_FABRIC_CTL_SCALE_PASSES", "2" if compare else "1"))
    workdir = tempfile.mkdtemp(prefix="lfab-bench-ctlscale-")
    out: dict = {}
    try:
        t0 = time.monotonic()
        with Lab([{"name": "a", "nodes": NODES, "pods_per_node": 0}, {"name": "b", "nodes": 2, "pods_per_node": 1}],
                 pod_cidr="10.243.0.0/16") as lab:
            a, b = lab["a"], lab["b"]
            print(f"  lab up ({NODES} + 2 nodes): {time.monotonic() - t0:.1f} s", flush=True)
            fabric.install(a)
            fabric.install(b)
            t0 = time.monotonic()
            fabric.playbook("connect", lab.inventory_path, kubeconfig=a.kubeconfig, remote_kubeconfig=b.kubeconfig,
                            wait=True, wait_timeout=120, gateway_group="cluster_a_gateway",
                            remote_gateway_group="cluster_b_gateway", nodes_group="cluster_a_nodes",
                            remote_nodes_group="cluster_b_nodes", proc_timeout=1800)
            print(f"  connect: {time.monotonic() - t0:.1f} s", flush=True)
            t0 = time.monotonic()
            burst = [(make_pod_netns(a, n, j), n) for n in a.nodes for j in range(1, PODS_PER_NODE + 1)]
            plain = [n for n in a.nodes if not n.gateway]
            print(f"  {len(burst)} pod namespaces made: {time.monotonic() - t0:.1f} s", flush=True)
            k = 0
            for p in range(passes):
                for label, root in trees:
                    spare = []
                    for i in range(ADDS):
                        node = plain[(11 * k + 37 * i) % len(plain)]
                        spare.append((make_pod_netns(a, node), node))
                    k += 1
                    out.setdefault(label, {})["_added"] = list(spare)
                    print(f"  pass {p + 1}: {label} ({root})", flush=True)
                    one_pass(label, root, lab, workdir, burst, spare, out)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    for label, _root in trees:
        if label in out:
            report(label, out[label])
