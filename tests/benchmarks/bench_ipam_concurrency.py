"""Concurrent IPAM allocators against a lab cluster's real kube-apiserver, as tests/e2e/test_ipam_concurrency.py
runs them: 8 allocator threads (each with its own client) run ipam_store.reconcile in a loop while 4 threads create
48 Configurations that all want the same remote CIDRs, deleting 12 of them on the way; the ledger ConfigMap is
written with its resourceVersion, so the losers of each race re-read and recompute. Printed: the wall time until
every allocator made its last pass, reconciles, conflict retries, status writes, releases and ledger versions."""
import concurrent.futures
import os
import random
import subprocess
import threading
import time

from tests.ansible_run import ROOT
from tests.benchmarks.report import figure
from tests.conftest import COLLECTIONS  # noqa: F401  pylint: disable=unused-import
from tests.lab import Lab

# importable once tests.conftest has put build/collections on sys.path
from ansible_collections.liqo.fabric.plugins.module_utils.ipam import store as ipam_store  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import Kube  # noqa: E402  pylint: disable=wrong-import-position
from tests.e2e.test_ipam_concurrency import (  # noqa: E402  pylint: disable=wrong-import-position
    ALLOCATORS, KUBECTL, NAMESPACES, PER_NAMESPACE, create_and_delete)


def race(cluster) -> dict:
    local = {"pod_cidrs": [cluster.pod_cidr], "service_cidr": cluster.service_cidr,
             "external_cidr": cluster.external_cidr, "internal_cidr": cluster.internal_cidr}
    admin = Kube(cluster.kubeconfig)
    for ns in NAMESPACES:
        admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    admin.close()
    done = threading.Event()
    lock = threading.Lock()
    stats = {"runs": 0, "retries": 0, "status_writes": 0, "released": 0, "ledger versions": 0}

    def allocator(seed):
        kube = Kube(cluster.kubeconfig)
        rnd = random.Random(seed)
        try:
            while True:
                final = done.is_set()  # one more full pass after the creators are done
                res = ipam_store.reconcile(kube, local)
                with lock:
                    stats["runs"] += 1
                    stats["retries"] += res.retries
                    stats["status_writes"] += len(res.status_writes)
                    stats["released"] += len(res.released)
                    stats["ledger versions"] += res.ledger_after != res.ledger_before
                if final:
                    return
                time.sleep(rnd.uniform(0, 0.02))
        finally:
            kube.close()

    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(ALLOCATORS + len(NAMESPACES)) as pool:
        allocs = [pool.submit(allocator, s) for s in range(ALLOCATORS)]
        for f in [pool.submit(create_and_delete, cluster.kubeconfig, ns) for ns in NAMESPACES]:
            f.result()
        done.set()
        for f in allocs:
            f.result()
    stats["seconds"] = time.monotonic() - t0
    return stats


def run():
    if os.geteuid() != 0 or not os.access(KUBECTL, os.X_OK):
        print("  skipped: needs root and kubectl (a lab cluster)")
        return
    with Lab([{"name": "c"}], nodes=1, pods_per_node=1) as lab:
        c = lab["c"]
        for argv in (["apply", "-f", os.path.join(ROOT, "deploy", "crds")],
                     ["wait", "--for", "condition=Established", "--timeout", "60s", "crd", "-l",
                      "app.kubernetes.io/part-of=liqo-fabric"]):
            subprocess.run([KUBECTL, "--kubeconfig", c.kubeconfig, *argv], capture_output=True, text=True, check=True)
        got = race(c)
    print(f"  {got['runs']} reconciles by {ALLOCATORS} allocators in {got['seconds']:.1f} s: {got['retries']} conflict "
          f"retries, {got['status_writes']} status writes, {got['released']} released, {got['ledger versions']} ledger "
          "versions", flush=True)
    figure(f"{len(NAMESPACES) * PER_NAMESPACE} Configurations, {ALLOCATORS} allocators: until all converged",
           got["seconds"], "s")
    figure("  conflict retries (resourceVersion races lost)", got["retries"], "retries")
