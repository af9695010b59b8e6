"""Concurrent allocators against a lab cluster's real kube-apiserver never hand out a prefix twice.

Eight allocator threads, each with its own Kubernetes client, run ipam_store.reconcile in a loop while
other threads create (and delete) Configurations that all want the same remote CIDRs. The ledger
ConfigMap is written with its resourceVersion, so the losers of each race re-read and recompute: the
test asserts such retries happened, that every committed ledger and the final Configuration statuses
are pairwise disjoint, and that everything converges (a last reconcile changes nothing).
"""
import concurrent.futures
import ipaddress
import json
import os
import random
import shutil
import subprocess
import threading
import time

import pytest

from ansible_collections.liqo.fabric.plugins.module_utils.ipam import store as ipam_store
from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import GROUP, VERSION, Kube
from tests.ansible_run import ROOT
from tests.conftest import require_root
from tests.lab import Lab

pytestmark = pytest.mark.e2e

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
ALLOCATORS = 8
NAMESPACES = ("t0", "t1", "t2", "t3")
PER_NAMESPACE = 12      # 48 Configurations
DELETED_PER_NAMESPACE = 3


@pytest.fixture(scope="module")
def cluster():
    require_root()
    if not os.access(KUBECTL, os.X_OK):
        pytest.skip("kubectl is not installed")
    with Lab([{"name": "c"}], nodes=1, pods_per_node=1) as lab:
        c = lab["c"]
        for argv in (["apply", "-f", os.path.join(ROOT, "deploy", "crds")],
                     ["wait", "--for", "condition=Established", "--timeout", "60s", "crd", "-l", "app.kubernetes.io/part-of=liqo-fabric"]):
            proc = subprocess.run([KUBECTL, "--kubeconfig", c.kubeconfig, *argv], capture_output=True, text=True, check=False)
            assert proc.returncode == 0, proc.stderr
        yield c


def _spec(n):
    """Configuration number n (0..47): mostly the local cluster's own CIDRs (every one needs a remap, all
    want the same first free prefixes: maximal contention), some /24s inside them, some free ones."""
    if n % 4 == 3:
        return "10.%d.0.0/16" % (150 + n // 4), "10.%d.0.0/16" % (200 + n // 4)  # free: kept as they are
    if n % 4 == 2:
        return "10.243.%d.0/24" % n, "10.70.%d.0/24" % n  # inside local CIDRs: remapped /24s
    return "10.243.0.0/16", "10.70.0.0/16"


def _body(namespace, name, pod, external):
    return {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "Configuration",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"remote": {"cidr": {"pod": [pod], "external": [external]}}}}


def create_and_delete(kubeconfig, ns):
    """One namespace's Configurations created with random pauses, three of them deleted while the allocators run
    (their prefixes are released); returns the names left."""
    kube = Kube(kubeconfig)
    rnd = random.Random(ns)
    try:
        names = []
        for i in range(PER_NAMESPACE):
            pod, ext = _spec(NAMESPACES.index(ns) * PER_NAMESPACE + i)
            name = "c%02d" % i
            kube.create(_body(ns, name, pod, ext))
            names.append(name)
            time.sleep(rnd.uniform(0, 0.12))
            if i in (4, 8, 11):
                kube.delete("Configuration", ns, names.pop(rnd.randrange(len(names))))
        return names
    finally:
        kube.close()


def _assert_disjoint(pairs, local, what):
    nets = [(who, ipaddress.ip_network(cidr)) for who, cidr in pairs]
    for i, (w1, n1) in enumerate(nets):
        for w2, n2 in nets[:i]:
            assert not n1.overlaps(n2), "%s: %s %s overlaps %s %s" % (what, w1, n1, w2, n2)
        for net in local:
            assert not n1.overlaps(net), "%s: %s %s overlaps local %s" % (what, w1, n1, net)


def test_concurrent_allocators_never_collide_and_converge(cluster):
    local = {"pod_cidrs": [cluster.pod_cidr], "service_cidr": cluster.service_cidr,
             "external_cidr": cluster.external_cidr, "internal_cidr": cluster.internal_cidr}
    local_nets = [ipaddress.ip_network(c) for c in (cluster.pod_cidr, cluster.service_cidr, cluster.external_cidr,
                                                    cluster.internal_cidr)]
    admin = Kube(cluster.kubeconfig)
    for ns in NAMESPACES:
        admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})

    done = threading.Event()
    lock = threading.Lock()
    committed = []   # every ledger version some allocator wrote
    stats = {"retries": 0}

    def allocator(seed):
        kube = Kube(cluster.kubeconfig)
        rnd = random.Random(seed)
        try:
            final = False
            while True:
                final = done.is_set()  # one more full pass after the creators are done
                res = ipam_store.reconcile(kube, local)
                with lock:
                    stats["retries"] += res.retries
                    if res.ledger_after != res.ledger_before:
                        committed.append(res.ledger_after)
                if final:
                    return
                time.sleep(rnd.uniform(0, 0.02))
        finally:
            kube.close()

    with concurrent.futures.ThreadPoolExecutor(ALLOCATORS + len(NAMESPACES)) as pool:
        allocs = [pool.submit(allocator, s) for s in range(ALLOCATORS)]
        creators = [pool.submit(create_and_delete, cluster.kubeconfig, ns) for ns in NAMESPACES]
        alive = {ns: f.result() for ns, f in zip(NAMESPACES, creators)}
        done.set()
        for f in allocs:
            f.result()  # re-raises an allocator's exception (e.g. it gave up after too many conflicts)

    # the race was real: some allocators lost a resourceVersion race and recomputed
    assert stats["retries"] > 0

    # every committed ledger version: no prefix held twice, none local
    assert len(committed) >= 2  # allocations interleaved with creations: several ledger versions
    for version, state in enumerate(committed):
        _assert_disjoint([((a["owner"], a["field"]), a["remapped"]) for a in state["allocations"]], local_nets,
                         "ledger version %d" % version)

    # final ledger = exactly the living Configurations (the deleted ones' prefixes were released), and their
    # status agrees with it
    state, dummy = ipam_store._read_ledger(admin)  # pylint: disable=protected-access
    state = json.loads(state)
    owners = {"%s/%s" % (ns, n) for ns, names in alive.items() for n in names}
    assert len(owners) == len(NAMESPACES) * (PER_NAMESPACE - DELETED_PER_NAMESPACE)
    assert {a["owner"] for a in state["allocations"]} == owners
    by_key = {(a["owner"], a["field"]): a["remapped"] for a in state["allocations"]}
    confs = admin.list("Configuration")
    assert {"%s/%s" % (c["metadata"]["namespace"], c["metadata"]["name"]) for c in confs} == owners
    statuses = []
    for conf in confs:
        owner = "%s/%s" % (conf["metadata"]["namespace"], conf["metadata"]["name"])
        cidr = {f: v[0] for f, v in conf["status"]["remote"]["cidr"].items()}  # v1beta1: lists of one
        assert cidr == {"pod": by_key[(owner, "pod")], "external": by_key[(owner, "external")]}, owner
        cond = [c for c in conf["status"]["conditions"] if c["type"] == ipam_store.CONDITION][0]
        assert cond["status"] == "True", (owner, cond)
        spec = {f: v[0] for f, v in conf["spec"]["remote"]["cidr"].items()}
        for field in ("pod", "external"):
            assert ipaddress.ip_network(cidr[field]).prefixlen == ipaddress.ip_network(spec[field]).prefixlen
            statuses.append(((owner, field), cidr[field]))
        if int(conf["metadata"]["name"][1:]) % 4 == 3:  # free remote CIDRs are kept as they are (PER_NAMESPACE % 4 == 0)
            assert cidr == spec, owner
        else:
            assert cidr["pod"] != spec["pod"] and cidr["external"] != spec["external"], owner
    _assert_disjoint(statuses, local_nets, "Configuration status")

    # converged: another allocator finds nothing to do and writes nothing
    res = ipam_store.reconcile(admin, local)
    assert not res.changed and res.status_writes == [] and res.retries == 0
    admin.close()
